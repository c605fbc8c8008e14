//! What the editor sends, as the protocol reads it: line by line, never holding more than
//! `acp.max_line_mib` of a line, with what is not UTF-8 replaced, so one bad or huge line
//! costs its own request and not the connection (or keel's memory).

/// What stands in for a line over the limit: not JSON, so the protocol answers it with a
/// parse error, and it quotes no more than the line's first
/// [`keel_runtime::lines::KEPT_OF_OVER_LONG`] bytes.
fn over_long(start: &[u8], total: usize, max: usize) -> String {
    let quoted: String = String::from_utf8_lossy(start)
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    format!(
        "keel skipped a message of {total} bytes: the most it reads is {} MiB \
         (acp.max_line_mib); it began: {quoted}\n",
        max / (1024 * 1024)
    )
}

/// Copies `input` to `out` line by line, replacing what is not UTF-8 and lines over `max`
/// bytes (see [`over_long`]); `out` ends with it. Memory stays within one line of `max`
/// whatever the editor sends.
pub(crate) async fn forward_lines(
    input: impl tokio::io::AsyncRead + Unpin,
    mut out: tokio::io::DuplexStream,
    max: usize,
) {
    use keel_runtime::lines::Line;
    use tokio::io::AsyncWriteExt as _;
    let mut input = tokio::io::BufReader::new(input);
    let mut line = Vec::new();
    loop {
        line.clear();
        let written =
            match keel_runtime::lines::read_bounded(&mut input, &mut line, max, |_| {}).await {
                Line::End => break,
                Line::Over { total } => {
                    tracing::warn!(bytes = total, "skipped an ACP message over the line limit");
                    out.write_all(over_long(&line, total, max).as_bytes()).await
                }
                Line::Whole => match std::str::from_utf8(&line) {
                    Ok(_) => out.write_all(&line).await,
                    Err(_) => {
                        out.write_all(String::from_utf8_lossy(&line).as_bytes())
                            .await
                    }
                },
            };
        if written.is_err() {
            break;
        }
        // A long line's buffer is not kept for the next, short one.
        if line.capacity() > 64 * 1024 {
            line = Vec::new();
        }
    }
    let _ = out.shutdown().await;
}
