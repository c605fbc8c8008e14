//! The `keel mcp` commands that reach a server: `login`, `logout`, `get`'s health check
//! and `call`. Each starts only the one server named, as a session would, and logs in only
//! when the user asked (`login`, or `--login`): at most three authorizations a command, so
//! a server that keeps asking for more cannot loop it.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail};
use keel_mcp::auth::{self, Browser, Login};
use keel_mcp::config::{Defaults, Origin, ServerSpec, Transport};
use keel_mcp::manager::{Manager, Server, Status};
use keel_runtime::settings::{Settings, SettingsInput};

/// Authorizations one command may make before it gives up on a server that keeps refusing.
const MAX_LOGINS: usize = 3;

/// The settings and the spec of the configured server `name`.
pub(super) struct Target {
    /// Its spec, as a session runs it.
    pub(super) spec: ServerSpec,
    /// `$KEEL_HOME`.
    keel_home: std::path::PathBuf,
    /// The environment servers get.
    env: Vec<(String, String)>,
    /// What a server's request for input gets.
    elicitation: keel_runtime::settings::extend::ElicitationPolicy,
    cwd: std::path::PathBuf,
}

impl Target {
    /// The server `name` of the user's (or a trusted project's) configuration.
    pub(super) fn of(cwd: &Path, name: &str) -> anyhow::Result<Self> {
        let settings = Settings::load(&SettingsInput {
            cwd: cwd.to_path_buf(),
            keel_home: None,
            ..Default::default()
        })?;
        let config = &settings.loaded.config;
        let Some(definition) = config.mcp_servers.get(name) else {
            bail!(
                "no configured MCP server named `{name}` (see `keel mcp list`; a project's \
                 .mcp.json servers run in sessions once trusted)"
            );
        };
        let defaults = Defaults::of(config).map_err(|e| anyhow!(e))?;
        let spec = keel_mcp::config::spec_of(name, definition, defaults, Origin::Config)
            .map_err(|e| anyhow!(e))?;
        let keel_home = settings
            .keel_home
            .clone()
            .ok_or_else(|| anyhow!("cannot find keel's folder: set KEEL_HOME or HOME"))?;
        Ok(Self {
            spec,
            keel_home,
            env: keel_mcp::server_env(config),
            elicitation: config.mcp.elicitation.unwrap_or_default(),
            cwd: cwd.to_path_buf(),
        })
    }

    /// The login of an HTTP server.
    fn login(&self) -> anyhow::Result<Login> {
        let Transport::Http { url, oauth, .. } = &self.spec.transport else {
            bail!(
                "MCP server `{}` is a command keel starts; only HTTP servers log in",
                self.spec.name
            );
        };
        let env = |name: &str| {
            self.env
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.clone())
        };
        Ok(Login::new(
            &self.spec.name,
            url,
            oauth.as_ref(),
            &self.keel_home,
            &env,
        )?)
    }
}

/// Shows the authorization URL and opens the user's browser: `$BROWSER`, else the
/// system's opener.
struct SystemBrowser {
    server: String,
}

impl Browser for SystemBrowser {
    fn open(&self, url: &str, host: &str) {
        eprintln!(
            "keel: `{}` logs in at {host}. Your browser opens; if it does not, open:\n  {url}",
            self.server
        );
        if let Err(error) = auth::open_browser(url) {
            eprintln!("keel: cannot open a browser ({error}); open the URL above.");
        }
    }
}

/// `keel mcp login NAME`.
pub(super) async fn login(target: &Target, json: bool) -> anyhow::Result<()> {
    use std::io::IsTerminal as _;
    let name = &target.spec.name;
    let granted = match target.login()?.begin(None).await? {
        auth::Started::Done(granted) => granted,
        auth::Started::Browser(pending) => {
            // At a terminal the question names where the login goes before anything opens.
            let open = !std::io::stdin().is_terminal()
                || crate::question::yes(
                    &mut std::io::stderr(),
                    &format!(
                        "`{name}` logs in at {}. Open your browser there?",
                        pending.host
                    ),
                )?;
            if open {
                SystemBrowser {
                    server: name.clone(),
                }
                .open(&pending.url, &pending.host);
            } else {
                eprintln!(
                    "keel: not opened. To log in, open this URL yourself (Ctrl-C to stop):\n  {}",
                    pending.url
                );
            }
            pending.finish().await?
        }
    };
    if json {
        println!(
            "{}",
            serde_json::json!({
                "logged_in": target.spec.name,
                "host": granted.host,
                "scopes": granted.scopes,
                "expires_at": granted.expires_at,
            })
        );
    } else {
        println!("{}", logged_in_text(&target.spec.name, &granted));
    }
    Ok(())
}

