//! MCP servers on the runtime's SPI (DESIGN §10, §11, §11a): the rmcp client, the server
//! manager with revisions and restarts, server tools, resources, prompts and deferred disclosure.
//! It must not import keel-context (its sibling on the SPI), keel-extensions, keel-tui, keel-acp
//! or keel-cli.
#![forbid(unsafe_code)]

mod ask;
pub mod auth;
mod client;
pub mod config;
pub mod content;
pub mod disclosure;
mod elicit;
mod error;
pub mod extension;
mod http;
mod legacy;
pub mod manager;
mod oversize;
pub mod prompts;
pub mod resources;
pub mod tool;

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use keel_runtime::extension::{Extension, ExtensionApi, ExtensionError, HostInfo};
use keel_runtime::settings::Config;
use keel_runtime::settings::trust::TrustStore;

pub use ask::CallOrigin;
pub use config::{Origin, ProjectFileError, ServerSpec, SpecError, Transport};
pub use error::McpError;
pub use manager::{Manager, Status};

/// A project's `.mcp.json` that keel will not run without the user's trust, and the
/// servers it names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Untrusted {
    /// The file.
    pub file: PathBuf,
    /// Its servers' names.
    pub servers: Vec<String>,
    /// What trusting it would protect, and what it would run that nothing protects.
    pub reach: keel_tools::protect::Reach,
}

/// The servers to run for a runtime in `host.cwd` with `config`: the configured ones, then
/// a project's `.mcp.json` when trusted (a name the configuration has wins). Problems and
/// an untrusted project file are reported as warnings.
pub fn servers(config: &Config, host: &HostInfo) -> (Vec<ServerSpec>, Vec<String>) {
    let mut warnings = Vec::new();
    let mut specs = match config::from_config(config) {
        Ok(specs) => specs,
        Err(error) => {
            warnings.push(error.to_string());
            Vec::new()
        }
    };
    match project(config, host) {
        Ok(Some((project, trusted))) => {
            if trusted {
                for spec in project {
                    if specs.iter().any(|s| s.name == spec.name) {
                        warnings.push(format!(
                            "the project's MCP server `{}` is ignored: your configuration has one of that name",
                            spec.name
                        ));
                    } else {
                        specs.push(spec);
                    }
                }
            } else if let Ok(Some(file)) = config::project_file(&host.project) {
                let names: Vec<String> = project.iter().map(|s| s.name.clone()).collect();
                warnings.push(format!(
                    "{} defines MCP server(s) {} that keel did not start: the project is not trusted. \
                     Run `keel trust` to trust the file as it is now, or pass --trust-project-mcp.",
                    file.display(),
                    names.join(", ")
                ));
            }
        }
        Ok(None) => {}
        Err(error) => warnings.push(error.to_string()),
    }
    (specs, warnings)
}

/// The project's servers and whether the user trusts them (`None`: no `.mcp.json`).
fn project(
    config: &Config,
    host: &HostInfo,
) -> Result<Option<(Vec<ServerSpec>, bool)>, ProjectFileError> {
    let Some(file) = config::project_file(&host.project)? else {
        return Ok(None);
    };
    let text = std::fs::read_to_string(&file).map_err(|source| ProjectFileError::Read {
        path: file.clone(),
        source,
    })?;
    let defaults = config::Defaults::of(config).map_err(|source| ProjectFileError::Spec {
        path: file.clone(),
        source,
    })?;
    // `${VAR}` is expanded from what a server may see, so a project cannot send a
    // provider's key to a server of its choosing.
    let cleaned = server_env(config);
    let vars = |name: &str| {
        cleaned
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
    };
    let specs = config::from_project(&file, &text, defaults, &vars)?;
    if specs.is_empty() {
        return Ok(None);
    }
    let trusted = host.trust_project_mcp
        || user_trusts_projects(host.keel_home.as_deref())
        || trusted(host.keel_home.as_deref(), &file);
    Ok(Some((specs, trusted)))
}

/// Whether the user's own `$KEEL_HOME/config.yaml` says `mcp.trust_project: true`. Only
/// that file counts: a project's configuration, even a trusted one, cannot trust the
/// project's servers and hooks for the user.
pub fn user_trusts_projects(keel_home: Option<&Path>) -> bool {
    let Some(file) = keel_home.map(|h| h.join(keel_runtime::settings::FILE_NAME)) else {
        return false;
    };
    std::fs::read_to_string(file)
        .ok()
        .and_then(|text| yaml_serde::from_str::<yaml_serde::Value>(&text).ok())
        .and_then(|value| {
            value
                .get("mcp")
                .and_then(|m| m.get("trust_project"))
                .and_then(yaml_serde::Value::as_bool)
        })
        .unwrap_or(false)
}

