//! Finding who logs keel in to a server: its protected resource metadata (RFC 9728: the
//! challenge's `resource_metadata`, then the path-based and root well-known URLs), then its
//! authorization server's metadata (RFC 8414, then OpenID Connect discovery), and for a
//! 2025-03-26 server with neither, the default endpoints at its origin.

use serde::Deserialize;
use url::Url;

use super::AuthError;
use super::challenge::Challenge;
use super::net::Reach;

/// A protected resource's metadata, the fields keel uses.
#[derive(Debug, Clone, Default, Deserialize)]
pub(crate) struct ResourceMetadata {
    /// The resource's identifier.
    #[serde(default)]
    pub(crate) resource: Option<String>,
    /// Its authorization servers' issuers.
    #[serde(default)]
    pub(crate) authorization_servers: Vec<String>,
    /// The scopes it knows.
    #[serde(default)]
    pub(crate) scopes_supported: Option<Vec<String>>,
}

/// An authorization server's metadata, the fields keel uses.
#[derive(Debug, Clone, Default, Deserialize)]
pub(crate) struct ServerMetadata {
    /// Its issuer identifier.
    #[serde(default)]
    pub(crate) issuer: String,
    /// Where the browser goes.
    #[serde(default)]
    pub(crate) authorization_endpoint: Option<String>,
    /// Where codes become tokens.
    pub(crate) token_endpoint: String,
    /// Dynamic client registration (RFC 7591).
    #[serde(default)]
    pub(crate) registration_endpoint: Option<String>,
    /// Scopes it knows.
    #[serde(default)]
    pub(crate) scopes_supported: Option<Vec<String>>,
    /// How clients may authenticate at the token endpoint.
    #[serde(default)]
    pub(crate) token_endpoint_auth_methods_supported: Option<Vec<String>>,
    /// PKCE methods.
    #[serde(default)]
    pub(crate) code_challenge_methods_supported: Option<Vec<String>>,
    /// Whether a URL may be a client id (Client ID Metadata Documents).
    #[serde(default)]
    pub(crate) client_id_metadata_document_supported: Option<bool>,
}

impl ServerMetadata {
    /// Whether the token endpoint takes `method` (RFC 8414's default is
    /// `client_secret_basic` alone).
    pub(crate) fn takes(&self, method: &str) -> bool {
        match &self.token_endpoint_auth_methods_supported {
            Some(all) => all.iter().any(|m| m == method),
            None => method == "client_secret_basic",
        }
    }
}

/// What discovery found.
#[derive(Debug, Clone)]
pub(crate) struct Found {
    /// The resource tokens are for.
    pub(crate) resource: String,
    /// Scopes the resource metadata lists.
    pub(crate) resource_scopes: Option<Vec<String>>,
    /// The authorization server.
    pub(crate) server: ServerMetadata,
    /// Whether any metadata was found (a 2025-03-26 server without any gets the default
    /// endpoints and no PKCE check).
    pub(crate) from_metadata: bool,
}

/// `url` without a trailing slash in its path, as identifiers are compared.
fn canonical(url: &str) -> &str {
    url.strip_suffix('/').unwrap_or(url)
}

/// Whether the server at `server` is the resource `resource` or below it (same origin, its
/// path a prefix by whole segments).
pub(crate) fn belongs(server: &Url, resource: &str) -> bool {
    let Ok(resource) = Url::parse(resource) else {
        return false;
    };
    if server.origin() != resource.origin() {
        return false;
    }
    let base = canonical(resource.path());
    let path = canonical(server.path());
    path == base || base.is_empty() || path.starts_with(&format!("{base}/"))
}

fn join(origin: &Url, path: &str) -> Result<Url, AuthError> {
    origin.join(path).map_err(|e| AuthError::Malformed {
        url: format!("{origin}{path}"),
        reason: e.to_string(),
    })
}

fn parse(url: &str) -> Result<Url, AuthError> {
    Url::parse(url).map_err(|e| AuthError::Malformed {
        url: url.to_owned(),
        reason: e.to_string(),
    })
}

/// The resource metadata of the server at `server`, if it publishes any.
async fn resource_metadata(
    server: &Url,
    challenge: &Challenge,
    reach: &Reach,
) -> Result<Option<ResourceMetadata>, AuthError> {
    let mut candidates = Vec::new();
    // A challenge's URL that does not parse is passed over for the well-known ones.
    if let Some(url) = challenge
        .resource_metadata
        .as_deref()
        .and_then(|u| Url::parse(u).ok())
    {
        candidates.push(url);
    }
    let path = canonical(server.path());
    if !path.is_empty() {
        candidates.push(join(
            server,
            &format!("/.well-known/oauth-protected-resource{path}"),
        )?);
    }
    candidates.push(join(server, "/.well-known/oauth-protected-resource")?);
    for url in candidates {
        if let Some(value) = reach.get_json(&url).await? {
            let metadata: ResourceMetadata =
                serde_json::from_value(value).map_err(|e| AuthError::Malformed {
                    url: url.to_string(),
                    reason: e.to_string(),
                })?;
            return Ok(Some(metadata));
        }
    }
    Ok(None)
}

