//! `web_fetch`: GET or HEAD a URL, HTML turned into Markdown, bounded in size and time.
//!
//! Only http and https. Loopback, private, link-local and other internal addresses are
//! refused unless configuration allows them, checked for every address a name resolves to
//! and again for every redirect (redirects are followed by hand for that reason).

use std::net::IpAddr;
use std::sync::{Arc, LazyLock};
use std::time::Duration;

use async_trait::async_trait;
use keel_agent::{AgentTool, ExecutionMode, ToolCallContext, ToolError, ToolNature, ToolOutput};
use keel_protocol::{ContentBlock, ToolDefinition};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

use crate::args::{self, present};
use crate::env::ToolEnv;
use crate::output::head_tail;

/// Largest body downloaded.
const MAX_DOWNLOAD: usize = 5 * 1024 * 1024;
/// Most text returned, head and tail: the tool-output budget archives what passes its own
/// (smaller) limit; this bounds what reaches history should the budget not run.
const MAX_TEXT: usize = 1024 * 1024;
/// Whole-request timeout.
const TIMEOUT: Duration = Duration::from_secs(30);
/// Redirects followed at most.
const MAX_REDIRECTS: usize = 5;

/// The arguments of `web_fetch`; its doc comments are the descriptions the model reads.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct Args {
    /// http:// or https:// URL
    url: String,
    #[serde(default, deserialize_with = "present")]
    method: Option<Method>,
}

// The request methods a call may use. No doc comments here: they would become the
// property's description, and on the variants they would turn its `enum` into a `oneOf`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
enum Method {
    #[serde(rename = "GET")]
    Get,
    #[serde(rename = "HEAD")]
    Head,
}

static DEFINITION: LazyLock<ToolDefinition> = LazyLock::new(|| ToolDefinition {
    name: "web_fetch".into(),
    description:
        "Fetch a web page or file over http(s). HTML is converted to Markdown; a long page keeps \
        its beginning and end and is saved whole to a file the read tool can page. HEAD returns \
        only the status and headers. Internal and private addresses are \
        refused."
            .into(),
    parameters: args::schema::<Args>(),
});

/// The `web_fetch` tool.
pub struct WebFetch {
    env: Arc<ToolEnv>,
    /// Built on first use: building a client reads the system's certificates, which would
    /// otherwise slow the start of every run that never fetches anything.
    client: std::sync::OnceLock<Result<reqwest::Client, Arc<reqwest::Error>>>,
}

impl WebFetch {
    /// The HTTP client, built on first use.
    fn client(&self) -> Result<&reqwest::Client, ToolError> {
        self.client
            .get_or_init(|| {
                let _ = rustls::crypto::ring::default_provider().install_default();
                let mut builder = reqwest::Client::builder();
                if !self.env.fetch_allow_private {
                    // The connection uses exactly the addresses checked here, so a name cannot
                    // resolve to a public address for the check and an internal one for the
                    // connect.
                    builder = builder.dns_resolver(Arc::new(PublicOnly));
                }
                builder
                    .redirect(reqwest::redirect::Policy::none())
                    .timeout(TIMEOUT)
                    .user_agent(concat!("keel/", env!("CARGO_PKG_VERSION")))
                    .build()
                    .map_err(Arc::new)
            })
            .as_ref()
            .map_err(|e| ToolError::new(format!("cannot set up HTTP: {e}")))
    }

    /// A fetch tool (its HTTP client is built when first needed).
    pub fn new(env: Arc<ToolEnv>) -> Self {
        Self {
            env,
            client: std::sync::OnceLock::new(),
        }
    }
}

/// Stack for the HTML conversion: its DOM walk recurses once per nesting level, and a page
/// of deeply nested elements must not overflow a worker's stack and take the process down.
const CONVERT_STACK: usize = 256 * 1024 * 1024;

/// HTML to Markdown on a thread of its own with a large stack; the raw text if that fails.
async fn html_to_markdown(html: String) -> String {
    let converted = tokio::task::spawn_blocking(move || {
        let worker = std::thread::Builder::new()
            .stack_size(CONVERT_STACK)
            .spawn(move || htmd::convert(&html).map_err(|_| html));
        match worker.map(std::thread::JoinHandle::join) {
            Ok(Ok(result)) => result,
            _ => Err(String::from("(the page could not be converted)")),
        }
    })
    .await;
    match converted {
        Ok(Ok(markdown)) => markdown,
        Ok(Err(raw)) => raw,
        Err(_) => String::from("(the page could not be converted)"),
    }
}

/// A resolver that never hands out an internal address.
struct PublicOnly;

