//! Requests made while logging in, and what they may reach. A server's answers name the
//! URLs keel fetches next (metadata, registration, tokens), so a server could point keel at
//! the machine's inside: every such URL must be https (or http on loopback), and an address
//! on loopback, a private network or link-local is refused unless the MCP server itself is
//! on one. The address checked is the address connected to (pinned), redirects are not
//! followed, and answers are read up to a bound.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use futures::StreamExt as _;
use url::Url;

use super::AuthError;

/// The most of a metadata or token answer read.
pub(crate) const ANSWER_LIMIT: usize = 256 * 1024;
/// How long one request may take.
const REQUEST_TIME: Duration = Duration::from_secs(30);

/// What the URLs a login fetches may reach.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Reach {
    /// Whether the MCP server is itself on loopback or a private network, so its
    /// authorization server may be too.
    inside: bool,
}

/// Whether `ip` is on loopback, a private or shared network, link-local or unspecified.
pub(crate) fn internal(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            let [a, b, ..] = v4.octets();
            v4.is_loopback()
                || v4.is_private()
                || v4.is_link_local()
                || v4.is_unspecified()
                || v4.is_broadcast()
                || (a == 100 && (64..128).contains(&b))
                || a == 0
        }
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return internal(IpAddr::V4(v4));
            }
            let first = v6.segments()[0];
            v6.is_loopback()
                || v6.is_unspecified()
                || (first & 0xfe00) == 0xfc00
                || (first & 0xffc0) == 0xfe80
        }
    }
}

/// Whether `host` names loopback without a lookup.
fn loopback_name(host: &url::Host<&str>) -> bool {
    match host {
        url::Host::Domain(name) => name.eq_ignore_ascii_case("localhost"),
        url::Host::Ipv4(ip) => ip.is_loopback(),
        url::Host::Ipv6(ip) => ip.is_loopback(),
    }
}

async fn addresses(url: &Url) -> Result<Vec<SocketAddr>, AuthError> {
    let host = url.host_str().ok_or_else(|| AuthError::Refused {
        url: url.to_string(),
        reason: "it names no host".into(),
    })?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let port = url.port_or_known_default().unwrap_or(443);
    let found: Vec<SocketAddr> = tokio::net::lookup_host((host, port))
        .await
        .map_err(|e| AuthError::Unreachable {
            url: url.to_string(),
            reason: e.to_string(),
        })?
        .collect();
    if found.is_empty() {
        return Err(AuthError::Unreachable {
            url: url.to_string(),
            reason: "its host has no address".into(),
        });
    }
    Ok(found)
}

impl Reach {
    /// The reach of a login to the MCP server at `server`.
    pub(crate) async fn of_server(server: &Url) -> Self {
        let inside = match server.host() {
            Some(host) if loopback_name(&host) => true,
            Some(_) => addresses(server)
                .await
                .is_ok_and(|all| all.iter().any(|a| internal(a.ip()))),
            None => false,
        };
        Self { inside }
    }

    /// Checks `url` against the rules and returns the addresses to connect to.
    pub(crate) async fn check(&self, url: &Url) -> Result<Vec<SocketAddr>, AuthError> {
        let refuse = |reason: &str| AuthError::Refused {
            url: url.to_string(),
            reason: reason.to_owned(),
        };
        let host = url.host().ok_or_else(|| refuse("it names no host"))?;
        match url.scheme() {
            "https" => {}
            "http" if loopback_name(&host) => {}
            "http" => {
                return Err(refuse(
                    "it is plain http off this machine; https is required",
                ));
            }
            _ => return Err(refuse("only https URLs are fetched")),
        }
        if !url.username().is_empty() || url.password().is_some() {
            return Err(refuse("it carries a user name or password"));
        }
        let found = addresses(url).await?;
        if !self.inside
            && let Some(bad) = found.iter().find(|a| internal(a.ip()))
        {
            return Err(refuse(&format!(
                "it resolves to {} (loopback, a private network or link-local), and the MCP \
                 server is not on one",
                bad.ip()
            )));
        }
        Ok(found)
    }

    /// A client for `url`, pinned to the checked addresses and following no redirect.
    async fn client(&self, url: &Url) -> Result<reqwest::Client, AuthError> {
        let found = self.check(url).await?;
        let host = url.host_str().unwrap_or_default().to_owned();
        keel_llm::client_builder(url.scheme() == "https")
            .redirect(reqwest::redirect::Policy::none())
            .resolve_to_addrs(&host, &found)
            .timeout(REQUEST_TIME)
            .build()
            .map_err(|e| AuthError::Unreachable {
                url: url.to_string(),
                reason: e.to_string(),
            })
    }

