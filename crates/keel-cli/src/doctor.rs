//! `keel doctor`: checks what keel needs and explains what it finds: the version, the
//! configuration files and their errors, the model and its key (masked) with a live test
//! call, the sandbox, MCP servers, skills and hooks, trust, `$KEEL_HOME`'s permissions and
//! the terminal. Exit 0 when keel is usable, 1 when not, with the first thing to fix.

use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use keel_runtime::settings::{Settings, SettingsInput};

/// Arguments of `keel doctor`.
#[derive(Debug, clap::Args)]
pub struct DoctorArgs {
    /// Check this folder's project instead of the current one.
    #[arg(short = 'C', long, visible_alias = "cd", value_name = "DIR")]
    cwd: Option<std::path::PathBuf>,
    /// The model to check, as provider/model (default: the one keel would use).
    #[arg(short = 'm', long, value_name = "PROVIDER/MODEL")]
    model: Option<String>,
    /// Send requests to this base URL instead of the provider's.
    #[arg(long, value_name = "URL")]
    base_url: Option<String>,
    /// Skip the live test call.
    #[arg(long)]
    offline: bool,
}

/// How long the test call may take.
const CALL_TIMEOUT: Duration = Duration::from_secs(30);

/// One finding.
enum Level {
    Ok,
    Warn,
    Fail,
}

struct Report {
    /// The first thing that makes keel unusable.
    first_failure: Option<String>,
}

impl Report {
    fn line(&mut self, level: Level, what: &str, text: &str) {
        let mark = match level {
            Level::Ok => "ok  ",
            Level::Warn => "warn",
            Level::Fail => "FAIL",
        };
        println!("{mark}  {what:<14} {text}");
        if matches!(level, Level::Fail) && self.first_failure.is_none() {
            self.first_failure = Some(format!("{what}: {text}"));
        }
    }
}

/// The key as it may be shown: its first characters and its last four.
fn masked(key: &str) -> String {
    let key = key.trim();
    let chars: Vec<char> = key.chars().collect();
    if chars.len() <= 12 {
        return "…".to_owned();
    }
    let head: String = chars[..6].iter().collect();
    let tail: String = chars[chars.len() - 4..].iter().collect();
    format!("{head}…{tail}")
}

/// Runs `keel doctor`.
pub async fn run(args: DoctorArgs) -> anyhow::Result<ExitCode> {
    let mut report = Report {
        first_failure: None,
    };
    report.line(
        Level::Ok,
        "version",
        &format!("keel {}", env!("CARGO_PKG_VERSION")),
    );
    let cwd = crate::exec::working_folder_arg(args.cwd.as_deref())?;
    let settings = match Settings::load(&SettingsInput {
        cwd: cwd.clone(),
        ..SettingsInput::default()
    }) {
        Ok(settings) => settings,
        Err(error) => {
            report.line(Level::Fail, "config", &error.to_string());
            return Ok(finish(&report));
        }
    };
    config_files(&settings, &mut report);
    model(&settings, &args, &mut report).await;
    sandbox(&mut report);
    keel_home(settings.keel_home.as_deref(), &mut report);
    mcp_servers(&settings, &cwd, &mut report).await;
    extensions(&settings, &mut report);
    terminal(&mut report);
    Ok(finish(&report))
}

fn finish(report: &Report) -> ExitCode {
    match &report.first_failure {
        None => {
            println!("\nkeel is ready.");
            ExitCode::SUCCESS
        }
        Some(first) => {
            println!("\nkeel cannot work yet. Fix this first: {first}");
            ExitCode::from(1)
        }
    }
}

fn config_files(settings: &Settings, report: &mut Report) {
    let home_file = settings
        .keel_home
        .as_ref()
        .map(|home| home.join(keel_runtime::settings::config::FILE_NAME));
    match home_file {
        Some(file) if file.is_file() => {
            report.line(Level::Ok, "config", &format!("{} (read)", file.display()));
        }
        Some(file) => report.line(
            Level::Ok,
            "config",
            &format!("{} (none; defaults apply)", file.display()),
        ),
        None => report.line(
            Level::Warn,
            "config",
            "no home folder: set KEEL_HOME or HOME",
        ),
    }
    if let Ok(Some(file)) = keel_runtime::settings::config::project_file(&settings.project) {
        report.line(
            Level::Ok,
            "config",
            &format!("{} (project)", file.display()),
        );
    }
    for warning in &settings.warnings {
        report.line(Level::Warn, "config", warning);
    }
    for ignored in &settings.loaded.ignored {
        report.line(Level::Warn, "config", &format!("ignored: {ignored}"));
    }
}

