#![allow(clippy::unwrap_used, clippy::expect_used)]

use pretty_assertions::assert_eq;
use proptest::prelude::*;

use super::*;

fn env(pairs: &[(&str, &str)]) -> Vec<Secret> {
    secrets_from_env(pairs.iter().map(|(k, v)| ((*k).to_owned(), *v)))
}

fn masked(text: &str) -> String {
    redact(text, &[]).text
}

#[test]
fn secret_variables_are_chosen_by_name_and_length() {
    let secrets = env(&[
        ("OPENAI_API_KEY", "sk-live-value-12345"),
        ("MY_SERVICE_TOKEN", "abcdefgh"),
        ("DB_PASSWORD", "short"),
        ("HOME", "/home/someone/secret"),
        ("DATABASE_URL", "postgres://u:p@db/x"),
        ("ALSO_A_KEY", "abcdefgh"),
    ]);
    let names: Vec<&str> = secrets.iter().map(|s| s.name.as_str()).collect();
    // Longest value first; one entry per value (the first name wins).
    assert_eq!(names, ["DATABASE_URL", "OPENAI_API_KEY", "ALSO_A_KEY"]);
    assert!(is_secret_name("aws_secret_access_key"));
    assert!(is_secret_name("GITHUB_TOKEN") && !is_secret_name("PATH"));
}

#[test]
fn environment_values_are_masked_with_their_names() {
    let secrets = env(&[
        ("ANTHROPIC_API_KEY", "plain-value-xyz"),
        ("X_SECRET", "hunter2hunter2"),
    ]);
    let done = redact(
        "key=plain-value-xyz pass=hunter2hunter2 again plain-value-xyz",
        &secrets,
    );
    assert_eq!(
        done.text,
        "key=[REDACTED:env:ANTHROPIC_API_KEY] pass=[REDACTED:env:X_SECRET] again \
         [REDACTED:env:ANTHROPIC_API_KEY]"
    );
    assert_eq!(done.count, 3);
    assert_eq!(
        done.kinds,
        BTreeMap::from([
            ("env:ANTHROPIC_API_KEY".to_owned(), 2),
            ("env:X_SECRET".to_owned(), 1)
        ])
    );
}

#[test]
fn every_token_shape_is_masked() {
    let body = "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8S9t0";
    let cases = [
        (format!("sk-ant-api03-{body}"), "anthropic_key"),
        (format!("sk-proj-{body}"), "api_key"),
        (format!("sk-{body}"), "api_key"),
        (format!("sk_live_{body}"), "stripe_key"),
        (format!("sk_test_{body}"), "stripe_key"),
        (format!("rk_live_{body}"), "stripe_key"),
        (format!("ghp_{body}"), "github_token"),
        (format!("gho_{body}"), "github_token"),
        (format!("ghu_{body}"), "github_token"),
        (format!("ghs_{body}"), "github_token"),
        (format!("ghr_{body}"), "github_token"),
        (format!("github_pat_11AB_{body}"), "github_token"),
        (format!("glpat-{body}"), "gitlab_token"),
        ("xoxb-123456789012-abcdefABCDEF".to_owned(), "slack_token"),
        ("xoxp-123456789012-abcdefABCDEF".to_owned(), "slack_token"),
        ("xoxa-2-123456789012".to_owned(), "slack_token"),
        ("xoxs-123456789012".to_owned(), "slack_token"),
        ("xapp-1-A0123456789".to_owned(), "slack_token"),
        ("AKIAIOSFODNN7EXAMPLE".to_owned(), "aws_access_key_id"),
        ("ASIAIOSFODNN7EXAMPLE".to_owned(), "aws_access_key_id"),
        (
            "AIzaSyA-1234567890abcdefghijklmnopqrstu".to_owned(),
            "google_api_key",
        ),
        (format!("hf_{body}"), "huggingface_token"),
        (format!("npm_{body}"), "npm_token"),
        (format!("pypi-AgEIcHlwaS5vcmc{body}"), "pypi_token"),
        (
            "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.c2lnbmF0dXJlLWJ5dGVz".to_owned(),
            "jwt",
        ),
    ];
    for (token, kind) in cases {
        let done = redact(&format!("before {token} after"), &[]);
        assert_eq!(
            done.text,
            format!("before [REDACTED:{kind}] after"),
            "{token}"
        );
        assert_eq!(done.count, 1, "{token}");
    }
}