    /// `GET url` as JSON: `Ok(None)` on 404 (and other 4xx: not there).
    pub(crate) async fn get_json(&self, url: &Url) -> Result<Option<serde_json::Value>, AuthError> {
        let client = self.client(url).await?;
        let response = client
            .get(url.clone())
            .header(reqwest::header::ACCEPT, "application/json")
            .header("MCP-Protocol-Version", "2025-11-25")
            .send()
            .await
            .map_err(|e| AuthError::Unreachable {
                url: url.to_string(),
                reason: e.to_string(),
            })?;
        let status = response.status();
        if status.is_client_error() || status.is_redirection() {
            return Ok(None);
        }
        let body = bounded_body(url, response).await?;
        if !status.is_success() {
            return Err(AuthError::Unreachable {
                url: url.to_string(),
                reason: format!("it answered {status}"),
            });
        }
        serde_json::from_slice(&body)
            .map(Some)
            .map_err(|e| AuthError::Malformed {
                url: url.to_string(),
                reason: e.to_string(),
            })
    }

    /// `POST url` with `body` (`content_type`) and `headers`: the status and the answer
    /// parsed as JSON (`Value::Null` when it is not JSON).
    pub(crate) async fn post(
        &self,
        url: &Url,
        content_type: &str,
        body: Vec<u8>,
        headers: &[(&str, String)],
    ) -> Result<(reqwest::StatusCode, serde_json::Value), AuthError> {
        let client = self.client(url).await?;
        let mut request = client
            .post(url.clone())
            .header(reqwest::header::CONTENT_TYPE, content_type)
            .header(reqwest::header::ACCEPT, "application/json")
            .body(body);
        for (name, value) in headers {
            request = request.header(*name, value.as_str());
        }
        let response = request.send().await.map_err(|e| AuthError::Unreachable {
            url: url.to_string(),
            reason: e.to_string(),
        })?;
        let status = response.status();
        let body = bounded_body(url, response).await?;
        Ok((
            status,
            serde_json::from_slice(&body).unwrap_or(serde_json::Value::Null),
        ))
    }
}

/// The body of `response`, refused past [`ANSWER_LIMIT`].
async fn bounded_body(url: &Url, response: reqwest::Response) -> Result<Vec<u8>, AuthError> {
    let mut body = Vec::new();
    let mut chunks = response.bytes_stream();
    while let Some(chunk) = chunks.next().await {
        let chunk = chunk.map_err(|e| AuthError::Unreachable {
            url: url.to_string(),
            reason: e.to_string(),
        })?;
        if body.len() + chunk.len() > ANSWER_LIMIT {
            return Err(AuthError::Malformed {
                url: url.to_string(),
                reason: format!("the answer is larger than {} KiB", ANSWER_LIMIT / 1024),
            });
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// A form body (`application/x-www-form-urlencoded`).
pub(crate) fn form(pairs: &[(&str, &str)]) -> Vec<u8> {
    let mut out = url::form_urlencoded::Serializer::new(String::new());
    for (name, value) in pairs {
        out.append_pair(name, value);
    }
    out.finish().into_bytes()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn inside_addresses_are_known() {
        for inside in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "::1",
            "fe80::1",
            "fd00::1",
            "::ffff:169.254.169.254",
        ] {
            assert!(internal(inside.parse().unwrap()), "{inside}");
        }
        for outside in ["93.184.216.34", "2606:4700::1111", "8.8.8.8"] {
            assert!(!internal(outside.parse().unwrap()), "{outside}");
        }
    }

    #[tokio::test]
    async fn a_public_server_cannot_send_keel_inside() {
        let reach = Reach { inside: false };
        for url in [
            "http://169.254.169.254/latest/meta-data",
            "https://127.0.0.1/token",
            "https://10.0.0.5/token",
            "https://[::1]/token",
            "http://example.com/token",
            "file:///etc/passwd",
            "https://user:pw@example.com/",
        ] {
            let error = reach.check(&Url::parse(url).unwrap()).await.unwrap_err();
            assert_eq!(error.code(), "mcp_auth_url_refused", "{url}: {error}");
        }
        let local = Reach { inside: true };
        local
            .check(&Url::parse("http://127.0.0.1:9/token").unwrap())
            .await
            .unwrap();
        let error = local
            .check(&Url::parse("http://10.0.0.5/token").unwrap())
            .await
            .unwrap_err();
        assert!(error.to_string().contains("https"), "{error}");
    }
}
