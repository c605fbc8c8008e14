//! A stdio server's messages are read through a bound: a line over
//! [`MAX_MESSAGE_BYTES`] is never held. When it answers a request of keel's (a top-level
//! `id` and no `method`), an error response with that id stands in for it, so the call
//! fails at once saying the answer was too large, instead of waiting out its timeout for an
//! answer the client dropped. The id is found by scanning the line's bytes as they pass.

use tokio::io::{AsyncRead, AsyncWriteExt as _, DuplexStream};

/// The largest message read from a server.
pub const MAX_MESSAGE_BYTES: usize = 16 * 1024 * 1024;

/// Longest key or id captured while scanning.
const MAX_CAPTURE: usize = 128;

/// Finds the top-level `id` (and whether there is a `method`) of a JSON object streamed
/// through it, keeping no more than a few bytes.
#[derive(Debug, Default)]
pub(crate) struct IdScan {
    depth: u32,
    in_string: bool,
    escaped: bool,
    /// At depth 1, a key is expected next.
    want_key: bool,
    /// The string being read is a depth-1 key.
    reading_key: bool,
    key: Vec<u8>,
    /// The depth-1 value being read belongs to `id`.
    reading_id: bool,
    id: Vec<u8>,
    found_id: Option<Vec<u8>>,
    has_method: bool,
}

impl IdScan {
    /// Feeds the next bytes of the line.
    pub(crate) fn feed(&mut self, bytes: &[u8]) {
        for &byte in bytes {
            self.step(byte);
        }
    }

    fn step(&mut self, byte: u8) {
        if self.in_string {
            if self.reading_key && self.key.len() < MAX_CAPTURE {
                self.key.push(byte);
            }
            if self.reading_id && self.id.len() < MAX_CAPTURE {
                self.id.push(byte);
            }
            if self.escaped {
                self.escaped = false;
            } else if byte == b'\\' {
                self.escaped = true;
            } else if byte == b'"' {
                self.in_string = false;
                if self.reading_key {
                    self.reading_key = false;
                    self.key.pop();
                }
            }
            return;
        }
        match byte {
            b'"' => {
                self.in_string = true;
                if self.depth == 1 && self.want_key {
                    self.want_key = false;
                    self.reading_key = true;
                    self.key.clear();
                } else if self.reading_id {
                    self.id.push(byte);
                }
            }
            b':' if self.depth == 1 => {
                if self.key == b"method" {
                    self.has_method = true;
                }
                self.reading_id = self.key == b"id";
                self.id.clear();
            }
            b',' | b'}' if self.depth == 1 => {
                self.finish_id();
                if byte == b',' {
                    self.want_key = true;
                } else {
                    self.depth = 0;
                }
            }
            b'{' | b'[' => {
                self.depth = self.depth.saturating_add(1);
                if self.depth == 1 {
                    self.want_key = byte == b'{';
                }
                // An object or array is no id keel sends.
                self.reading_id = false;
            }
            b'}' | b']' => self.depth = self.depth.saturating_sub(1),
            _ if self.reading_id && !byte.is_ascii_whitespace() && self.id.len() < MAX_CAPTURE => {
                self.id.push(byte);
            }
            _ => {}
        }
    }

    fn finish_id(&mut self) {
        if self.reading_id {
            self.reading_id = false;
            self.found_id = Some(std::mem::take(&mut self.id));
        }
    }

    /// The id of a response, when the line was one: a number or a string.
    pub(crate) fn response_id(&self) -> Option<serde_json::Value> {
        if self.has_method {
            return None;
        }
        let id: serde_json::Value = serde_json::from_slice(self.found_id.as_ref()?).ok()?;
        (id.is_number() || id.is_string()).then_some(id)
    }
}

/// The error response that stands in for an answer to request `id` over `max` bytes (of
/// `total`, when known): a stdio line here, an HTTP body or event in `http`.
pub(crate) fn too_large(
    id: &serde_json::Value,
    max: usize,
    total: Option<usize>,
) -> serde_json::Value {
    let size = total.map_or_else(
        || "more than".to_owned(),
        |total| format!("{:.1} MiB, more than", total as f64 / (1024.0 * 1024.0)),
    );
    serde_json::json!({
        "jsonrpc": "2.0",
        "id": id,
        "error": {"code": -32603, "message": format!(
            "the server's answer was {size} the {} MiB keel reads from a server; ask for less \
             (a narrower query, a page of the results)",
            max / (1024 * 1024)
        )}
    })
}

