//! Reading a peer's messages line by line (JSON-RPC over pipes: an editor, an MCP server)
//! without ever holding more than a bound of one line, whatever the peer sends.

use tokio::io::{AsyncBufRead, AsyncBufReadExt as _};

/// How much of an over-long line is kept, to name it in an error.
pub const KEPT_OF_OVER_LONG: usize = 200;

/// One line as [`read_bounded`] found it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Line {
    /// The input ended (or failed) before another line.
    End,
    /// A whole line (with its newline, unless the input ended first) is in the buffer.
    Whole,
    /// A line over the bound was read to its end and dropped; its first
    /// [`KEPT_OF_OVER_LONG`] bytes are in the buffer.
    Over {
        /// The line's length.
        total: usize,
    },
}

/// Reads one line into `line` (which it does not clear), holding at most `max` bytes of it.
/// Every byte of a line found to be over `max` goes to `skipped` as it passes, so a caller
/// can still learn something of it (a JSON-RPC id) without keeping it.
pub async fn read_bounded(
    input: &mut (impl AsyncBufRead + Unpin),
    line: &mut Vec<u8>,
    max: usize,
    mut skipped: impl FnMut(&[u8]),
) -> Line {
    let mut total = 0usize;
    loop {
        let buf = match input.fill_buf().await {
            Ok(buf) if !buf.is_empty() => buf,
            _ if total == 0 => return Line::End,
            // The input ended inside a line: it is the last one.
            _ => break,
        };
        let (take, done) = match buf.iter().position(|b| *b == b'\n') {
            Some(at) => (at + 1, true),
            None => (buf.len(), false),
        };
        let was_over = total > max;
        total = total.saturating_add(take);
        if total > max {
            if !was_over {
                // What was held of the line goes to `skipped` first, then is cut to the start.
                skipped(line);
                line.truncate(KEPT_OF_OVER_LONG);
            }
            skipped(&buf[..take]);
            let room = KEPT_OF_OVER_LONG.saturating_sub(line.len());
            line.extend_from_slice(&buf[..take.min(room)]);
        } else {
            line.extend_from_slice(&buf[..take]);
        }
        input.consume(take);
        if done {
            break;
        }
    }
    if total > max {
        Line::Over { total }
    } else {
        Line::Whole
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn lines_over_the_bound_are_dropped_but_their_start() {
        let long = format!("{}\n", "x".repeat(1000));
        let text = format!("short\n{long}after");
        let mut input = tokio::io::BufReader::with_capacity(64, text.as_bytes());
        let mut line = Vec::new();
        assert_eq!(
            read_bounded(&mut input, &mut line, 100, |_| {}).await,
            Line::Whole
        );
        assert_eq!(line, b"short\n");
        line.clear();
        let mut seen = 0;
        let read = read_bounded(&mut input, &mut line, 100, |b| seen += b.len()).await;
        assert_eq!(read, Line::Over { total: 1001 });
        assert_eq!(seen, 1001);
        assert_eq!(line.len(), KEPT_OF_OVER_LONG);
        line.clear();
        assert_eq!(
            read_bounded(&mut input, &mut line, 100, |_| {}).await,
            Line::Whole
        );
        assert_eq!(line, b"after");
        line.clear();
        assert_eq!(
            read_bounded(&mut input, &mut line, 100, |_| {}).await,
            Line::End
        );
    }

    proptest::proptest! {
        #[test]
        fn lines_come_back_whole_or_marked_over_in_any_buffer_size(
            lines in proptest::collection::vec("[a-z ]{0,60}", 0..20),
            capacity in 1usize..32,
            max in 1usize..50,
        ) {
            let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
            let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
            rt.block_on(async {
                let mut input = tokio::io::BufReader::with_capacity(capacity, text.as_bytes());
                for expected in &lines {
                    let mut line = Vec::new();
                    let mut seen = 0;
                    let read = read_bounded(&mut input, &mut line, max, |b| seen += b.len()).await;
                    let whole = expected.len() + 1;
                    if whole > max {
                        assert_eq!(read, Line::Over { total: whole });
                        assert_eq!(seen, whole);
                        assert_eq!(line, format!("{expected}\n").as_bytes()[..whole.min(KEPT_OF_OVER_LONG)]);
                    } else {
                        assert_eq!(read, Line::Whole);
                        assert_eq!(line, format!("{expected}\n").into_bytes());
                    }
                }
                let mut rest = Vec::new();
                assert_eq!(read_bounded(&mut input, &mut rest, max, |_| {}).await, Line::End);
            });
        }
    }
}