#[test]
fn lookalikes_are_left_alone() {
    for text in [
        "task-manager-for-the-whole-team-here",
        "sk-learn-contrib-lightning-and-more",
        "disk-usage-report-for-all-partitions",
        "ghp_short",
        "MAKIAIOSFODNN7EXAMPLE",
        "https://example.com:8443/path?q=a@b",
        "ssh://git@github.com/owner/repo",
        "eyJhbGciOi",
        "-----BEGIN PUBLIC KEY-----\nMIIB\n-----END PUBLIC KEY-----",
        "[REDACTED:api_key]",
    ] {
        assert_eq!(masked(text), text);
    }
}

#[test]
fn url_passwords_keep_scheme_user_and_host() {
    assert_eq!(
        masked("DATABASE_URL=postgres://app:s3cr3t-p4ss@db.internal:5432/prod"),
        "DATABASE_URL=postgres://app:[REDACTED:url_password]@db.internal:5432/prod"
    );
    assert_eq!(
        masked("redis://:pw-only@cache:6379 and https://u:p@h"),
        "redis://:[REDACTED:url_password]@cache:6379 and https://u:[REDACTED:url_password]@h"
    );
    // A token as the user name is masked too, and the password after it.
    let user = "ghp_A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8";
    assert_eq!(
        masked(&format!("https://{user}:x-oauth-basic@github.com/o/r")),
        "https://[REDACTED:github_token]:[REDACTED:url_password]@github.com/o/r"
    );
}

#[test]
fn private_key_blocks_are_masked_whole_even_when_cut_short() {
    let key = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\nQyNTUxOQAAACD+/=\n\
               -----END OPENSSH PRIVATE KEY-----";
    assert_eq!(
        masked(&format!("cat id:\n{key}\ndone")),
        "cat id:\n[REDACTED:private_key]\ndone"
    );
    // As JSON escapes it (a tool call's arguments in the Markdown export).
    let escaped = key.replace('\n', "\\n");
    assert_eq!(
        masked(&format!("\"{escaped}\"")),
        "\"[REDACTED:private_key]\""
    );
    // Cut before its footer (`head`): the key material after the header goes too.
    assert_eq!(
        masked(
            "-----BEGIN RSA PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\n\nMIIEow+/AIBAAK\nAbC=\n... 40 more lines"
        ),
        "[REDACTED:private_key]... 40 more lines"
    );
}

#[test]
fn json_strings_are_masked_and_counted() {
    let mut value = serde_json::json!({
        "history": [{"text": "token sk-ant-api03-AAAAAAAAAAAAAAAAAAAAAAAA1 end"}],
        "args": {"url": "https://u:pw@h", "n": 3},
    });
    let done = redact_json(&mut value, &[]);
    assert_eq!(done.count, 2);
    assert_eq!(
        value,
        serde_json::json!({
            "history": [{"text": "token [REDACTED:anthropic_key] end"}],
            "args": {"url": "https://u:[REDACTED:url_password]@h", "n": 3},
        })
    );
}

/// Tokens and secret values of every kind, from random bodies.
fn secret_piece() -> impl Strategy<Value = String> {
    let body = "[A-Za-z0-9]{40,60}";
    prop_oneof![
        body.prop_map(|b| format!("sk-ant-api03-{b}")),
        body.prop_map(|b| format!("sk-{b}7")),
        body.prop_map(|b| format!("ghp_{b}")),
        body.prop_map(|b| format!("github_pat_{b}")),
        body.prop_map(|b| format!("glpat-{b}")),
        body.prop_map(|b| format!("xoxb-{b}")),
        body.prop_map(|b| format!("hf_{b}")),
        body.prop_map(|b| format!("npm_{b}")),
        body.prop_map(|b| format!("pypi-{b}")),
        body.prop_map(|b| format!("sk_live_{b}")),
        "[A-Z0-9]{16}".prop_map(|b| format!("AKIA{b}")),
        "[A-Za-z0-9_-]{35}".prop_map(|b| format!("AIza{b}")),
        (body, body).prop_map(|(a, b)| format!("eyJ{a}.eyJ{b}.{a}")),
        body.prop_map(|b| format!(
            "-----BEGIN EC PRIVATE KEY-----\n{b}\n-----END EC PRIVATE KEY-----"
        )),
        body.prop_map(|b| format!("https://user:{b}@host/")),
        Just("envsecret-value-1".to_owned()),
        Just("another:env value".to_owned()),
    ]
}

