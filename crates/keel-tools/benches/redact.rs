//! Redacting a 10 MB export (issue 28: at most 200 ms). Run:
//! `cargo bench -p keel-tools --bench redact`.
//!
//! The export is what `keel sessions export` prints for a long working session: Markdown
//! with prose, code, commands' output (test runs, logs, JSON) and a few secrets among them,
//! so most lines hold one of the rule set's keywords (`key`, `token`, `api`, `auth`, `secret`).
//! "first" includes compiling the patterns a run needs; "again" is a later export in the same
//! process.

use std::time::Instant;

use keel_tools::redact;

fn export(bytes: usize) -> String {
    let chunk = r#"## assistant

I ran the tests and read `src/auth/token.rs`; the key rotation path is covered.

```rust
pub fn refresh(token: &Token, api: &ApiClient) -> Result<Token, AuthError> {
    let key = api.signing_key()?;
    token.renew(&key).map_err(AuthError::from)
}
```

### tool bash: cargo test -p auth
test auth::token::refresh_renews_the_key ... ok
test auth::token::expired_tokens_are_refused ... ok
{"level":"info","request_id":"123e4567-e89b-12d3-a456-426614174000","msg":"token refreshed","api_version":"2024-06-01"}
commit 3f786850e387550fdab836ed7e6dc881de23001b
export OPENAI_API_KEY=Xq9vB2mLk4Rt8Wz1Np6Hs3Dy7Fc5Gj0Ua2Ei
Authorization: Bearer 8f3Kd92LmQx7Rv1Tz4Yw6Np0Hs5Bj
the secret is kept in the vault; access is audited

"#;
    let mut out = String::with_capacity(bytes + chunk.len());
    while out.len() < bytes {
        out.push_str(chunk);
    }
    out
}

fn main() {
    let text = export(10 * 1024 * 1024);
    let secrets =
        redact::secrets_from_env([("GITHUB_TOKEN", "ghp_abcdefghijklmnopqrstuvwxyz0123456789")]);
    let started = Instant::now();
    let first = redact::redact(&text, &secrets);
    let first_ms = started.elapsed().as_secs_f64() * 1000.0;
    let mut again = Vec::new();
    for _ in 0..5 {
        let started = Instant::now();
        let done = redact::redact(&text, &secrets);
        again.push(started.elapsed().as_secs_f64() * 1000.0);
        assert_eq!(done.count, first.count);
    }
    again.sort_by(f64::total_cmp);
    println!(
        "redact {:.1} MB: first {first_ms:.0} ms, again median {:.0} ms (min {:.0}), {} secrets masked",
        text.len() as f64 / 1e6,
        again[again.len() / 2],
        again[0],
        first.count
    );
}