impl reqwest::dns::Resolve for PublicOnly {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let host = name.as_str().to_owned();
        Box::pin(async move {
            let found: Vec<std::net::SocketAddr> =
                tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            let public: Vec<std::net::SocketAddr> = found
                .iter()
                .copied()
                .filter(|a| !is_internal(a.ip()))
                .collect();
            if public.is_empty() {
                let message = format!("{host} resolves only to internal addresses");
                return Err(Box::new(std::io::Error::other(message))
                    as Box<dyn std::error::Error + Send + Sync>);
            }
            Ok(Box::new(public.into_iter()) as reqwest::dns::Addrs)
        })
    }
}

/// Whether an address is internal (loopback, private, link-local, unspecified, …).
pub fn is_internal(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            let [a, b, c, _] = v4.octets();
            v4.is_loopback()
                || v4.is_private()
                || v4.is_link_local()
                || v4.is_unspecified()
                || v4.is_broadcast()
                || v4.is_multicast()
                || a == 0
                || a >= 240
                || a == 100 && (b & 0xC0) == 64
                || a == 198 && (b & 0xFE) == 18
                || a == 192 && b == 0 && c == 0
        }
        IpAddr::V6(v6) => {
            let s = v6.segments();
            let embedded = |hi: u16, lo: u16| {
                IpAddr::V4(std::net::Ipv4Addr::from(
                    (u32::from(hi) << 16) | u32::from(lo),
                ))
            };
            v6.is_loopback()
                || v6.is_unspecified()
                || v6.is_multicast()
                || (s[0] & 0xFE00) == 0xFC00
                || (s[0] & 0xFFC0) == 0xFE80
                || (s[0] & 0xFFC0) == 0xFEC0
                || v6.to_ipv4_mapped().is_some_and(|v4| is_internal(IpAddr::V4(v4)))
                // IPv4-compatible ::a.b.c.d
                || s[..6].iter().all(|x| *x == 0) && is_internal(embedded(s[6], s[7]))
                // NAT64 64:ff9b::/96
                || s[0] == 0x64
                    && s[1] == 0xff9b
                    && s[2..6].iter().all(|x| *x == 0)
                    && is_internal(embedded(s[6], s[7]))
                // 6to4 2002:a.b.c.d::/48
                || s[0] == 0x2002 && is_internal(embedded(s[1], s[2]))
        }
    }
}

async fn check_target(url: &reqwest::Url, allow_private: bool) -> Result<(), String> {
    match url.scheme() {
        "http" | "https" => {}
        other => {
            return Err(format!(
                "only http and https URLs can be fetched, not {other}:"
            ));
        }
    }
    if allow_private {
        return Ok(());
    }
    let host = url.host_str().ok_or("the URL has no host")?;
    let port = url.port_or_known_default().unwrap_or(443);
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    let addresses: Vec<IpAddr> = match bare.parse::<IpAddr>() {
        Ok(ip) => vec![ip],
        Err(_) => tokio::net::lookup_host((bare, port))
            .await
            .map_err(|e| format!("cannot resolve {host}: {e}"))?
            .map(|a| a.ip())
            .collect(),
    };
    if let Some(ip) = addresses.iter().find(|ip| is_internal(**ip)) {
        return Err(format!(
            "{host} resolves to the internal address {ip}; fetching internal addresses is not allowed (configuration can allow it)"
        ));
    }
    Ok(())
}

#[async_trait]
impl AgentTool for WebFetch {
    fn nature(&self) -> ToolNature {
        ToolNature::Fetches { url: "url" }
    }

    fn definition(&self) -> &ToolDefinition {
        &DEFINITION
    }

    fn execution_mode(&self) -> ExecutionMode {
        ExecutionMode::Parallel
    }

