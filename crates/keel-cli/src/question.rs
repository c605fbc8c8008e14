//! What keel says and asks on the terminal before the TUI takes it (the trust and home
//! folder questions): text wrapped to the window at spaces, as the terminal would not.

use std::io::Write;

/// The width questions wrap to: the window's, at most 100 columns to stay readable.
fn width() -> usize {
    keel_tui::term::columns().clamp(20, 100)
}

/// Writes `text` as one paragraph.
pub fn say(out: &mut impl Write, text: &str) -> std::io::Result<()> {
    say_indented(out, "", "", text)
}

/// Writes `text` with its first row after `first` and the others after `rest`.
pub fn say_indented(
    out: &mut impl Write,
    first: &str,
    rest: &str,
    text: &str,
) -> std::io::Result<()> {
    for row in keel_tui::wrap::wrap_text(text, width(), first, rest) {
        writeln!(out, "{row}")?;
    }
    Ok(())
}

/// Asks `question` with a `[y/N]` and reads the answer from standard input: only a yes
/// (`y`, `yes`, any case) is one.
pub fn yes(out: &mut impl Write, question: &str) -> std::io::Result<bool> {
    write!(out, "{question} [y/N] ")?;
    out.flush()?;
    let mut answer = String::new();
    std::io::stdin().read_line(&mut answer)?;
    Ok(matches!(
        answer.trim().to_ascii_lowercase().as_str(),
        "y" | "yes"
    ))
}