async fn model(settings: &Settings, args: &DoctorArgs, report: &mut Report) {
    let choice = keel_runtime::ModelChoice::Configured {
        model: args.model.clone(),
        base_url: args.base_url.clone(),
    };
    let mut warnings = Vec::new();
    let resolved =
        match keel_runtime::assembly::resolve_model(settings, &choice, None, &mut warnings) {
            Ok(resolved) => resolved,
            Err(error) => {
                report.line(Level::Fail, "model", &error.to_string());
                return;
            }
        };
    for warning in warnings {
        report.line(Level::Warn, "model", &warning);
    }
    let key = resolved
        .key_env
        .as_deref()
        .map(|name| match std::env::var(name) {
            Ok(value) => format!("{name}={}", masked(&value)),
            Err(_) => format!("{name} (unset)"),
        })
        .unwrap_or_else(|| "no key needed".into());
    let url = resolved
        .entry
        .as_ref()
        .map_or_else(String::new, |e| format!(" at {}", e.base_url));
    report.line(
        Level::Ok,
        "model",
        &format!("{}{url}, key {key}", resolved.name),
    );
    let window = u64::from(resolved.spec.context_window);
    match keel_runtime::lean::check(
        &settings.system_prompt(),
        &settings.cwd,
        window,
        keel_runtime::lean::Limits::of(&resolved.spec, &settings.loaded.config.context),
        &resolved.spec.provider,
    ) {
        Some(too_small) => report.line(Level::Fail, "window", &too_small.to_string()),
        None => {
            let budget = keel_runtime::view::WindowLimits::of(
                &resolved.spec,
                &settings.loaded.config.context,
            );
            report.line(
                Level::Ok,
                "window",
                &format!(
                    "{window} tokens; compaction starts at {}, a request may carry {}",
                    budget.compact_at, budget.input_limit
                ),
            );
        }
    }
    if args.offline {
        return;
    }
    match call(&resolved).await {
        Ok(text) => report.line(Level::Ok, "test call", &text),
        Err(error) => report.line(Level::Fail, "test call", &error),
    }
}

/// One small request to `resolved`: how it went, in words.
async fn call(resolved: &keel_runtime::ResolvedModel) -> Result<String, String> {
    let request = keel_llm::LlmRequest {
        model: Arc::new(resolved.spec.clone()),
        system_prompt: Arc::from("Answer with the single word OK."),
        messages: Arc::new(vec![Arc::new(keel_protocol::Message::user_text("Say OK."))]),
        tools: Arc::from(Vec::new()),
        options: keel_llm::RequestOptions {
            max_tokens: Some(16),
            ..keel_llm::RequestOptions::default()
        },
    };
    let cancel = tokio_util::sync::CancellationToken::new();
    let started = Instant::now();
    let asked = keel_llm::collect(resolved.stream.as_ref(), request, cancel.clone());
    let Ok(answer) = tokio::time::timeout(CALL_TIMEOUT, asked).await else {
        cancel.cancel();
        return Err(format!("no answer within {} s", CALL_TIMEOUT.as_secs()));
    };
    match &answer.error {
        Some(error) => Err(format!("{} ({:?})", error.message, error.code)),
        None => Ok(format!(
            "answered in {} ms ({} tokens in, {} out)",
            started.elapsed().as_millis(),
            answer.usage.input + answer.usage.cache_read + answer.usage.cache_write,
            answer.usage.output
        )),
    }
}