fn logged_in_text(name: &str, granted: &auth::Granted) -> String {
    let mut text = format!("Logged in to `{name}` at {}", granted.host);
    if !granted.scopes.is_empty() {
        text.push_str(&format!(" (scope {})", granted.scopes.join(" ")));
    }
    text.push('.');
    text
}

/// `keel mcp logout NAME`.
pub(super) fn logout(target: &Target, json: bool) -> anyhow::Result<()> {
    let had = auth::logout(&target.keel_home, &target.spec.name)?;
    if json {
        println!(
            "{}",
            serde_json::json!({"logged_out": target.spec.name, "had_login": had})
        );
    } else if had {
        println!(
            "Logged out of `{}`; its tokens are deleted.",
            target.spec.name
        );
    } else {
        println!("`{}` had no stored login.", target.spec.name);
    }
    Ok(())
}

/// A running server of a command, stopped when dropped.
pub(super) struct Running {
    manager: Manager,
    /// The server.
    pub(super) server: Arc<Server>,
    /// How long it took to start (the last start, after any login).
    pub(super) started_in: Duration,
}

impl Drop for Running {
    fn drop(&mut self) {
        self.manager.restart_all(Vec::new());
    }
}

/// Starts the server; with `login`, a server that asks for one gets it (at most
/// [`MAX_LOGINS`] authorizations in all, `logins` counting them).
pub(super) async fn start(
    target: &Target,
    login: bool,
    logins: &mut usize,
) -> anyhow::Result<Running> {
    loop {
        let manager = Manager::with_elicitation(
            target.cwd.clone(),
            target.env.clone(),
            Some(target.keel_home.clone()),
            target.elicitation,
        );
        let began = Instant::now();
        manager.start(vec![target.spec.clone()]);
        manager.settled(target.spec.startup_timeout).await;
        let started_in = began.elapsed();
        let server = manager
            .get(&target.spec.key())
            .ok_or_else(|| anyhow!("MCP server `{}` did not start", target.spec.name))?;
        let running = Running {
            manager,
            server,
            started_in,
        };
        match running.server.status() {
            Status::Ready => return Ok(running),
            Status::NeedsAuth(advice) if login => {
                let denied = running.server.last_denied();
                drop(running);
                authorize_again(target, denied, logins, &advice).await?;
            }
            status => bail!("MCP server `{}`: {}", target.spec.name, status.describe()),
        }
    }
}

/// One more authorization after a refusal, unless the command has made its last.
pub(super) async fn authorize_again(
    target: &Target,
    denied: Option<auth::Denied>,
    logins: &mut usize,
    advice: &str,
) -> anyhow::Result<()> {
    if *logins >= MAX_LOGINS {
        bail!(
            "{advice} (keel logged in {MAX_LOGINS} times in this command and the server still refuses)"
        );
    }
    *logins += 1;
    let browser = SystemBrowser {
        server: target.spec.name.clone(),
    };
    let granted = target
        .login()?
        .authorize(denied.map(|d| d.challenge), &browser)
        .await?;
    eprintln!("keel: {}", logged_in_text(&target.spec.name, &granted));
    Ok(())
}

/// `keel mcp call NAME TOOL [ARGUMENTS]`.
pub(super) async fn call(
    target: &Target,
    tool: &str,
    arguments: serde_json::Value,
    login: bool,
) -> anyhow::Result<serde_json::Value> {
    let mut logins = 0;
    loop {
        let running = start(target, login, &mut logins).await?;
        match running.server.call(tool, arguments.clone()).await {
            Ok(result) => return Ok(result),
            Err(keel_mcp::McpError::AuthRequired { advice, .. }) if login => {
                let denied = running.server.last_denied();
                drop(running);
                authorize_again(target, denied, &mut logins, &advice).await?;
            }
            Err(error) => return Err(error.into()),
        }
    }
}