/// Copies `server`'s output to `out` line by line, replacing lines over
/// [`MAX_MESSAGE_BYTES`] (see the module); `out` ends with it.
pub(crate) async fn forward(name: String, server: impl AsyncRead + Unpin, mut out: DuplexStream) {
    use keel_tools::lines::{Line, read_bounded};
    let mut input = tokio::io::BufReader::new(server);
    let mut line = Vec::new();
    loop {
        line.clear();
        let mut scan = IdScan::default();
        let written = match read_bounded(&mut input, &mut line, MAX_MESSAGE_BYTES, |bytes| {
            scan.feed(bytes);
        })
        .await
        {
            Line::End => break,
            Line::Whole => out.write_all(&line).await,
            Line::Over { total } => {
                tracing::warn!(server = %name, bytes = total, "a server's message is over the limit");
                match scan.response_id() {
                    Some(id) => {
                        let mut stand_in =
                            too_large(&id, MAX_MESSAGE_BYTES, Some(total)).to_string();
                        stand_in.push('\n');
                        out.write_all(stand_in.as_bytes()).await
                    }
                    None => Ok(()),
                }
            }
        };
        if written.is_err() {
            break;
        }
        if line.capacity() > 1024 * 1024 {
            line = Vec::new();
        }
    }
    let _ = out.shutdown().await;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id_of(text: &str) -> Option<serde_json::Value> {
        let mut scan = IdScan::default();
        // Fed in pieces, as lines arrive.
        for piece in text.as_bytes().chunks(3) {
            scan.feed(piece);
        }
        scan.response_id()
    }

    #[test]
    fn the_top_level_id_of_a_response_is_found_wherever_it_stands() {
        use serde_json::json;
        assert_eq!(
            id_of(r#"{"jsonrpc":"2.0","id":7,"result":{"content":[{"id":9,"text":"x"}]}}"#),
            Some(json!(7))
        );
        assert_eq!(
            id_of(r#"{"result":{"id":"inner","s":"a\"b,\"id\":3"},"jsonrpc":"2.0","id":"k-2"}"#),
            Some(json!("k-2"))
        );
        assert_eq!(
            id_of(r#"{ "id" : 12 , "result" : [1,2,3] }"#),
            Some(json!(12))
        );
        // A request or notification of the server's is no answer to keel.
        assert_eq!(
            id_of(r#"{"jsonrpc":"2.0","id":4,"method":"sampling/createMessage","params":{}}"#),
            None
        );
        assert_eq!(id_of(r#"{"jsonrpc":"2.0","result":{}}"#), None);
        assert_eq!(id_of(r#"{"id":{"x":1},"result":{}}"#), None);
    }

    /// Any JSON value, strings with quotes, escapes and braces among them.
    fn json_value() -> impl Strategy<Value = serde_json::Value> {
        let leaf = prop_oneof![
            Just(serde_json::Value::Null),
            any::<bool>().prop_map(serde_json::Value::from),
            any::<i64>().prop_map(serde_json::Value::from),
            "[a-z\\\"{}\\[\\],:\\\\ é]{0,12}".prop_map(serde_json::Value::from),
        ];
        leaf.prop_recursive(4, 32, 6, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..6).prop_map(serde_json::Value::from),
                proptest::collection::btree_map("[a-z\"]{1,6}", inner, 0..6)
                    .prop_map(|m| { serde_json::Value::Object(m.into_iter().collect()) }),
            ]
        })
    }

    use proptest::prelude::*;

    proptest::proptest! {
        #[test]
        fn the_id_of_any_response_is_found_in_any_pieces(
            result in json_value(),
            id in prop_oneof![
                any::<u32>().prop_map(serde_json::Value::from),
                "[a-z0-9-]{1,12}".prop_map(serde_json::Value::from),
            ],
            id_last in any::<bool>(),
            piece in 1usize..40,
        ) {
            let text = if id_last {
                format!("{{\"result\":{result},\"jsonrpc\":\"2.0\",\"id\":{id}}}")
            } else {
                format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"result\":{result}}}")
            };
            let mut scan = IdScan::default();
            for chunk in text.as_bytes().chunks(piece) {
                scan.feed(chunk);
            }
            proptest::prop_assert_eq!(scan.response_id(), Some(id));
        }
    }

    #[tokio::test]
    async fn an_over_long_answer_becomes_an_error_for_its_request() {
        use tokio::io::AsyncBufReadExt as _;
        let big = "y".repeat(MAX_MESSAGE_BYTES + 10);
        let text = format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":3,\"result\":{{\"text\":\"{big}\"}}}}\n{{\"jsonrpc\":\"2.0\",\"id\":4,\"result\":{{}}}}\n"
        );
        let (out, read) = tokio::io::duplex(64 * 1024);
        tokio::spawn(forward(
            "s".into(),
            std::io::Cursor::new(text.into_bytes()),
            out,
        ));
        let mut lines = tokio::io::BufReader::new(read).lines();
        let first: serde_json::Value =
            serde_json::from_str(&lines.next_line().await.unwrap().unwrap()).unwrap();
        assert_eq!(first["id"], 3);
        let message = first["error"]["message"].as_str().unwrap();
        assert!(
            message.contains("16.0 MiB, more than the 16 MiB"),
            "{message}"
        );
        let second = lines.next_line().await.unwrap().unwrap();
        assert_eq!(second, r#"{"jsonrpc":"2.0","id":4,"result":{}}"#);
    }
}