fn trusted(keel_home: Option<&Path>, file: &Path) -> bool {
    TrustStore::open(keel_home).is_ok_and(|store| store.is_trusted(file))
}

/// The project `.mcp.json` of `cwd` that would need the user's trust now, if any (for a
/// front end that asks).
pub fn untrusted_project(config: &Config, host: &HostInfo) -> Option<Untrusted> {
    match project(config, host) {
        Ok(Some((specs, false))) => Some(Untrusted {
            file: config::project_file(&host.project).ok()??,
            reach: reach(&specs, host).1,
            servers: specs.into_iter().map(|s| s.name).collect(),
        }),
        _ => None,
    }
}

/// What the stdio servers of `specs` run in the project ([`keel_tools::protect::trusted`]):
/// each protected path with who runs it, and everything together.
pub fn reach(
    specs: &[ServerSpec],
    host: &HostInfo,
) -> (
    Vec<keel_tools::protect::TrustedPath>,
    keel_tools::protect::Reach,
) {
    let project = [host.project.root.clone(), host.cwd.clone()];
    let shell = keel_tools::permission::shell::ShellEnv {
        home: std::env::var_os("HOME").map(PathBuf::from),
        vars: std::collections::HashMap::new(),
    };
    let mut paths = Vec::new();
    let mut all = keel_tools::protect::Reach::default();
    for spec in specs {
        let Transport::Stdio {
            command,
            args,
            env,
            cwd,
        } = &spec.transport
        else {
            continue;
        };
        let env: Vec<(String, String)> = env.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        // As the client starts it: a relative `cwd` is the session's folder's.
        let folder = cwd
            .as_deref()
            .map_or_else(|| host.cwd.clone(), |dir| host.cwd.join(dir));
        let found = keel_tools::protect::reach(
            keel_tools::protect::CommandLine::Argv {
                program: command,
                args,
                env: &env,
            },
            &folder,
            &project,
            &shell,
        );
        paths.extend(found.trusted_paths(&format!(
            "the MCP server `{}` ({}) runs on your trust",
            spec.name,
            spec.origin.label()
        )));
        all.merge(found);
    }
    (paths, all)
}

/// The environment MCP servers and hooks start with: keel's own, cleaned as commands' is
/// (SPEC §16), and never a provider's key, whatever the cleaning mode.
pub fn server_env(config: &Config) -> Vec<(String, String)> {
    let keys: Vec<String> = config
        .providers
        .values()
        .filter_map(|p| p.api_key_env.clone())
        .collect();
    keel_tools::bash::envclean::helper_env(&keys)
}

/// The MCP extension, configured at `init` from the runtime's configuration and folder.
#[derive(Default)]
pub struct McpExtension {
    inner: OnceLock<Arc<extension::Mcp>>,
    /// What its servers run in the project, protected while they are trusted.
    trusted: OnceLock<Vec<keel_tools::protect::TrustedPath>>,
}

impl Extension for McpExtension {
    fn id(&self) -> &str {
        extension::ID
    }

    fn description(&self) -> Option<&str> {
        Some("MCP servers: their tools, resources and prompts")
    }

    fn init(&self, api: &ExtensionApi) -> Result<(), ExtensionError> {
        let config = Arc::new(api.config().clone());
        let host = api.host().clone();
        let mcp = self.inner.get_or_init(|| {
            let (specs, warnings) = servers(&config, &host);
            // What the servers run stays out of the model's reach while they are trusted.
            let _ = self.trusted.set(reach(&specs, &host).0);
            let defaults = config::Defaults::of(&config).unwrap_or_default();
            let manager = Manager::with_asking(
                host.cwd.clone(),
                server_env(&config),
                host.keel_home.clone(),
                config.mcp.elicitation.unwrap_or_default(),
                Some(host.control.clone()),
                host.interactive,
            );
            let reload_config = config.clone();
            let reload_host = host.clone();
            Arc::new(extension::Mcp::new(
                manager,
                specs,
                warnings,
                config.mcp.disclosure.clone(),
                defaults,
                Box::new(move || servers(&reload_config, &reload_host)),
            ))
        });
        api.protect_trusted_code(self.trusted.get().cloned().unwrap_or_default())?;
        mcp.init(api)
    }
}
