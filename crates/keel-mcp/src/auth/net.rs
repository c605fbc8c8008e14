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

/// Where an address is, for what a login may reach.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Place {
    /// This machine.
    Loopback,
    /// A private or shared network (RFC 1918, 100.64/10, fc00::/7, and the like).
    Private,
    /// Link-local (169.254/16, fe80::/10: cloud metadata services live there).
    LinkLocal,
    /// Anything else that is not an ordinary address (unspecified, multicast, reserved).
    Special,
    /// The internet.
    Public,
}

/// What the URLs a login fetches may reach.
#[derive(Debug, Clone)]
pub(crate) struct Reach {
    /// The places of the MCP server's addresses when they are all inside (its
    /// authorization server may then be there too); empty for a server on the internet.
    inside: std::collections::BTreeSet<Place>,
}

/// Where `ip` is.
pub(crate) fn place(ip: IpAddr) -> Place {
    match ip {
        IpAddr::V4(v4) => {
            let [a, b, c, _] = v4.octets();
            if v4.is_loopback() {
                Place::Loopback
            } else if v4.is_link_local() {
                Place::LinkLocal
            } else if v4.is_private() || (a == 100 && (64..128).contains(&b)) {
                Place::Private
            } else if v4.is_unspecified()
                || v4.is_broadcast()
                || v4.is_multicast()
                || a == 0
                || a >= 240
                || (a == 198 && (18..20).contains(&b))
                || (a == 192 && b == 0 && c == 0)
            {
                Place::Special
            } else {
                Place::Public
            }
        }
        IpAddr::V6(v6) => {
            let segments = v6.segments();
            // Addresses that carry an IPv4 address reach it: mapped, compatible, NAT64
            // (64:ff9b::/96) and 6to4 (2002::/16).
            let octets = v6.octets();
            let embedded = |at: usize| {
                IpAddr::V4(std::net::Ipv4Addr::new(
                    octets[at],
                    octets[at + 1],
                    octets[at + 2],
                    octets[at + 3],
                ))
            };
            if let Some(v4) = v6.to_ipv4_mapped() {
                return place(IpAddr::V4(v4));
            }
            if segments[..6] == [0, 0, 0, 0, 0, 0] && !v6.is_loopback() && !v6.is_unspecified() {
                return place(embedded(12));
            }
            if segments[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
                return place(embedded(12));
            }
            if segments[0] == 0x2002 {
                return place(embedded(2));
            }
            let first = segments[0];
            if v6.is_loopback() {
                Place::Loopback
            } else if (first & 0xffc0) == 0xfe80 {
                Place::LinkLocal
            } else if (first & 0xfe00) == 0xfc00 || (first & 0xffc0) == 0xfec0 {
                Place::Private
            } else if v6.is_unspecified() || v6.is_multicast() {
                Place::Special
            } else {
                Place::Public
            }
        }
    }
}

/// Whether `ip` is anywhere but the internet.
#[cfg(test)]
pub(crate) fn internal(ip: IpAddr) -> bool {
    place(ip) != Place::Public
}

/// Whether `host` names loopback without a lookup.
fn loopback_name(host: &url::Host<&str>) -> bool {
    match host {
        url::Host::Domain(name) => name.eq_ignore_ascii_case("localhost"),
        url::Host::Ipv4(ip) => ip.is_loopback(),
        url::Host::Ipv6(ip) => ip.is_loopback(),
    }
}

/// Whether `url` is one keel reaches or offers at all, before any lookup: `https`, or
/// `http` on loopback, naming a host, with no user name or password (which would let an
/// address show one host and reach another).
pub(crate) fn web_address(url: &Url) -> Result<(), &'static str> {
    let host = url.host().ok_or("it names no host")?;
    match url.scheme() {
        "https" => {}
        "http" if loopback_name(&host) => {}
        "http" => return Err("it is plain http off this machine; https is required"),
        _ => return Err("only https addresses are taken"),
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err("it carries a user name or password");
    }
    Ok(())
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
        let mut inside = std::collections::BTreeSet::new();
        match server.host() {
            Some(host) if loopback_name(&host) => {
                inside.insert(Place::Loopback);
            }
            Some(_) => {
                // Inside only when every address of the server is: a name that answers
                // one public and one private address does not open the inside.
                if let Ok(all) = addresses(server).await {
                    let places: std::collections::BTreeSet<Place> =
                        all.iter().map(|a| place(a.ip())).collect();
                    if !places.contains(&Place::Public) && !places.contains(&Place::Special) {
                        inside = places;
                    }
                }
            }
            None => {}
        }
        Self { inside }
    }

    /// Checks `url` against the rules and returns the addresses to connect to.
    pub(crate) async fn check(&self, url: &Url) -> Result<Vec<SocketAddr>, AuthError> {
        let refuse = |reason: &str| AuthError::Refused {
            url: url.to_string(),
            reason: reason.to_owned(),
        };
        web_address(url).map_err(refuse)?;
        let found = addresses(url).await?;
        for address in &found {
            let at = place(address.ip());
            if at == Place::Public {
                continue;
            }
            if at == Place::Special || !self.inside.contains(&at) {
                return Err(refuse(&format!(
                    "it resolves to {} ({}), where the MCP server is not",
                    address.ip(),
                    match at {
                        Place::Loopback => "this machine",
                        Place::Private => "a private network",
                        Place::LinkLocal => "link-local",
                        _ => "a reserved address",
                    }
                )));
            }
        }
        Ok(found)
    }

    /// A client for `url`, pinned to the checked addresses and following no redirect.
    async fn client(&self, url: &Url) -> Result<reqwest::Client, AuthError> {
        let found = self.check(url).await?;
        let host = url.host_str().unwrap_or_default().to_owned();
        keel_llm::client_builder(url.scheme() == "https")
            // A proxy would resolve the name itself, past the check and the pin.
            .no_proxy()
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
            "64:ff9b::a9fe:a9fe",
            "2002:a9fe:a9fe::1",
            "::10.0.0.1",
            "fec0::1",
            "198.18.0.1",
            "224.0.0.1",
            "240.0.0.1",
        ] {
            assert!(internal(inside.parse().unwrap()), "{inside}");
        }
        for outside in ["93.184.216.34", "2606:4700::1111", "8.8.8.8"] {
            assert!(!internal(outside.parse().unwrap()), "{outside}");
        }
    }

    #[tokio::test]
    async fn a_public_server_cannot_send_keel_inside() {
        let reach = Reach {
            inside: std::collections::BTreeSet::new(),
        };
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
        let local = Reach {
            inside: [Place::Loopback].into(),
        };
        local
            .check(&Url::parse("http://127.0.0.1:9/token").unwrap())
            .await
            .unwrap();
        let error = local
            .check(&Url::parse("http://10.0.0.5/token").unwrap())
            .await
            .unwrap_err();
        assert!(error.to_string().contains("https"), "{error}");
        // A server on loopback opens loopback only.
        let error = local
            .check(&Url::parse("https://10.0.0.5/token").unwrap())
            .await
            .unwrap_err();
        assert!(error.to_string().contains("private network"), "{error}");
        let error = local
            .check(&Url::parse("https://169.254.169.254/token").unwrap())
            .await
            .unwrap_err();
        assert!(error.to_string().contains("link-local"), "{error}");
    }
}
