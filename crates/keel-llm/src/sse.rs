//! A Server-Sent Events parser, complete to the WHATWG event-stream rules.
//!
//! Lines end in LF, CR or CRLF (a CR at the end of one read followed by an LF at the start
//! of the next is one line end); `data` lines join with LF; lines starting with `:` are
//! comments; `event`, `id` and `retry` are honoured; a leading BOM is dropped; a line split
//! across reads at any byte (inside a UTF-8 sequence too) is joined before decoding. Only the
//! unfinished line is buffered, never the stream so far, so each byte is copied a bounded
//! number of times. An event still open when the stream ends is discarded, as the rules say.

use std::sync::Arc;

/// One dispatched event.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SseEvent {
    /// The `event` field, or `message` when none was given. Shared: a stream repeats a few
    /// names, so each distinct name is allocated once per parser.
    pub event: Arc<str>,
    /// The `data` lines joined with LF.
    pub data: String,
    /// The last event id seen so far (it persists across events).
    pub id: String,
    /// A reconnection time the server asked for, in milliseconds.
    pub retry: Option<u64>,
}

/// Distinct event names remembered per parser.
const NAME_CACHE: usize = 16;

/// Incremental SSE parser: feed it bytes as they arrive.
#[derive(Debug, Default)]
pub struct SseParser {
    line: Vec<u8>,
    after_cr: bool,
    started: bool,
    data: String,
    has_data: bool,
    event: Vec<u8>,
    names: Vec<Arc<str>>,
    last_id: String,
    retry: Option<u64>,
}

const BOM: &[u8] = b"\xEF\xBB\xBF";

impl SseParser {
    /// A parser at the start of a stream.
    pub fn new() -> Self {
        Self::default()
    }

    /// Parses `bytes`, appending every event completed by them to `out`.
    pub fn feed(&mut self, mut bytes: &[u8], out: &mut Vec<SseEvent>) {
        if !self.started {
            // The BOM may itself arrive split across reads.
            let have = self.line.len();
            let take = bytes.len().min(BOM.len() - have);
            if BOM[..have + take] != [self.line.as_slice(), &bytes[..take]].concat()[..] {
                self.started = true;
                let pending = std::mem::take(&mut self.line);
                self.feed_lines(&pending, out);
            } else if have + take == BOM.len() {
                self.started = true;
                self.line.clear();
                bytes = &bytes[take..];
            } else {
                self.line.extend_from_slice(&bytes[..take]);
                return;
            }
        }
        self.feed_lines(bytes, out);
    }

    fn feed_lines(&mut self, mut bytes: &[u8], out: &mut Vec<SseEvent>) {
        if bytes.is_empty() {
            // An empty read says nothing about whether a CR is followed by LF.
            return;
        }
        if self.after_cr {
            self.after_cr = false;
            if let Some(rest) = bytes.strip_prefix(b"\n") {
                bytes = rest;
            }
        }
        while let Some(pos) = bytes.iter().position(|b| *b == b'\n' || *b == b'\r') {
            let is_cr = bytes[pos] == b'\r';
            if self.line.is_empty() {
                self.process_line(&bytes[..pos], out);
            } else {
                self.line.extend_from_slice(&bytes[..pos]);
                let line = std::mem::take(&mut self.line);
                self.process_line(&line, out);
                self.line = line;
                self.line.clear();
            }
            bytes = &bytes[pos + 1..];
            if is_cr {
                match bytes.first() {
                    Some(b'\n') => bytes = &bytes[1..],
                    Some(_) => {}
                    None => self.after_cr = true,
                }
            }
        }
        self.line.extend_from_slice(bytes);
    }

    fn process_line(&mut self, line: &[u8], out: &mut Vec<SseEvent>) {
        if line.is_empty() {
            self.dispatch(out);
            return;
        }
        if line[0] == b':' {
            return;
        }
        let (field, value) = match line.iter().position(|b| *b == b':') {
            Some(colon) => {
                let value = &line[colon + 1..];
                (&line[..colon], value.strip_prefix(b" ").unwrap_or(value))
            }
            None => (line, &b""[..]),
        };
        match field {
            b"data" => {
                if self.has_data {
                    self.data.push('\n');
                }
                self.data.push_str(&String::from_utf8_lossy(value));
                self.has_data = true;
            }
            b"event" => {
                self.event.clear();
                self.event.extend_from_slice(value);
            }
            b"id" if !value.contains(&0) => {
                self.last_id = String::from_utf8_lossy(value).into_owned();
            }
            b"retry" if !value.is_empty() && value.iter().all(u8::is_ascii_digit) => {
                self.retry = std::str::from_utf8(value).ok().and_then(|v| v.parse().ok());
            }
            _ => {}
        }
    }

