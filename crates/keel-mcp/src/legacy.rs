//! The HTTP+SSE transport of MCP 2024-11-05, for servers that predate streamable HTTP
//! (rmcp has no client for it). keel opens the server's event stream with `GET`, waits for
//! its `endpoint` event, then posts each message there and reads the answers from the
//! stream. The messages pass to rmcp as JSON lines through the same bound as a stdio
//! server's (`oversize`). The endpoint must be on the stream's own origin: a server cannot
//! send keel's messages elsewhere.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt as _;
use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _, DuplexStream};
use url::Url;

use crate::auth::TokenSource;
use crate::oversize::MAX_MESSAGE_BYTES;

/// How long a server may take to name its endpoint.
const ENDPOINT_WAIT: Duration = Duration::from_secs(15);

/// One server-sent event.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Event {
    /// `event:` (empty: `message`).
    pub(crate) kind: String,
    /// `data:` lines, joined with newlines.
    pub(crate) data: String,
}

/// An event-stream parser (the WHATWG grammar, the fields MCP uses) holding at most one
/// event of [`MAX_MESSAGE_BYTES`]: a longer event is skipped whole.
#[derive(Debug, Default)]
pub(crate) struct Parser {
    line: Vec<u8>,
    event: Event,
    /// The event under way is too large and is being skipped.
    skipping: bool,
    /// Bytes of the event under way.
    size: usize,
    /// Bytes of the line under way, held or not (a skipped line is not a blank one).
    raw: usize,
}

impl Parser {
    /// Feeds bytes; returns the events they complete.
    pub(crate) fn feed(&mut self, bytes: &[u8]) -> Vec<Event> {
        let mut out = Vec::new();
        for &byte in bytes {
            if byte != b'\n' {
                // While skipping, a line's first byte is kept to tell `\r` from data.
                if !self.skipping || self.raw == 0 {
                    self.line.push(byte);
                }
                self.raw += 1;
                self.size += 1;
                if !self.skipping && self.size > MAX_MESSAGE_BYTES {
                    self.skipping = true;
                    self.line.clear();
                    self.event = Event::default();
                }
                continue;
            }
            let line = std::mem::take(&mut self.line);
            let raw = std::mem::take(&mut self.raw);
            if raw == 0 || (raw == 1 && line == b"\r") {
                let event = std::mem::take(&mut self.event);
                if !self.skipping && !event.data.is_empty() {
                    out.push(event);
                }
                self.skipping = false;
                self.size = 0;
                continue;
            }
            let line = line.strip_suffix(b"\r").unwrap_or(&line);
            if self.skipping || line.starts_with(b":") {
                continue;
            }
            let text = String::from_utf8_lossy(line);
            let (field, value) = match text.split_once(':') {
                Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
                None => (text.as_ref(), ""),
            };
            match field {
                "event" => self.event.kind = value.to_owned(),
                "data" => {
                    if !self.event.data.is_empty() {
                        self.event.data.push('\n');
                    }
                    self.event.data.push_str(value);
                }
                _ => {}
            }
        }
        out
    }
}

/// A legacy connection's two ends, for rmcp: messages from the server, messages to it.
pub(crate) type Ends = (DuplexStream, DuplexStream);

