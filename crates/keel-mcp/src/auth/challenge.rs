//! A server's `WWW-Authenticate: Bearer …` challenge (RFC 6750 §3, RFC 9728 §5.1): the
//! metadata URL, the scopes it wants and the error, read leniently (a challenge that
//! cannot be read is a challenge without parameters).

/// What a 401 or 403 said.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Challenge {
    /// `resource_metadata`: where the protected resource metadata is.
    pub resource_metadata: Option<String>,
    /// `scope`, split on spaces.
    pub scopes: Vec<String>,
    /// `error` (`invalid_token`, `insufficient_scope`).
    pub error: Option<String>,
}

impl Challenge {
    /// The challenge of a `WWW-Authenticate` header's value; only the `Bearer` scheme's
    /// parameters are read.
    pub fn parse(header: &str) -> Self {
        let mut out = Self::default();
        let Some(at) = find_scheme(header, "bearer") else {
            return out;
        };
        let mut rest = &header[at + "bearer".len()..];
        loop {
            rest = rest.trim_start_matches([' ', '\t', ',']);
            let Some(eq) = rest.find('=') else { break };
            let name = rest[..eq].trim().to_ascii_lowercase();
            // Another scheme starts where a name holds a space (`Bearer a="b", DPoP x=1`).
            if name.contains([' ', '\t']) {
                break;
            }
            rest = rest[eq + 1..].trim_start();
            let value;
            if let Some(quoted) = rest.strip_prefix('"') {
                let mut text = String::new();
                let mut chars = quoted.char_indices();
                let mut end = quoted.len();
                while let Some((i, c)) = chars.next() {
                    match c {
                        '\\' => {
                            if let Some((_, next)) = chars.next() {
                                text.push(next);
                            }
                        }
                        '"' => {
                            end = i + 1;
                            break;
                        }
                        c => text.push(c),
                    }
                }
                value = text;
                rest = &quoted[end.min(quoted.len())..];
            } else {
                let end = rest.find([',', ' ']).unwrap_or(rest.len());
                value = rest[..end].to_owned();
                rest = &rest[end..];
            }
            match name.as_str() {
                "resource_metadata" => out.resource_metadata = Some(value),
                "scope" => {
                    out.scopes = value.split_whitespace().map(str::to_owned).collect();
                }
                "error" => out.error = Some(value),
                _ => {}
            }
        }
        out
    }

    /// Whether the server refused for want of scope (a 403 asking for more).
    pub fn insufficient_scope(&self) -> bool {
        self.error.as_deref() == Some("insufficient_scope")
    }
}

/// Where `scheme` starts as a whole word in `header`, case-insensitively.
fn find_scheme(header: &str, scheme: &str) -> Option<usize> {
    let lower = header.to_ascii_lowercase();
    let mut from = 0;
    while let Some(found) = lower[from..].find(scheme) {
        let at = from + found;
        let before_ok = at == 0 || matches!(lower.as_bytes()[at - 1], b' ' | b',' | b'\t');
        let after = lower.as_bytes().get(at + scheme.len());
        if before_ok && matches!(after, None | Some(b' ' | b'\t')) {
            return Some(at);
        }
        from = at + scheme.len();
    }
    None
}

#[cfg(test)]
mod tests {
    use super::Challenge;

    #[test]
    fn the_parameters_of_a_bearer_challenge_are_read() {
        let c = Challenge::parse(
            r#"Bearer error="insufficient_scope", scope="mcp:basic mcp:write", resource_metadata="http://localhost:1/.well-known/oauth-protected-resource/mcp", error_description="a \"quoted\" word""#,
        );
        assert_eq!(c.scopes, ["mcp:basic", "mcp:write"]);
        assert!(c.insufficient_scope());
        assert_eq!(
            c.resource_metadata.as_deref(),
            Some("http://localhost:1/.well-known/oauth-protected-resource/mcp")
        );
        let bare = Challenge::parse("Bearer realm=example, scope=read");
        assert_eq!(bare.scopes, ["read"]);
        assert_eq!(Challenge::parse("Basic realm=\"x\""), Challenge::default());
        assert_eq!(Challenge::parse(""), Challenge::default());
    }

    proptest::proptest! {
        #[test]
        fn any_header_is_read_without_panicking(header in ".{0,200}") {
            let _ = Challenge::parse(&header);
        }
    }
}
