//! `keel login [PROVIDER]` and `keel logout [PROVIDER]`: a provider's key kept in keel's
//! credential store (`$KEEL_HOME/credentials.json`, 0600), asked for without echo and
//! checked with a test call; a key in the environment still wins.

use std::io::{IsTerminal as _, Read as _, Write as _};
use std::process::ExitCode;

use keel_runtime::credentials::{self, ProviderKey};
use keel_runtime::settings::config::ENVIRONMENT_PROVIDERS;

/// Arguments of `keel login`.
#[derive(Debug, clap::Args)]
pub struct LoginArgs {
    /// The provider (anthropic, openai, google, openrouter, minimax, deepseek, mistral);
    /// asked for when left out.
    provider: Option<String>,
}

/// Arguments of `keel logout`.
#[derive(Debug, clap::Args)]
pub struct LogoutArgs {
    /// The provider whose key goes; every stored key when left out.
    provider: Option<String>,
}

/// Reads one line from the terminal without showing it (a plain line when standard input
/// is no terminal).
fn hidden_line() -> anyhow::Result<String> {
    let stdin = std::io::stdin();
    if !stdin.is_terminal() {
        let mut line = String::new();
        stdin.read_line(&mut line)?;
        return Ok(line.trim().to_owned());
    }
    crossterm::terminal::enable_raw_mode()?;
    let mut line = Vec::new();
    let mut byte = [0u8; 1];
    let result = loop {
        match stdin.lock().read(&mut byte) {
            Ok(0) => break Ok(()),
            Ok(_) => match byte[0] {
                b'\r' | b'\n' => break Ok(()),
                // Ctrl+C, Ctrl+D: nothing is saved.
                3 | 4 => break Err(anyhow::anyhow!("cancelled; nothing was saved")),
                8 | 127 => {
                    line.pop();
                }
                b => line.push(b),
            },
            Err(error) => break Err(error.into()),
        }
    };
    crossterm::terminal::disable_raw_mode()?;
    eprintln!();
    result?;
    Ok(String::from_utf8_lossy(&line).trim().to_owned())
}

/// Runs `keel login`.
pub async fn login(args: LoginArgs) -> anyhow::Result<ExitCode> {
    let Some(home) = keel_runtime::settings::keel_home() else {
        anyhow::bail!("keel has no home folder: set KEEL_HOME or HOME");
    };
    let names: Vec<&str> = ENVIRONMENT_PROVIDERS.iter().map(|(p, _)| *p).collect();
    let provider = match args.provider {
        Some(provider) => provider,
        None => {
            eprintln!("Which provider?");
            for (i, name) in names.iter().enumerate() {
                eprintln!("  {}. {name}", i + 1);
            }
            eprint!("Number: ");
            std::io::stderr().flush()?;
            let mut answer = String::new();
            std::io::stdin().read_line(&mut answer)?;
            let picked = answer
                .trim()
                .parse::<usize>()
                .ok()
                .and_then(|n| names.get(n.wrapping_sub(1)));
            match picked {
                Some(name) => (*name).to_owned(),
                None => anyhow::bail!("`{}` is not one of the numbers", answer.trim()),
            }
        }
    };
    let Some((_, model)) = ENVIRONMENT_PROVIDERS.iter().find(|(p, _)| *p == provider) else {
        anyhow::bail!(
            "unknown provider `{provider}`: use one of {} (a local server such as ollama needs no key)",
            names.join(", ")
        );
    };
    eprint!("Paste the {provider} key (it is not shown): ");
    std::io::stderr().flush()?;
    let key = hidden_line()?;
    if key.is_empty() {
        anyhow::bail!("no key was given; nothing was saved");
    }
    let mut stored = credentials::load(&home)?;
    stored
        .providers
        .insert(provider.clone(), ProviderKey { api_key: key });
    credentials::save(&home, &stored)?;
    eprintln!(
        "Saved to {} (readable by you alone). A key in the environment still wins.",
        credentials::path(&home).display()
    );
    let check = crate::doctor::test_call(&format!("{provider}/{model}")).await;
    match check {
        Ok(text) => {
            eprintln!("Test call to {provider}/{model}: {text}.");
            Ok(ExitCode::SUCCESS)
        }
        Err(error) => {
            eprintln!(
                "Test call to {provider}/{model} failed: {error}. The key is saved; check it, or run `keel logout {provider}`."
            );
            Ok(ExitCode::from(1))
        }
    }
}

/// Runs `keel logout`.
pub fn logout(args: &LogoutArgs) -> anyhow::Result<ExitCode> {
    let Some(home) = keel_runtime::settings::keel_home() else {
        anyhow::bail!("keel has no home folder: set KEEL_HOME or HOME");
    };
    let mut stored = credentials::load(&home)?;
    let removed = match &args.provider {
        Some(provider) => usize::from(stored.providers.remove(provider).is_some()),
        None => std::mem::take(&mut stored.providers).len(),
    };
    credentials::save(&home, &stored)?;
    eprintln!(
        "Removed {removed} stored key{} from {}.",
        if removed == 1 { "" } else { "s" },
        credentials::path(&home).display()
    );
    Ok(ExitCode::SUCCESS)
}