/// Opens the event stream at `url` and returns the ends rmcp speaks JSON lines on.
pub(crate) async fn connect(
    name: &str,
    client: reqwest::Client,
    url: &str,
    headers: reqwest::header::HeaderMap,
    auth: Option<Arc<TokenSource>>,
) -> Result<Ends, String> {
    let stream_url = Url::parse(url).map_err(|e| e.to_string())?;
    let bearer = match &auth {
        Some(source) => source.bearer().await,
        None => None,
    };
    let mut request = client
        .get(stream_url.clone())
        .headers(headers.clone())
        .header(reqwest::header::ACCEPT, "text/event-stream");
    if let Some(token) = &bearer {
        request = request.bearer_auth(token);
    }
    let response = request.send().await.map_err(|e| e.to_string())?;
    let status = response.status();
    if status == reqwest::StatusCode::UNAUTHORIZED || status == reqwest::StatusCode::FORBIDDEN {
        if let Some(source) = &auth {
            let challenge = response
                .headers()
                .get(reqwest::header::WWW_AUTHENTICATE)
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default();
            source.deny(status.as_u16(), challenge);
        }
        return Err(format!("its event stream answered {status}"));
    }
    let is_events = response
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"));
    if !status.is_success() || !is_events {
        return Err(format!("GET answered {status}, not an event stream"));
    }
    let mut bytes = response.bytes_stream();
    let mut parser = Parser::default();
    let mut pending = Vec::new();
    let endpoint = tokio::time::timeout(ENDPOINT_WAIT, async {
        while let Some(chunk) = bytes.next().await {
            let chunk = chunk.map_err(|e| e.to_string())?;
            for event in parser.feed(&chunk) {
                if event.kind == "endpoint" {
                    return Ok(event.data);
                }
                // Nothing is asked yet; a server that talks before naming its endpoint
                // gets a few events kept, no more.
                if pending.len() < 16 {
                    pending.push(event);
                }
            }
        }
        Err("the event stream ended before naming its endpoint".to_owned())
    })
    .await
    .map_err(|_| "the server did not name its endpoint in time".to_owned())??;
    let endpoint = stream_url
        .join(endpoint.trim())
        .map_err(|e| format!("its endpoint `{endpoint}`: {e}"))?;
    if endpoint.origin() != stream_url.origin() {
        return Err(format!(
            "its endpoint {endpoint} is not on {}: refused",
            stream_url.origin().ascii_serialization()
        ));
    }
    // Server to keel: events, as lines, through the bound.
    let (mut lines_in, lines_out) = tokio::io::duplex(64 * 1024);
    let (rmcp_reads, bounded) = tokio::io::duplex(64 * 1024);
    tokio::spawn(crate::oversize::forward(
        name.to_owned(),
        lines_out,
        bounded,
    ));
    let server = name.to_owned();
    tokio::spawn(async move {
        let write = |event: Event| {
            let line = serde_json::from_str::<serde_json::Value>(&event.data)
                .map(|v| v.to_string() + "\n")
                .ok();
            if line.is_none() {
                tracing::debug!(%server, "skipped an event that is not JSON");
            }
            line
        };
        for event in std::mem::take(&mut pending) {
            if let Some(line) = write(event)
                && lines_in.write_all(line.as_bytes()).await.is_err()
            {
                return;
            }
        }
        while let Some(Ok(chunk)) = bytes.next().await {
            for event in parser.feed(&chunk) {
                if event.kind != "message" && !event.kind.is_empty() {
                    continue;
                }
                if let Some(line) = write(event)
                    && lines_in.write_all(line.as_bytes()).await.is_err()
                {
                    return;
                }
            }
        }
    });
    // keel to server: each line rmcp writes, posted to the endpoint.
    let (rmcp_writes, posts) = tokio::io::duplex(64 * 1024);
    let server = name.to_owned();
    tokio::spawn(async move {
        let mut lines = tokio::io::BufReader::new(posts).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            let bearer = match &auth {
                Some(source) => source.bearer().await,
                None => None,
            };
            let mut request = client
                .post(endpoint.clone())
                .headers(headers.clone())
                .header(reqwest::header::CONTENT_TYPE, "application/json")
                .body(line);
            if let Some(token) = bearer {
                request = request.bearer_auth(token);
            }
            match request.send().await {
                Ok(answer) if answer.status().is_success() => {}
                Ok(answer) => {
                    let status = answer.status();
                    if let Some(source) = &auth
                        && (status == reqwest::StatusCode::UNAUTHORIZED
                            || status == reqwest::StatusCode::FORBIDDEN)
                    {
                        let challenge = answer
                            .headers()
                            .get(reqwest::header::WWW_AUTHENTICATE)
                            .and_then(|v| v.to_str().ok())
                            .unwrap_or_default()
                            .to_owned();
                        source.deny(status.as_u16(), &challenge);
                    }
                    tracing::info!(%server, %status, "a message was refused");
                }
                Err(error) => tracing::info!(%server, %error, "a message was not delivered"),
            }
        }
    });
    Ok((rmcp_reads, rmcp_writes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_are_read_across_chunks_and_line_endings() {
        let mut parser = Parser::default();
        let mut events = parser.feed(b": hi\r\nevent: endpoint\r\ndata: /messages?s=1\r\n\r\nda");
        events.extend(parser.feed(b"ta: {\"a\":\ndata: 1}\n\nevent: message\ndata\n\n"));
        assert_eq!(
            events,
            [
                Event {
                    kind: "endpoint".into(),
                    data: "/messages?s=1".into()
                },
                Event {
                    kind: String::new(),
                    data: "{\"a\":\n1}".into()
                },
            ]
        );
    }

    #[test]
    fn an_event_over_the_bound_is_skipped_whole() {
        let mut parser = Parser::default();
        let mut big = b"data: ".to_vec();
        big.extend(std::iter::repeat_n(b'x', MAX_MESSAGE_BYTES + 10));
        assert!(parser.feed(&big).is_empty());
        assert!(parser.line.is_empty(), "nothing of it is held");
        let events = parser.feed(b"\ndata: more\n\ndata: next\n\n");
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].data, "next");
    }

    proptest::proptest! {
        #![proptest_config(proptest::test_runner::Config::with_cases(512))]
        #[test]
        fn any_bytes_in_any_chunks_parse_alike(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..600), cut in 0usize..600) {
            let mut whole = Parser::default();
            let expected = whole.feed(&bytes);
            let mut split = Parser::default();
            let cut = cut.min(bytes.len());
            let mut got = split.feed(&bytes[..cut]);
            got.extend(split.feed(&bytes[cut..]));
            proptest::prop_assert_eq!(expected, got);
        }
    }
}