    async fn execute(
        &self,
        arguments: serde_json::Value,
        context: ToolCallContext,
    ) -> Result<ToolOutput, ToolError> {
        let args: Args = args::arguments(arguments)?;
        let head = args.method == Some(Method::Head);
        let mut url = reqwest::Url::parse(&args.url)
            .map_err(|e| ToolError::new(format!("invalid URL {:?}: {e}", args.url)))?;
        let fetch = async {
            for _ in 0..=MAX_REDIRECTS {
                check_target(&url, self.env.fetch_allow_private)
                    .await
                    .map_err(ToolError::new)?;
                let request = if head {
                    self.client()?.head(url.clone())
                } else {
                    self.client()?.get(url.clone())
                };
                let response = request
                    .send()
                    .await
                    .map_err(|e| ToolError::new(format!("fetching {url} failed: {e}")))?;
                if response.status().is_redirection() {
                    let location = response
                        .headers()
                        .get(reqwest::header::LOCATION)
                        .and_then(|v| v.to_str().ok())
                        .ok_or_else(|| {
                            ToolError::new(format!("{url} redirected without a location"))
                        })?;
                    url = url
                        .join(location)
                        .map_err(|e| ToolError::new(format!("bad redirect from {url}: {e}")))?;
                    continue;
                }
                return Ok((url.clone(), response));
            }
            Err(ToolError::new(format!(
                "more than {MAX_REDIRECTS} redirects"
            )))
        };
        let (final_url, mut response) = tokio::select! {
            result = fetch => result?,
            () = context.cancel.cancelled() => return Err(ToolError::new("the fetch was aborted")),
        };
        let status = response.status();
        let content_type = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_owned();
        if head {
            let headers: Vec<String> = response
                .headers()
                .iter()
                .map(|(k, v)| format!("{k}: {}", v.to_str().unwrap_or("(binary)")))
                .collect();
            let text = format!("HTTP {status} for {final_url}\n{}", headers.join("\n"));
            return Ok(ToolOutput {
                content: vec![ContentBlock::text(text)],
                details: Some(json!({"url": final_url.as_str(), "status": status.as_u16()})),
                is_error: !status.is_success(),
                ..ToolOutput::default()
            });
        }
        let mut body = Vec::new();
        let mut cut = false;
        loop {
            let chunk = tokio::select! {
                chunk = response.chunk() => chunk.map_err(|e| ToolError::new(format!("reading {final_url} failed: {e}")))?,
                () = context.cancel.cancelled() => return Err(ToolError::new("the fetch was aborted")),
            };
            let Some(chunk) = chunk else { break };
            body.extend_from_slice(&chunk);
            if body.len() >= MAX_DOWNLOAD {
                body.truncate(MAX_DOWNLOAD);
                cut = true;
                break;
            }
        }
        let raw = String::from_utf8_lossy(&body);
        let title = content_type
            .contains("html")
            .then(|| page_title(&raw))
            .flatten();
        let text = if content_type.contains("html") {
            html_to_markdown(raw.clone().into_owned()).await
        } else if content_type.starts_with("text/")
            || content_type.contains("json")
            || content_type.contains("xml")
            || content_type.is_empty()
        {
            raw.into_owned()
        } else {
            return Ok(ToolOutput {
                content: vec![ContentBlock::text(format!(
                    "{final_url} returned {} bytes of {content_type}, which is not text; it is not shown.",
                    body.len()
                ))],
                details: Some(
                    json!({"url": final_url.as_str(), "status": status.as_u16(), "content_type": content_type}),
                ),
                is_error: !status.is_success(),
                ..ToolOutput::default()
            });
        };
        let (mut text, shortened) = head_tail(&text, MAX_TEXT);
        if cut {
            text.push_str(&format!(
                "\n\n[download stopped at {} MiB]",
                MAX_DOWNLOAD / (1024 * 1024)
            ));
        }
        let header = format!("HTTP {status} {final_url}\n\n");
        Ok(ToolOutput {
            content: vec![ContentBlock::text(format!("{header}{text}"))],
            details: Some(
                json!({"url": final_url.as_str(), "status": status.as_u16(), "content_type": content_type,
                                 "bytes": body.len(), "truncated": shortened || cut, "title": title}),
            ),
            is_error: !status.is_success(),
            ..ToolOutput::default()
        })
    }
}

/// The text of an HTML page's `<title>`, whitespace folded, when it has one.
fn page_title(html: &str) -> Option<String> {
    let lower = html[..html.floor_char_boundary(64 * 1024)].to_ascii_lowercase();
    let open = lower.find("<title")?;
    let start = open + lower[open..].find('>')? + 1;
    let end = start + lower[start..].find("</title")?;
    let title: String = html
        .get(start..end)?
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    (!title.is_empty()).then(|| title.chars().take(200).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn internal_addresses_are_recognised() {
        for internal in [
            "224.0.0.1",
            "240.0.0.1",
            "198.18.0.1",
            "192.0.0.8",
            "fec0::1",
            "ff02::1",
            "::127.0.0.1",
            "64:ff9b::a00:1",
            "2002:c0a8:101::1",
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.1.1",
            "0.0.0.0",
            "::1",
            "fc00::1",
            "fe80::1",
            "::ffff:127.0.0.1",
            "100.64.0.1",
        ] {
            assert!(is_internal(internal.parse().unwrap()), "{internal}");
        }
        for public in ["93.184.216.34", "2606:4700::1111", "8.8.8.8"] {
            assert!(!is_internal(public.parse().unwrap()), "{public}");
        }
    }

    #[tokio::test]
    async fn only_http_and_public_targets_pass() {
        let check = |u: &str| reqwest::Url::parse(u).unwrap();
        assert!(
            check_target(&check("file:///etc/passwd"), false)
                .await
                .unwrap_err()
                .contains("only http")
        );
        assert!(
            check_target(&check("http://127.0.0.1:8080/x"), false)
                .await
                .unwrap_err()
                .contains("internal")
        );
        assert!(
            check_target(&check("http://[::1]/"), false)
                .await
                .unwrap_err()
                .contains("internal")
        );
        assert!(
            check_target(&check("http://localhost/"), false)
                .await
                .unwrap_err()
                .contains("internal")
        );
        assert!(
            check_target(&check("http://127.0.0.1:8080/x"), true)
                .await
                .is_ok()
        );
    }
}