/// A test call to `model` (provider/model) with `key`, before the key is kept anywhere
/// (`keel login` and the first-run picker): `settings` give the provider's address (its
/// base-URL variable honoured).
pub async fn test_key(settings: &Settings, model: &str, key: &str) -> Result<String, String> {
    let resolved = settings
        .loaded
        .resolve_model(Some(model))
        .map_err(|e| e.to_string())?;
    let mut entry = resolved.entry;
    if let Some(url) = settings.loaded.environment_base_url(&entry.provider) {
        entry.base_url = url;
    }
    let client = keel_llm::http_client_for(&entry.base_url).map_err(|e| e.to_string())?;
    let spec = entry.spec();
    let model = keel_runtime::ResolvedModel {
        name: format!("{}/{}", spec.provider, spec.id),
        spec,
        stream: Arc::new(keel_llm::HttpProvider::new(
            client,
            entry.clone(),
            Some(key.to_owned()),
        )),
        key_env: resolved.api_key_env,
        entry: Some(Arc::new(entry)),
    };
    call(&model).await
}

fn sandbox(report: &mut Report) {
    let support = keel_sandbox::support();
    match &support.landlock {
        Ok(()) => report.line(
            Level::Ok,
            "sandbox",
            &format!("Landlock ABI {}", support.landlock_abi),
        ),
        Err(why) => report.line(
            Level::Warn,
            "sandbox",
            &format!(
                "no Landlock ({why}): commands cannot be confined; run with --sandbox danger-full-access only where that is fine"
            ),
        ),
    }
    match &support.namespaces {
        Ok(_) => report.line(
            Level::Ok,
            "sandbox",
            "user namespaces: network and processes are isolated",
        ),
        Err(why) => report.line(
            Level::Warn,
            "sandbox",
            &format!("no user namespaces ({why})"),
        ),
    }
    if let Some(note) = support.degraded(keel_protocol::SandboxMode::WorkspaceWrite) {
        report.line(Level::Warn, "sandbox", &note);
    }
}

fn keel_home(home: Option<&Path>, report: &mut Report) {
    use std::os::unix::fs::PermissionsExt as _;
    let Some(home) = home else {
        return;
    };
    match std::fs::metadata(home) {
        Ok(meta) if meta.permissions().mode() & 0o077 != 0 => report.line(
            Level::Warn,
            "KEEL_HOME",
            &format!(
                "{} is readable by others (mode {:o}): chmod 700 it",
                home.display(),
                meta.permissions().mode() & 0o777
            ),
        ),
        Ok(_) => report.line(
            Level::Ok,
            "KEEL_HOME",
            &format!("{} (private)", home.display()),
        ),
        Err(_) => report.line(
            Level::Ok,
            "KEEL_HOME",
            &format!("{} (made at first use)", home.display()),
        ),
    }
}

/// How long doctor waits for all MCP servers to start and list their tools.
const MCP_WAIT: Duration = Duration::from_secs(20);

/// The MCP servers a run here would start, each started and asked for its tools, with the
/// time it took; a project's servers that are not trusted are named and never started.
async fn mcp_servers(settings: &Settings, cwd: &Path, report: &mut Report) {
    let host = keel_runtime::extension::HostInfo {
        cwd: cwd.to_path_buf(),
        project: settings.project.clone(),
        keel_home: settings.keel_home.clone(),
        ..Default::default()
    };
    let (specs, warnings) = keel_mcp::servers(&settings.loaded.config, &host);
    for warning in &warnings {
        report.line(Level::Warn, "MCP", warning);
    }
    if specs.is_empty() {
        report.line(Level::Ok, "MCP", "no servers to start");
        return;
    }
    let manager = keel_mcp::Manager::new(
        cwd.to_path_buf(),
        keel_mcp::server_env(&settings.loaded.config),
        settings.keel_home.clone(),
    );
    let started = Instant::now();
    manager.start(specs);
    let servers = manager.all();
    // One waiter each, so every server's time is its own.
    let waits: Vec<_> = servers
        .iter()
        .map(|server| {
            let server = server.clone();
            tokio::spawn(async move {
                server
                    .settled(server.spec().startup_timeout.min(MCP_WAIT))
                    .await;
                started.elapsed()
            })
        })
        .collect();
    let mut times = Vec::with_capacity(waits.len());
    for wait in waits {
        times.push(wait.await.unwrap_or(MCP_WAIT));
    }
    for (server, took) in servers.iter().zip(times) {
        let name = format!("MCP {}", server.spec().name);
        let ms = took.as_millis();
        match (server.status(), server.offer()) {
            (keel_mcp::Status::Ready, Some(offer)) => report.line(
                Level::Ok,
                &name,
                &format!(
                    "started and listed {} tool(s){} in {ms} ms",
                    offer.tools.len(),
                    if offer.prompts.is_empty() {
                        String::new()
                    } else {
                        format!(" and {} prompt(s)", offer.prompts.len())
                    }
                ),
            ),
            (status, _) => report.line(
                Level::Warn,
                &name,
                &format!(
                    "{} after {ms} ms; its tools will be missing (`keel mcp list` shows its command)",
                    status.describe()
                ),
            ),
        }
    }
    manager.restart_all(Vec::new());
}