    fn dispatch(&mut self, out: &mut Vec<SseEvent>) {
        if !self.has_data {
            self.event.clear();
            return;
        }
        self.has_data = false;
        let event = self.name();
        self.event.clear();
        out.push(SseEvent {
            event,
            data: std::mem::take(&mut self.data),
            id: self.last_id.clone(),
            retry: self.retry,
        });
    }
}

impl SseParser {
    /// The current event name as a shared string, from the cache when seen before.
    fn name(&mut self) -> Arc<str> {
        let wanted: &[u8] = if self.event.is_empty() {
            b"message"
        } else {
            &self.event
        };
        if let Some(name) = self.names.iter().find(|n| n.as_bytes() == wanted) {
            return name.clone();
        }
        let name: Arc<str> = Arc::from(String::from_utf8_lossy(wanted).as_ref());
        if self.names.len() == NAME_CACHE {
            self.names.remove(0);
        }
        self.names.push(name.clone());
        name
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use proptest::prelude::*;

    fn parse_all(chunks: &[&[u8]]) -> Vec<SseEvent> {
        let mut parser = SseParser::new();
        let mut out = Vec::new();
        for chunk in chunks {
            parser.feed(chunk, &mut out);
        }
        out
    }

    fn ev(event: &str, data: &str) -> SseEvent {
        SseEvent {
            event: event.into(),
            data: data.into(),
            ..SseEvent::default()
        }
    }

    #[test]
    fn all_line_endings_and_multiline_data() {
        let stream = b"data: a\r\ndata: b\rdata:c\n\nevent: ping\ndata\n\n";
        assert_eq!(
            parse_all(&[stream]),
            [ev("message", "a\nb\nc"), ev("ping", "")]
        );
    }

    #[test]
    fn comments_ids_retry_and_unknown_fields() {
        let stream =
            b": keep-alive\nid: 7\nretry: 1500\nfoo: bar\ndata: x\n\nretry: 1.5\ndata: y\n\n";
        let events = parse_all(&[stream]);
        assert_eq!(
            events[0],
            SseEvent {
                event: "message".into(),
                data: "x".into(),
                id: "7".into(),
                retry: Some(1500)
            }
        );
        assert_eq!(events[1].id, "7", "the last id persists");
        assert_eq!(
            events[1].retry,
            Some(1500),
            "a non-numeric retry is ignored"
        );
    }

    #[test]
    fn a_bom_is_dropped_even_when_split() {
        assert_eq!(
            parse_all(&[b"\xEF", b"\xBB\xBFdata: x\n\n"]),
            [ev("message", "x")]
        );
        assert_eq!(
            parse_all(&[b"\xEF\xBB\xBFdata: x\n\n"]),
            [ev("message", "x")]
        );
    }

    #[test]
    fn crlf_split_between_reads_is_one_line_end() {
        assert_eq!(
            parse_all(&[b"data: a\r", b"\n\r", b"\n"]),
            [ev("message", "a")]
        );
    }

    #[test]
    fn an_unfinished_event_is_discarded_and_empty_data_is_not_dispatched() {
        assert_eq!(parse_all(&[b"event: x\n\ndata: tail"]), []);
    }

    #[test]
    fn utf8_split_inside_a_character() {
        let text = "data: héllo wörld 🎉\n\n".as_bytes();
        for split in 0..text.len() {
            assert_eq!(
                parse_all(&[&text[..split], &text[split..]]),
                [ev("message", "héllo wörld 🎉")]
            );
        }
    }

    fn stream_strategy() -> impl Strategy<Value = Vec<u8>> {
        let line = prop_oneof![
            "[a-z ]{0,12}".prop_map(|d| format!("data: {d}")),
            "[a-z]{1,6}".prop_map(|e| format!("event: {e}")),
            Just(": comment".to_owned()),
            Just("id: 5".to_owned()),
            Just(String::new()),
        ];
        let ending = prop_oneof![Just("\n"), Just("\r"), Just("\r\n")];
        (any::<bool>(), prop::collection::vec((line, ending), 0..30)).prop_map(|(bom, lines)| {
            let mut out = if bom { BOM.to_vec() } else { Vec::new() };
            for (line, end) in lines {
                out.extend_from_slice(line.as_bytes());
                out.extend_from_slice(end.as_bytes());
            }
            out
        })
    }

    proptest! {
        #[test]
        fn any_split_gives_the_same_events(stream in stream_strategy(), cuts in prop::collection::vec(0usize..400, 0..8)) {
            let whole = parse_all(&[&stream]);
            let mut points: Vec<usize> = cuts.into_iter().map(|c| c % (stream.len() + 1)).collect();
            points.sort_unstable();
            let mut chunks = Vec::new();
            let mut last = 0;
            for p in points {
                chunks.push(&stream[last..p]);
                last = p;
            }
            chunks.push(&stream[last..]);
            prop_assert_eq!(parse_all(&chunks), whole.clone());
            let bytewise: Vec<&[u8]> = stream.chunks(1).collect();
            prop_assert_eq!(parse_all(&bytewise), whole);
        }
    }
}
