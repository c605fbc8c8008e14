//! What `keel exec` checks before it starts a turn: flag values, the working folder, the
//! `-o` file, a closed stdout, and the prompt with its size cap.
//!
//! Every check here runs before the session store is opened, so a bad invocation never
//! leaves a session or a turn behind and never reaches a model. Flag values are checked by
//! clap where a parser can tell (exit 2 with the flag and the allowed values); paths are
//! checked against the file system at the start of the run. A problem found later, once the
//! turn runs, would cost a model call and a stored turn for nothing.

use std::io::IsTerminal as _;
use std::path::{Path, PathBuf};

use anyhow::{Context as _, anyhow, bail};
use tokio::io::AsyncReadExt as _;

/// Largest prompt accepted when `KEEL_MAX_PROMPT_BYTES` does not say otherwise (16 MiB):
/// far past any model's context, small enough that reading it costs little memory.
pub const DEFAULT_MAX_PROMPT_BYTES: u64 = 16 * 1024 * 1024;

/// Environment variable that sets the prompt size cap, in bytes.
pub const MAX_PROMPT_ENV: &str = "KEEL_MAX_PROMPT_BYTES";

/// Parses `--model`: `provider/model`.
pub fn parse_model(text: &str) -> Result<String, String> {
    match text.split_once('/') {
        Some((provider, model)) if !provider.trim().is_empty() && !model.trim().is_empty() => {
            Ok(text.to_owned())
        }
        _ => Err(format!(
            "`{text}` is not provider/model (for example anthropic/claude-sonnet-4-5)"
        )),
    }
}

/// Parses `--base-url`: an `http://` or `https://` URL.
pub fn parse_base_url(text: &str) -> Result<String, String> {
    let rest = text
        .strip_prefix("https://")
        .or_else(|| text.strip_prefix("http://"));
    match rest {
        Some(host)
            if !host.is_empty()
                && !host.starts_with('/')
                && !text.contains(char::is_whitespace) =>
        {
            Ok(text.to_owned())
        }
        _ => Err(format!(
            "`{text}` is not an http:// or https:// URL (for example https://api.example.com/v1)"
        )),
    }
}

/// Parses `-c`: `key.path=value` with a non-empty key.
pub fn parse_override(text: &str) -> Result<String, String> {
    match text.split_once('=') {
        Some((key, _)) if !key.trim().is_empty() && !key.trim().split('.').any(str::is_empty) => {
            Ok(text.to_owned())
        }
        _ => Err(format!(
            "`{text}` is not KEY=VALUE (for example -c permission=plan)"
        )),
    }
}

/// Parses `--goal-budget`: a token count such as 50000, 50K or 1.5M.
pub fn parse_goal_budget(text: &str) -> Result<u64, String> {
    keel_protocol::parse_token_count(text)
        .ok_or_else(|| format!("`{text}` is not a token count (for example 50000, 50K or 1.5M)"))
}

/// `--goal`'s objective, under the prompt's size cap and not empty.
pub fn check_goal(text: &str) -> anyhow::Result<String> {
    let max = keel_protocol::GOAL_OBJECTIVE_MAX_BYTES;
    if text.trim().is_empty() {
        bail!("the goal is empty");
    }
    if text.len() > max {
        bail!("the goal is {} bytes, over the limit of {max}", text.len());
    }
    Ok(text.trim().to_owned())
}

/// An `--add-dir` folder: it must exist; absolute and resolved.
pub fn added_folder(dir: &Path) -> anyhow::Result<PathBuf> {
    match std::fs::metadata(dir) {
        Ok(meta) if meta.is_dir() => dir
            .canonicalize()
            .with_context(|| format!("--add-dir {}: cannot resolve the folder", dir.display())),
        Ok(_) => bail!("--add-dir {} is not a folder", dir.display()),
        Err(error) => bail!("--add-dir {}: {error}", dir.display()),
    }
}

/// The working folder: `--cwd` (which must be an existing folder), else the current one.
pub fn working_folder(flag: Option<&Path>) -> anyhow::Result<PathBuf> {
    let Some(dir) = flag else {
        return std::env::current_dir().context("cannot read the current folder");
    };
    match std::fs::metadata(dir) {
        Ok(meta) if meta.is_dir() => dir
            .canonicalize()
            .with_context(|| format!("--cwd {}: cannot resolve the folder", dir.display())),
        Ok(_) => bail!("--cwd {} is not a folder", dir.display()),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            bail!("--cwd {}: no such folder", dir.display())
        }
        Err(error) => bail!("--cwd {}: {error}", dir.display()),
    }
}

/// The largest image `--image` sends.
const MAX_IMAGE_BYTES: u64 = 20 * 1024 * 1024;

