//! Which hosts sandboxed commands may reach through the proxy: `sandbox.network.allow` and
//! `deny` in the user's configuration, over a default list of the registries and source
//! hosts a build needs.

/// The hosts a build usually needs: package registries and source hosts. A pattern is a
/// host name, or `*.` and a domain for every name under it (not the domain itself).
pub const DEFAULT_ALLOW: &[&str] = &[
    // Rust
    "crates.io",
    "index.crates.io",
    "static.crates.io",
    "static.rust-lang.org",
    // JavaScript
    "registry.npmjs.org",
    "registry.yarnpkg.com",
    "nodejs.org",
    // Python
    "pypi.org",
    "files.pythonhosted.org",
    // Go
    "proxy.golang.org",
    "sum.golang.org",
    "storage.googleapis.com",
    // Ruby, Java
    "rubygems.org",
    "index.rubygems.org",
    "repo.maven.apache.org",
    "repo1.maven.org",
    "plugins.gradle.org",
    "services.gradle.org",
    // Source hosts
    "github.com",
    "api.github.com",
    "codeload.github.com",
    "*.githubusercontent.com",
    "gitlab.com",
    "bitbucket.org",
];

/// The allow and deny lists in force: a host is reachable when it matches an allow pattern
/// and no deny pattern. Names are compared without case and without a trailing dot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetworkRules {
    allow: Vec<String>,
    deny: Vec<String>,
}

impl Default for NetworkRules {
    fn default() -> Self {
        Self::new(DEFAULT_ALLOW.iter().map(|s| (*s).to_owned()), [])
    }
}

impl NetworkRules {
    /// Rules from the two lists (the default list is not added: see [`NetworkRules::default`]).
    pub fn new(
        allow: impl IntoIterator<Item = String>,
        deny: impl IntoIterator<Item = String>,
    ) -> Self {
        let clean = |list: &mut Vec<String>| {
            for item in list.iter_mut() {
                *item = normalise(item);
            }
            list.retain(|s| !s.is_empty());
            list.sort();
            list.dedup();
        };
        let mut allow: Vec<String> = allow.into_iter().collect();
        let mut deny: Vec<String> = deny.into_iter().collect();
        clean(&mut allow);
        clean(&mut deny);
        Self { allow, deny }
    }

    /// Whether `host` (a name or an address literal) may be reached.
    pub fn allows(&self, host: &str) -> bool {
        let host = normalise(host);
        !host.is_empty()
            && self.allow.iter().any(|p| matches(p, &host))
            && !self.deny.iter().any(|p| matches(p, &host))
    }

    /// Whether every host is allowed (`*`, nothing denied): commands then keep the host's
    /// network and no proxy stands between.
    pub fn allows_everything(&self) -> bool {
        self.deny.is_empty() && self.allow.iter().any(|p| p == "*")
    }
}

fn normalise(host: &str) -> String {
    let host = host.trim().trim_end_matches('.');
    // `[::1]` as written in a URL.
    let host = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    host.to_ascii_lowercase()
}

/// `*` matches every host; `*.example.com` every name under `example.com`; anything else
/// only itself.
fn matches(pattern: &str, host: &str) -> bool {
    if pattern == "*" {
        return true;
    }
    match pattern.strip_prefix("*.") {
        Some(domain) => host
            .strip_suffix(domain)
            .is_some_and(|rest| rest.ends_with('.') && rest.len() > 1),
        None => pattern == host,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_host_must_be_allowed_and_not_denied() {
        let rules = NetworkRules::new(
            [
                "crates.io".into(),
                "*.example.com".into(),
                "EXAMPLE.org.".into(),
            ],
            ["bad.example.com".into()],
        );
        assert!(rules.allows("crates.io"));
        assert!(rules.allows("Crates.IO."));
        assert!(rules.allows("a.example.com"));
        assert!(rules.allows("a.b.example.com"));
        assert!(!rules.allows("example.com"), "a wildcard is not its domain");
        assert!(!rules.allows("badexample.com"));
        assert!(!rules.allows("bad.example.com"));
        assert!(rules.allows("example.org"));
        assert!(!rules.allows("static.crates.io"));
        assert!(!rules.allows("127.0.0.1"));
        assert!(!rules.allows(""));
    }

    #[test]
    fn the_defaults_hold_the_registries_and_no_address() {
        let rules = NetworkRules::default();
        for host in [
            "crates.io",
            "index.crates.io",
            "registry.npmjs.org",
            "pypi.org",
            "files.pythonhosted.org",
            "github.com",
            "raw.githubusercontent.com",
        ] {
            assert!(rules.allows(host), "{host}");
        }
        for host in [
            "127.0.0.1",
            "localhost",
            "169.254.169.254",
            "::1",
            "evil.example",
        ] {
            assert!(!rules.allows(host), "{host}");
        }
    }

    #[test]
    fn a_star_allows_everything_but_what_is_denied() {
        let rules = NetworkRules::new(["*".into()], ["*.internal".into()]);
        assert!(rules.allows("anything.example"));
        assert!(!rules.allows("db.internal"));
    }
}