/// Text around secrets: words, punctuation, markers real and fake, parts of prefixes.
fn noise() -> impl Strategy<Value = String> {
    prop_oneof![
        "[ a-z0-9_\\-:/@.\\[\\]\n]{0,12}",
        Just("[REDACTED:api_key]".to_owned()),
        Just("[REDACTED:env:NOT_A_SECRET]".to_owned()),
        Just("[REDACTED:".to_owned()),
        Just("sk-".to_owned()),
        Just("https://".to_owned()),
        Just("-----BEGIN RSA PRIVATE KEY-----".to_owned()),
        Just("é€😀".to_owned()),
    ]
}

fn test_secrets() -> Vec<Secret> {
    env(&[
        ("SOME_TOKEN", "envsecret-value-1"),
        ("APP_PASSWORD", "another:env value"),
    ])
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    /// Redaction leaves nothing it would detect, and redacting again changes nothing.
    #[test]
    fn redaction_leaves_no_secret_and_is_idempotent(
        parts in proptest::collection::vec(prop_oneof![noise(), secret_piece()], 0..12)
    ) {
        let secrets = test_secrets();
        let text: String = parts.concat();
        let once = redact(&text, &secrets);
        prop_assert_eq!(find(&once.text, &secrets), Vec::<Found>::new());
        let twice = redact(&once.text, &secrets);
        prop_assert_eq!(&twice.text, &once.text);
        prop_assert_eq!(twice.count, 0);
    }

    /// A secret set apart by spaces never survives, whatever surrounds it.
    #[test]
    fn planted_secrets_never_survive(
        before in noise(),
        secret in secret_piece(),
        after in noise(),
    ) {
        let secrets = test_secrets();
        let text = format!("{before} {secret} {after}");
        let done = redact(&text, &secrets);
        let core = secret
            .trim_start_matches("https://user:")
            .trim_end_matches("@host/");
        prop_assert!(!done.text.contains(core), "{:?} -> {:?}", text, done.text);
        prop_assert!(done.count >= 1);
    }
}

#[test]
fn the_corpus_secrets_are_masked_and_its_lookalikes_survive() {
    use super::corpus::{LOOKALIKES, SECRETS};
    for (line, secret) in SECRETS {
        let done = masked(line);
        assert!(!done.contains(secret), "{line}\n  became {done}");
        // Masking leaves what names the secret readable.
        assert!(done.contains(MARKER_PREFIX), "{done}");
        assert_eq!(masked(&done), done, "redacting twice changes {done}");
    }
    for line in LOOKALIKES {
        assert_eq!(&masked(line), line);
    }
    // All of it at once, as one document (an export, a tool's output).
    let document: String = SECRETS
        .iter()
        .map(|(line, _)| *line)
        .chain(LOOKALIKES.iter().copied())
        .collect::<Vec<_>>()
        .join("\n");
    let done = masked(&document);
    for (_, secret) in SECRETS {
        assert!(!done.contains(secret), "{secret}");
    }
    for line in LOOKALIKES {
        assert!(done.contains(line), "{line}");
    }
}

#[test]
fn a_named_secret_keeps_its_name() {
    assert_eq!(
        masked("export OPENAI_API_KEY=Xq9vB2mLk4Rt8Wz1Np6Hs3Dy7Fc5Gj0Ua2Ei"),
        "export OPENAI_API_KEY=[REDACTED:generic-api-key]"
    );
}