/// The metadata of the authorization server `issuer`, from the well-known URLs in the
/// order the MCP specification gives.
async fn server_metadata(
    issuer: &Url,
    reach: &Reach,
) -> Result<Option<(Url, ServerMetadata)>, AuthError> {
    let path = canonical(issuer.path());
    let candidates = if path.is_empty() {
        vec![
            join(issuer, "/.well-known/oauth-authorization-server")?,
            join(issuer, "/.well-known/openid-configuration")?,
        ]
    } else {
        vec![
            join(
                issuer,
                &format!("/.well-known/oauth-authorization-server{path}"),
            )?,
            join(issuer, &format!("/.well-known/openid-configuration{path}"))?,
            join(issuer, &format!("{path}/.well-known/openid-configuration"))?,
        ]
    };
    for url in candidates {
        if let Some(value) = reach.get_json(&url).await? {
            let metadata: ServerMetadata =
                serde_json::from_value(value).map_err(|e| AuthError::Malformed {
                    url: url.to_string(),
                    reason: e.to_string(),
                })?;
            return Ok(Some((url, metadata)));
        }
    }
    Ok(None)
}

/// Discovers how to log in to the server at `server`, after it answered `challenge`.
pub(crate) async fn discover(
    server: &Url,
    challenge: &Challenge,
    reach: &Reach,
) -> Result<Found, AuthError> {
    let resource = resource_metadata(server, challenge, reach).await?;
    if let Some(resource) = resource {
        // RFC 9728 §2: `resource` is required.
        let id = resource.resource.clone().ok_or_else(|| {
            AuthError::Discovery(format!(
                "the protected resource metadata of {server} names no resource"
            ))
        })?;
        // RFC 9728 §3.3: metadata naming another resource is not this server's.
        if !belongs(server, &id) {
            return Err(AuthError::ResourceMismatch {
                server: server.to_string(),
                resource: id,
            });
        }
        let issuer = resource.authorization_servers.first().ok_or_else(|| {
            AuthError::Discovery(format!(
                "the protected resource metadata of {server} names no authorization server"
            ))
        })?;
        let issuer_url = parse(issuer)?;
        let (at, metadata) = server_metadata(&issuer_url, reach).await?.ok_or_else(|| {
            AuthError::Discovery(format!(
                "the authorization server {issuer} publishes no metadata (RFC 8414 or OpenID \
                 Connect discovery)"
            ))
        })?;
        // RFC 8414 §3.3: the issuer must be the one the metadata was asked of.
        if canonical(&metadata.issuer) != canonical(issuer) {
            return Err(AuthError::IssuerMismatch {
                url: at.to_string(),
                expected: issuer.clone(),
                found: metadata.issuer,
            });
        }
        // Where secrets will go is checked before anything is sent or a browser opened.
        reach.check(&parse(&metadata.token_endpoint)?).await?;
        return Ok(Found {
            resource: id,
            resource_scopes: resource.scopes_supported,
            server: metadata,
            from_metadata: true,
        });
    }
    // A 2025-03-26 server: its origin is the authorization server.
    let origin = join(server, "/")?;
    if let Some((at, metadata)) = server_metadata(&origin, reach).await? {
        let issued_here = Url::parse(&metadata.issuer).is_ok_and(|i| i.origin() == server.origin());
        if !issued_here {
            return Err(AuthError::IssuerMismatch {
                url: at.to_string(),
                expected: origin.origin().ascii_serialization(),
                found: metadata.issuer,
            });
        }
        reach.check(&parse(&metadata.token_endpoint)?).await?;
        return Ok(Found {
            resource: server.to_string(),
            resource_scopes: None,
            server: metadata,
            from_metadata: true,
        });
    }
    Ok(Found {
        resource: server.to_string(),
        resource_scopes: None,
        server: ServerMetadata {
            issuer: origin.origin().ascii_serialization(),
            authorization_endpoint: Some(join(server, "/authorize")?.to_string()),
            token_endpoint: join(server, "/token")?.to_string(),
            registration_endpoint: Some(join(server, "/register")?.to_string()),
            ..ServerMetadata::default()
        },
        from_metadata: false,
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn a_server_belongs_to_its_resource_and_those_above_it() {
        let server = Url::parse("https://mcp.example.com/v1/mcp").unwrap();
        assert!(belongs(&server, "https://mcp.example.com/v1/mcp"));
        assert!(belongs(&server, "https://mcp.example.com/v1/mcp/"));
        assert!(belongs(&server, "https://mcp.example.com/v1"));
        assert!(belongs(&server, "https://mcp.example.com"));
        assert!(!belongs(&server, "https://mcp.example.com/v1/m"));
        assert!(!belongs(&server, "https://evil.example.com/v1/mcp"));
        assert!(!belongs(&server, "http://mcp.example.com/v1/mcp"));
        assert!(!belongs(&server, "not a url"));
    }
}