fn extensions(settings: &Settings, report: &mut Report) {
    use keel_extensions::{commands, skills};
    let home = settings.keel_home.as_deref();
    let found = skills::discover(&skills::roots(home, Some(&settings.project)));
    let names: Vec<&str> = found.skills.iter().map(|s| s.name.as_str()).collect();
    report.line(
        Level::Ok,
        "skills",
        &format!("{} found{}", names.len(), listed(&names)),
    );
    let found_commands = commands::discover(&commands::roots(home, Some(&settings.project)));
    let names: Vec<String> = found_commands
        .commands
        .iter()
        .map(|c| format!("/{}", c.name))
        .collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    report.line(
        Level::Ok,
        "commands",
        &format!("{} custom command(s){}", names.len(), listed(&names)),
    );
    for problem in found.problems.iter().chain(&found_commands.problems) {
        report.line(Level::Warn, "extensions", &problem.to_string());
    }
    for note in found.notes.iter().chain(&found_commands.notes) {
        report.line(Level::Warn, "extensions", &note.to_string());
    }
    let hooks = settings
        .loaded
        .config
        .hooks
        .as_ref()
        .and_then(|h| h.as_object())
        .map_or(0, serde_json::Map::len);
    report.line(
        Level::Ok,
        "hooks",
        &format!("{hooks} event(s) with hooks in your configuration"),
    );
    let trusted = if settings.project.folder_trusted {
        "trusted"
    } else {
        "not trusted: its keel files may only make keel stricter (`keel trust`)"
    };
    report.line(
        Level::Ok,
        "project",
        &format!("{} ({trusted})", settings.project.root.display()),
    );
}

/// `: a, b, c` (at most eight names, then how many more), or nothing.
fn listed(names: &[&str]) -> String {
    if names.is_empty() {
        return String::new();
    }
    let shown: Vec<&str> = names.iter().take(8).copied().collect();
    let more = names.len().saturating_sub(shown.len());
    if more > 0 {
        format!(": {} and {more} more", shown.join(", "))
    } else {
        format!(": {}", shown.join(", "))
    }
}

fn terminal(report: &mut Report) {
    use std::io::IsTerminal as _;
    let term = std::env::var("TERM").unwrap_or_default();
    let program = std::env::var("TERM_PROGRAM").unwrap_or_default();
    let tty = std::io::stdout().is_terminal();
    let colors = std::env::var("COLORTERM").unwrap_or_default();
    let text = format!(
        "TERM={}{}{}{}",
        if term.is_empty() { "(unset)" } else { &term },
        if program.is_empty() {
            String::new()
        } else {
            format!(", {program}")
        },
        if colors.is_empty() {
            String::new()
        } else {
            format!(", COLORTERM={colors}")
        },
        if tty {
            ""
        } else {
            " (output is not a terminal)"
        }
    );
    let level = if term == "dumb" {
        Level::Warn
    } else {
        Level::Ok
    };
    report.line(level, "terminal", &text);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_shows_only_its_ends() {
        assert_eq!(masked("sk-ant-api03-abcdefghijklmnop-WXYZ"), "sk-ant…WXYZ");
        assert_eq!(masked("short"), "…");
    }
}
