//! Where the `keel` binary wires the crates together: the runtime with keel's extensions, a
//! scripted model for `--mock-script`, and what the sandbox could not give. This is the one
//! module of keel-cli that names crates behind the runtime; the front ends (`exec`, and
//! `keel-tui` and `keel-acp` through it) use the runtime's contract only.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context as _;
use keel_llm::ModelSpec;
use keel_llm::scripted::{ResponseSpec, ScriptedProvider, ScriptedResponse};
use keel_runtime::{ModelChoice, Prepared, RuntimeError, RuntimeOptions};

/// The runtime with keel's own extensions mounted (context, goals, plan, tasks, MCP, …).
pub fn prepare(options: RuntimeOptions) -> Result<Prepared, RuntimeError> {
    Prepared::new(keel_extensions::with_harness(options))
}

/// A scripted model answering from the JSON file `script` (`--mock-script`).
pub fn mock_model(script: &Path) -> anyhow::Result<ModelChoice> {
    let text = std::fs::read_to_string(script)
        .with_context(|| format!("cannot read the mock script {}", script.display()))?;
    let specs: Vec<ResponseSpec> = serde_json::from_str(&text).with_context(|| {
        format!(
            "the mock script {} is not a JSON list of responses",
            script.display()
        )
    })?;
    let provider = ScriptedProvider::with_responses(specs.into_iter().map(ScriptedResponse::from));
    Ok(ModelChoice::Fixed {
        spec: ModelSpec::scripted(),
        stream: Arc::new(provider),
    })
}

/// What this run's commands lacked, when they ran in a weaker sandbox than keel's full one.
pub fn sandbox_note(mode: keel_protocol::SandboxMode) -> Option<String> {
    keel_sandbox::probed().and_then(|support| support.degraded(mode))
}

/// The text of `path`, `None` when there is no such file (any other failure names it).
pub fn read_if_present(path: &Path) -> anyhow::Result<Option<String>> {
    match std::fs::read_to_string(path) {
        Ok(text) => Ok(Some(text)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => anyhow::bail!("cannot read {}: {e}", path.display()),
    }
}

/// Writes `text` to `path` whole or not at all.
pub fn write_atomic(path: &Path, text: &str) -> std::io::Result<()> {
    keel_tools::files::write_atomic(path, text.as_bytes())
}

/// The rules of `--allowed-tools` (allow) and `--disallowed-tools` (deny), each list in
/// Claude Code's syntax; a rule keel cannot read is a usage error naming it.
pub fn tool_rules(
    allowed: &[String],
    disallowed: &[String],
) -> anyhow::Result<Vec<keel_tools::permission::Rule>> {
    use keel_tools::permission::rules::{Effect, Rule, from_claude, split_specs};
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let mut rules = Vec::new();
    for (effect, lists, flag) in [
        (Effect::Allow, allowed, "--allowed-tools"),
        (Effect::Deny, disallowed, "--disallowed-tools"),
    ] {
        for spec in lists.iter().flat_map(|list| split_specs(list)) {
            let matcher =
                from_claude(&spec, home.as_deref()).map_err(|e| anyhow::anyhow!("{flag} {e}"))?;
            rules.push(Rule::session(effect, matcher));
        }
    }
    Ok(rules)
}
