//! Bounding what a tool sends back to the model.

/// Keeps the head and tail of `text` when it is longer than `max_bytes`, cutting on
/// character boundaries, with a marker saying how much was left out.
pub fn head_tail(text: &str, max_bytes: usize) -> (String, bool) {
    if text.len() <= max_bytes {
        return (text.to_owned(), false);
    }
    let half = max_bytes / 2;
    let mut head_end = half;
    while !text.is_char_boundary(head_end) {
        head_end -= 1;
    }
    let mut tail_start = text.len() - half;
    while !text.is_char_boundary(tail_start) {
        tail_start += 1;
    }
    let omitted = tail_start - head_end;
    let out = format!(
        "{}\n\n[… {omitted} bytes omitted …]\n\n{}",
        &text[..head_end],
        &text[tail_start..]
    );
    (out, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_head_and_tail_on_char_boundaries() {
        let text = "é".repeat(100);
        let (out, cut) = head_tail(&text, 51);
        assert!(cut);
        assert!(out.starts_with("éé") && out.ends_with("éé"));
        assert!(out.contains("bytes omitted"));
        assert_eq!(head_tail("short", 10), ("short".to_owned(), false));
    }
}