/// `--image FILE`: a PNG, JPEG, GIF or WebP file (known by its bytes, not its name) of at
/// most 20 MiB, sent with the prompt.
pub fn read_image(path: &Path) -> anyhow::Result<keel_protocol::ImageBlock> {
    let meta = match std::fs::metadata(path) {
        Ok(meta) if meta.is_file() => meta,
        Ok(_) => bail!("--image {} is not a file", path.display()),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            bail!("--image {}: no such file", path.display())
        }
        Err(error) => bail!("--image {}: {error}", path.display()),
    };
    if meta.len() > MAX_IMAGE_BYTES {
        bail!(
            "--image {} is {} MiB, more than the 20 MiB keel sends",
            path.display(),
            meta.len() / (1024 * 1024)
        );
    }
    let data =
        std::fs::read(path).map_err(|error| anyhow!("--image {}: {error}", path.display()))?;
    let Some(mime_type) = keel_protocol::image_type(&data) else {
        bail!(
            "--image {} is not a PNG, JPEG, GIF or WebP image",
            path.display()
        );
    };
    Ok(keel_protocol::ImageBlock {
        data,
        mime_type: mime_type.to_owned(),
    })
}

/// `--config FILE` must name a readable file; what is in it is the configuration's business
/// (exit 3), a path that leads nowhere is the flag's (exit 2).
pub fn check_config_file(path: &Path) -> anyhow::Result<()> {
    match std::fs::metadata(path) {
        Ok(meta) if meta.is_file() => Ok(()),
        Ok(_) => bail!("--config {} is not a file", path.display()),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            bail!("--config {}: no such file", path.display())
        }
        Err(error) => bail!("--config {}: {error}", path.display()),
    }
}

/// Whether `-o FILE` can be written the way it will be at the end of the run: a regular
/// file (or none yet) in an existing folder where a temporary file can be created and
/// renamed over it. Checked by creating (and removing) such a file, since permission bits
/// alone do not say what this process may do.
pub fn check_output_file(path: &Path) -> anyhow::Result<()> {
    let refuse = |why: String| anyhow!("cannot write -o {}: {why}", path.display());
    let Some(name) = path.file_name() else {
        return Err(refuse("it names no file".into()));
    };
    // The atomic writer replaces a link's target, not the link: check that target's folder.
    let target = match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_symlink() => std::fs::canonicalize(path).or_else(|_| {
            std::fs::read_link(path)
                .map(|dest| path.parent().map_or(dest.clone(), |dir| dir.join(&dest)))
        }),
        _ => Ok(path.to_path_buf()),
    }
    .map_err(|error| refuse(error.to_string()))?;
    if let Ok(meta) = std::fs::metadata(&target)
        && !meta.is_file()
    {
        return Err(refuse("it is not a regular file".into()));
    }
    let dir = target
        .parent()
        .filter(|dir| !dir.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    match std::fs::metadata(dir) {
        Ok(meta) if meta.is_dir() => {}
        Ok(_) => return Err(refuse(format!("{} is not a folder", dir.display()))),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            return Err(refuse(format!(
                "the folder {} does not exist",
                dir.display()
            )));
        }
        Err(error) => return Err(refuse(format!("the folder {}: {error}", dir.display()))),
    }
    let probe = dir.join(format!(
        ".{}.keel-probe-{}.tmp",
        name.to_string_lossy(),
        std::process::id()
    ));
    match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&probe)
    {
        Ok(_) => {
            let _ = std::fs::remove_file(&probe);
            Ok(())
        }
        Err(error) => Err(refuse(format!(
            "cannot create files in {}: {error}",
            dir.display()
        ))),
    }
}

/// The prompt size cap: `KEEL_MAX_PROMPT_BYTES`, else [`DEFAULT_MAX_PROMPT_BYTES`].
pub fn prompt_cap() -> anyhow::Result<u64> {
    match std::env::var(MAX_PROMPT_ENV) {
        Ok(text) if !text.trim().is_empty() => text
            .trim()
            .parse::<u64>()
            .ok()
            .filter(|cap| *cap > 0)
            .ok_or_else(|| {
                anyhow!("{MAX_PROMPT_ENV}={text} is not a number of bytes greater than zero")
            }),
        _ => Ok(DEFAULT_MAX_PROMPT_BYTES),
    }
}

