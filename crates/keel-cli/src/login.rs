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
    Ok(if set_up(args.provider, false).await? {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// The first-run picker, before the TUI starts when no model can be chosen: the same steps
/// as `keel login`. `false` when nothing usable was set up.
pub async fn first_run() -> anyhow::Result<bool> {
    say(
        "Welcome to keel. No model is set up yet: no provider key is in the environment or \
         stored, and no local model server (Ollama, LM Studio) answered.",
    )?;
    set_up(None, true).await
}

/// Says `text` on standard error, wrapped at the terminal's width.
fn say(text: &str) -> anyhow::Result<()> {
    crate::question::say(&mut std::io::stderr(), text)?;
    Ok(())
}

/// Asks a question on the terminal and reads one line.
fn ask(question: &str) -> anyhow::Result<String> {
    eprint!("{question}");
    std::io::stderr().flush()?;
    let mut answer = String::new();
    std::io::stdin().read_line(&mut answer)?;
    Ok(answer.trim().to_owned())
}

/// Provider, then key (hidden; or the environment's), then model, then a test call; the key
/// and the model are kept only when the call answers (or the user says to keep them).
async fn set_up(provider: Option<String>, first_run: bool) -> anyhow::Result<bool> {
    let Some(home) = keel_runtime::settings::keel_home() else {
        anyhow::bail!("keel has no home folder: set KEEL_HOME or HOME");
    };
    let settings =
        keel_runtime::settings::Settings::load(&keel_runtime::settings::SettingsInput {
            cwd: std::env::current_dir()?,
            ..Default::default()
        })?;
    let loaded = &settings.loaded;
    let variable_of = |provider: &str, model: &str| {
        loaded
            .registry()
            .ok()
            .and_then(|r| r.resolve(provider, model).ok()?.api_key_env)
    };
    let names: Vec<&str> = ENVIRONMENT_PROVIDERS.iter().map(|(p, _)| *p).collect();
    let provider = match provider {
        Some(provider) => provider,
        None => {
            eprintln!("Which provider?");
            for (i, (name, model)) in ENVIRONMENT_PROVIDERS.iter().enumerate() {
                let variable = variable_of(name, model).unwrap_or_default();
                eprintln!("  {}. {name:<11} ({variable})", i + 1);
            }
            let answer = ask("Number: ")?;
            let picked = answer
                .parse::<usize>()
                .ok()
                .and_then(|n| names.get(n.wrapping_sub(1)));
            match picked {
                Some(name) => (*name).to_owned(),
                None => anyhow::bail!("`{answer}` is not one of the numbers; nothing was saved"),
            }
        }
    };
    let Some((_, recommended)) = ENVIRONMENT_PROVIDERS.iter().find(|(p, _)| *p == provider) else {
        anyhow::bail!(
            "unknown provider `{provider}`: use one of {} (a local server such as ollama needs no key)",
            names.join(", ")
        );
    };
    let variable = variable_of(&provider, recommended).unwrap_or_default();
    say(&format!(
        "Paste your {provider} key; it is not shown. Enter alone uses {variable} from the \
         environment."
    ))?;
    eprint!("Key: ");
    std::io::stderr().flush()?;
    let typed = hidden_line()?;
    let from_environment = typed.is_empty();
    let key = if from_environment {
        match std::env::var(&variable) {
            Ok(key) if !key.trim().is_empty() => key,
            _ => {
                say(&format!(
                    "{variable} is not set. Set it in your shell (export {variable}=…) and start \
                     keel again, or paste the key here. Nothing was saved."
                ))?;
                return Ok(false);
            }
        }
    } else {
        typed
    };
    let model = pick_model(&provider, recommended, &loaded.provider_models(&provider))?;
    let name = format!("{provider}/{model}");
    eprintln!("Testing {name} with one short request…");
    let keep = match crate::doctor::test_key(&settings, &name, &key).await {
        Ok(text) => {
            eprintln!("{name} {text}.");
            true
        }
        Err(error) => {
            say(&format!("The test call failed: {error}"))?;
            crate::question::yes(&mut std::io::stderr(), "Keep this set-up anyway?")?
        }
    };
    if !keep {
        eprintln!("Nothing was saved.");
        return Ok(false);
    }
    if !from_environment {
        credentials::update(&home, |stored| {
            stored
                .providers
                .insert(provider.clone(), ProviderKey { api_key: key });
            (true, ())
        })?;
        say(&format!(
            "Saved the key to {} (readable by you alone). A key in the environment still wins.",
            credentials::path(&home).display()
        ))?;
    }
    match &loaded.config.model {
        Some(configured) if configured != &name => say(&format!(
            "Your configuration names {configured}; pass -m {name} to use this one, or change \
             `model:` (`keel config edit`)."
        ))?,
        Some(_) => {}
        None if first_run || model != *recommended => {
            let file = home.join(keel_runtime::settings::FILE_NAME);
            set_model(&file, &name)?;
            say(&format!("Wrote `model: {name}` to {}.", file.display()))?;
        }
        None => {}
    }
    Ok(true)
}

/// The model: the provider's recommended one on Enter, else one of the registry's by number.
fn pick_model(provider: &str, recommended: &str, known: &[String]) -> anyhow::Result<String> {
    let mut models: Vec<&str> = vec![recommended];
    models.extend(
        known
            .iter()
            .map(String::as_str)
            .filter(|m| *m != recommended),
    );
    if models.len() == 1 {
        return Ok(recommended.to_owned());
    }
    eprintln!("Which {provider} model?");
    for (i, model) in models.iter().enumerate() {
        let note = if i == 0 { "  (recommended)" } else { "" };
        eprintln!("  {}. {model}{note}", i + 1);
    }
    let answer = ask("Number (Enter: 1): ")?;
    if answer.is_empty() {
        return Ok(recommended.to_owned());
    }
    match answer
        .parse::<usize>()
        .ok()
        .and_then(|n| models.get(n.wrapping_sub(1)))
    {
        Some(model) => Ok((*model).to_owned()),
        None => anyhow::bail!("`{answer}` is not one of the numbers; nothing was saved"),
    }
}

/// Sets `model: NAME` in the configuration file `file` (made when missing). Put on the first
/// line when that reads back as the same configuration with the model set (comments kept);
/// else the file's mapping is rewritten with the key set.
fn set_model(file: &std::path::Path, name: &str) -> anyhow::Result<()> {
    use yaml_serde::{Mapping, Value};
    let old = crate::assembly::read_if_present(file)?.unwrap_or_default();
    let reads_as = |text: &str| {
        yaml_serde::from_str::<keel_runtime::settings::Config>(text)
            .is_ok_and(|config| config.model.as_deref() == Some(name))
    };
    let prepended = format!("model: {name}\n{old}");
    let text = if reads_as(&prepended) {
        prepended
    } else {
        let mut map = match yaml_serde::from_str::<Value>(&old) {
            Ok(Value::Mapping(map)) => map,
            Ok(Value::Null) => Mapping::new(),
            _ => anyhow::bail!(
                "cannot add `model: {name}` to {}: it is not a configuration mapping; add the line yourself",
                file.display()
            ),
        };
        map.insert(Value::String("model".into()), Value::String(name.into()));
        let text = yaml_serde::to_string(&Value::Mapping(map))?;
        if !reads_as(&text) {
            anyhow::bail!(
                "cannot add `model: {name}` to {}; add the line yourself",
                file.display()
            );
        }
        text
    };
    if let Some(dir) = file.parent() {
        std::fs::create_dir_all(dir)?;
    }
    keel_tools::files::write_atomic(file, text.as_bytes())
        .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", file.display()))
}

/// Runs `keel logout`.
pub fn logout(args: &LogoutArgs) -> anyhow::Result<ExitCode> {
    let Some(home) = keel_runtime::settings::keel_home() else {
        anyhow::bail!("keel has no home folder: set KEEL_HOME or HOME");
    };
    // Under the store's lock: an MCP login refreshed meanwhile is not lost.
    let removed = credentials::update(&home, |stored| {
        let removed = match &args.provider {
            Some(provider) => usize::from(stored.providers.remove(provider).is_some()),
            None => std::mem::take(&mut stored.providers).len(),
        };
        (true, removed)
    })?;
    eprintln!(
        "Removed {removed} stored key{} from {}.",
        if removed == 1 { "" } else { "s" },
        credentials::path(&home).display()
    );
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_model_is_set_without_breaking_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("config.yaml");
        let read = || std::fs::read_to_string(&file).unwrap();
        set_model(&file, "anthropic/claude-sonnet-4-5").unwrap();
        assert_eq!(read(), "model: anthropic/claude-sonnet-4-5\n");
        for old in [
            "# mine\ndurable: true\n",
            "---\ndurable: true\n",
            "model: null\ndurable: true\n",
            "{durable: true}\n",
        ] {
            std::fs::write(&file, old).unwrap();
            set_model(&file, "openai/gpt-5").unwrap();
            let config: keel_runtime::settings::Config = yaml_serde::from_str(&read()).unwrap();
            assert_eq!(config.model.as_deref(), Some("openai/gpt-5"), "{old}");
            assert_eq!(config.durable, Some(true), "{old}");
        }
        std::fs::write(&file, "# mine\ndurable: true\n").unwrap();
        set_model(&file, "openai/gpt-5").unwrap();
        assert!(read().contains("# mine"), "comments stay where they can");
        std::fs::write(&file, "- a list\n").unwrap();
        assert!(set_model(&file, "openai/gpt-5").is_err());
    }
}