/// The prompt from the argument, or standard input for `-` or none, refused past the cap.
/// Standard input is read to at most one byte past the cap, so an oversized prompt costs
/// no more memory than the cap.
pub async fn read_prompt(arg: Option<&str>) -> anyhow::Result<String> {
    let cap = prompt_cap()?;
    let prompt = match arg {
        Some(text) if text != "-" => {
            let size = text.len() as u64;
            if size > cap {
                bail!(
                    "the prompt is {}, over the cap of {}; set {MAX_PROMPT_ENV} to raise it",
                    bytes_text(size),
                    bytes_text(cap)
                );
            }
            text.to_owned()
        }
        _ => {
            if arg.is_none() && std::io::stdin().is_terminal() {
                bail!("no prompt: pass one as an argument, or `-` to read standard input");
            }
            let mut bytes = Vec::new();
            tokio::io::stdin()
                .take(cap.saturating_add(1))
                .read_to_end(&mut bytes)
                .await
                .context("cannot read the prompt from standard input")?;
            if bytes.len() as u64 > cap {
                let size = match stdin_file_size() {
                    Some(size) => bytes_text(size),
                    // A pipe: what is left unread stays unread.
                    None => format!(
                        "more than that (keel stopped reading at {} bytes)",
                        bytes.len()
                    ),
                };
                bail!(
                    "the prompt on standard input is over the cap of {}: it is {size}; set \
                     {MAX_PROMPT_ENV} to raise it",
                    bytes_text(cap)
                );
            }
            String::from_utf8(bytes)
                .map_err(|_| anyhow!("the prompt on standard input is not UTF-8 text"))?
        }
    };
    if prompt.trim().is_empty() {
        bail!("the prompt is empty");
    }
    Ok(prompt)
}

/// The size of standard input when it is a regular file (`< big.txt`); a pipe has none.
fn stdin_file_size() -> Option<u64> {
    use std::os::fd::AsFd as _;
    let fd = std::io::stdin().as_fd().try_clone_to_owned().ok()?;
    let meta = std::fs::File::from(fd).metadata().ok()?;
    meta.is_file().then_some(meta.len())
}

/// A byte count with its exact value: `16 MiB (16777216 bytes)`, `12 bytes`.
fn bytes_text(bytes: u64) -> String {
    let short = human(bytes);
    if short.ends_with("bytes") {
        short
    } else {
        format!("{short} ({bytes} bytes)")
    }
}

/// A byte count for people: `16 MiB`, `1.5 KiB`, `12 bytes`.
fn human(bytes: u64) -> String {
    const UNITS: [(&str, u64); 3] = [("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)];
    for (unit, size) in UNITS {
        if bytes >= size {
            let whole = bytes / size;
            let tenths = (bytes % size) * 10 / size;
            return if tenths == 0 {
                format!("{whole} {unit}")
            } else {
                format!("{whole}.{tenths} {unit}")
            };
        }
    }
    format!("{bytes} bytes")
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn flag_values_are_checked_with_the_allowed_ones_named() {
        assert!(parse_model("anthropic/claude").is_ok());
        for bad in ["claude", "/m", "p/", ""] {
            assert!(parse_model(bad).is_err(), "{bad}");
        }
        assert!(parse_base_url("http://127.0.0.1:9/v1").is_ok());
        for bad in [
            "ftp://x",
            "localhost:8080",
            "https://",
            "http:///x",
            "https://a b",
        ] {
            assert!(parse_base_url(bad).is_err(), "{bad}");
        }
        assert!(parse_override("permission=plan").is_ok());
        assert!(parse_override("a.b=").is_ok());
        for bad in ["permission", "=plan", "a..b=1"] {
            assert!(parse_override(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn sizes_read_for_people() {
        assert_eq!(human(DEFAULT_MAX_PROMPT_BYTES), "16 MiB");
        assert_eq!(human(1536), "1.5 KiB");
        assert_eq!(human(12), "12 bytes");
        assert_eq!(bytes_text(1 << 20), "1 MiB (1048576 bytes)");
        assert_eq!(bytes_text(1000), "1000 bytes");
    }

    #[test]
    fn an_output_file_needs_a_writable_existing_folder() {
        let dir = tempfile::tempdir().unwrap();
        check_output_file(&dir.path().join("answer.txt")).unwrap();
        let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert!(left.is_empty(), "the probe is removed");
        let missing = dir.path().join("no/such/answer.txt");
        let error = check_output_file(&missing).unwrap_err().to_string();
        assert!(error.contains("does not exist"), "{error}");
        let file = dir.path().join("plain");
        std::fs::write(&file, "x").unwrap();
        let error = check_output_file(&file.join("answer.txt"))
            .unwrap_err()
            .to_string();
        assert!(error.contains("is not a folder"), "{error}");
        let error = check_output_file(dir.path()).unwrap_err().to_string();
        assert!(error.contains("not a regular file"), "{error}");
    }
}
