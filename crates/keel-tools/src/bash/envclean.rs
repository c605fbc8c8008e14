//! Cleaning the environment of shell subprocesses (DESIGN §16).
//!
//! Layer A always removes the variables that describe keel's own runtime boundary, so a
//! command cannot pose as the parent session, and the key of the provider keel is using.
//! Layer B removes credentials by mode: `off` (only when chosen), `scrub` (a list of known
//! keys; the default everywhere), `strict` (every name that looks like a secret, and every
//! value that looks like a credential: URLs with passwords and known token prefixes). The
//! mode comes from an explicit setting, else `KEEL_BASH_ENV_SANITIZE`, else `scrub`; an
//! unknown value is an error, never a silent `off`.

use crate::env::EnvMode;

/// The variable that picks the layer-B mode.
pub const MODE_VARIABLE: &str = "KEEL_BASH_ENV_SANITIZE";

/// Runtime-boundary variables (layer A), exact names.
const BOUNDARY: &[&str] = &[
    "KEEL_SESSION_ID",
    "KEEL_TURN_ID",
    "KEEL_RUN_ID",
    "KEEL_PARENT_SESSION_ID",
    "KEEL_LEASE_ID",
];
/// Runtime-boundary prefixes (layer A).
const BOUNDARY_PREFIXES: &[&str] = &["KEEL_RUNTIME_", "KEEL_HOST_", "KEEL_ACP_"];

/// Known credential variables (layer B, `scrub`).
const KNOWN_KEYS: &[&str] = &[
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "OPENAI_API_KEY",
    "GEMINI_API_KEY",
    "GOOGLE_API_KEY",
    "MINIMAX_API_KEY",
    "OPENROUTER_API_KEY",
    "DEEPSEEK_API_KEY",
    "MISTRAL_API_KEY",
    "KEEL_PROVIDER_API_KEY",
    "AZURE_OPENAI_API_KEY",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "GITHUB_TOKEN",
    "GH_TOKEN",
    "GITLAB_TOKEN",
    "NPM_TOKEN",
    "HF_TOKEN",
    "HUGGING_FACE_HUB_TOKEN",
    "CARGO_REGISTRY_TOKEN",
    "PYPI_TOKEN",
    "DOCKER_PASSWORD",
];

/// Name fragments that mark a secret (layer B, `strict`), matched on the upper-cased name.
const SECRET_MARKS: &[&str] = &[
    "KEY",
    "TOKEN",
    "SECRET",
    "PASSWORD",
    "PASSWD",
    "CREDENTIAL",
    "AUTH",
    "PRIVATE",
];

/// Names that look secret but are not, kept even in `strict`.
const NOT_SECRETS: &[&str] = &["SSH_AUTH_SOCK", "GPG_AGENT_INFO", "KEYTIMEOUT"];

/// Name endings that mark a secret in `strict` (`STRIPE_SK`, `SENTRY_DSN`).
const SECRET_SUFFIXES: &[&str] = &["_SK", "_DSN", "_PAT", "_PWD", "_PASS"];

/// Value prefixes of well-known tokens (`strict`).
const TOKEN_PREFIXES: &[&str] = &[
    "sk-",
    "sk_live_",
    "sk_test_",
    "rk_live_",
    "rk_test_",
    "ghp_",
    "gho_",
    "ghu_",
    "ghs_",
    "ghr_",
    "github_pat_",
    "glpat-",
    "xoxb-",
    "xoxp-",
    "xoxa-",
    "xoxs-",
    "xapp-",
    "AKIA",
    "ASIA",
    "AIza",
    "hf_",
    "npm_",
    "pypi-",
    "dop_v1_",
    "shpat_",
    "SG.",
    "-----BEGIN",
];

/// An unknown `KEEL_BASH_ENV_SANITIZE` value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{MODE_VARIABLE}={0} is not a cleaning mode (use off, scrub or strict)")]
pub struct UnknownEnvMode(pub String);

/// The layer-B mode: the explicit setting, else the environment, else `scrub`.
pub fn mode(
    explicit: Option<EnvMode>,
    vars: &[(String, String)],
) -> Result<EnvMode, UnknownEnvMode> {
    if let Some(mode) = explicit {
        return Ok(mode);
    }
    let value = vars
        .iter()
        .find(|(k, _)| k == MODE_VARIABLE)
        .map(|(_, v)| v.trim().to_ascii_lowercase());
    match value.as_deref() {
        None | Some("") | Some("scrub") => Ok(EnvMode::Scrub),
        Some("off") => Ok(EnvMode::Off),
        Some("strict") => Ok(EnvMode::Strict),
        Some(_) => Err(UnknownEnvMode(value.unwrap_or_default())),
    }
}

/// The layer-B mode of keel's own environment, for checking it before anything runs.
pub fn mode_from_process() -> Result<EnvMode, UnknownEnvMode> {
    match std::env::var(MODE_VARIABLE) {
        Ok(value) => mode(None, &[(MODE_VARIABLE.to_owned(), value)]),
        Err(_) => Ok(EnvMode::Scrub),
    }
}

/// A cleaned environment: the variables kept, and the names removed.
pub type Cleaned = (Vec<(String, String)>, Vec<String>);

/// The environment a command of `env` starts with, cleaned, and the names removed: the
/// configured base environment (else keel's own), in the mode the setting or the
/// environment chooses.
pub fn command_env(env: &crate::ToolEnv) -> Result<Cleaned, UnknownEnvMode> {
    let vars: Vec<(String, String)> = match &env.base_env {
        Some(vars) => vars.clone(),
        None => std::env::vars_os()
            .map(|(k, v)| {
                (
                    k.to_string_lossy().into_owned(),
                    v.to_string_lossy().into_owned(),
                )
            })
            .collect(),
    };
    let mode = mode(env.env_mode, &vars)?;
    Ok(clean(vars, mode, &env.secret_env_names))
}

/// The environment of a program keel starts for the user rather than for the model (an
/// MCP server, a hook): keel's own, cleaned as commands' is, at least in `scrub` mode
/// whatever the setting says, and without the variables `always` names (providers' keys).
pub fn helper_env(always: &[String]) -> Vec<(String, String)> {
    let vars: Vec<(String, String)> = std::env::vars_os()
        .map(|(k, v)| {
            (
                k.to_string_lossy().into_owned(),
                v.to_string_lossy().into_owned(),
            )
        })
        .collect();
    let mode = match mode(None, &vars) {
        Ok(EnvMode::Strict) => EnvMode::Strict,
        _ => EnvMode::Scrub,
    };
    clean(vars, mode, always).0
}

/// The cleaned environment and the names removed (values are never reported). `always`
/// names variables removed in every mode (the key of the provider in use).
pub fn clean(
    vars: Vec<(String, String)>,
    mode: EnvMode,
    always: &[String],
) -> (Vec<(String, String)>, Vec<String>) {
    let mut removed = Vec::new();
    let kept = vars
        .into_iter()
        .filter(|(name, value)| {
            let drop = is_boundary(name)
                || always.iter().any(|a| a == name)
                || match mode {
                    EnvMode::Off => false,
                    EnvMode::Scrub => KNOWN_KEYS.contains(&name.as_str()),
                    EnvMode::Strict => {
                        KNOWN_KEYS.contains(&name.as_str())
                            || looks_secret(name)
                            || looks_like_credential(value)
                    }
                };
            if drop {
                removed.push(name.clone());
            }
            !drop
        })
        .collect();
    removed.sort();
    (kept, removed)
}

fn is_boundary(name: &str) -> bool {
    BOUNDARY.contains(&name) || BOUNDARY_PREFIXES.iter().any(|p| name.starts_with(p))
}

/// Whether a variable's name marks its value as a secret (`*_TOKEN`, `*_SECRET`,
/// `STRIPE_SK`, …), apart from names that only look like it (`SSH_AUTH_SOCK`).
pub fn looks_secret(name: &str) -> bool {
    if NOT_SECRETS.contains(&name) {
        return false;
    }
    let upper = name.to_ascii_uppercase();
    SECRET_MARKS.iter().any(|mark| upper.contains(mark))
        || SECRET_SUFFIXES.iter().any(|suffix| upper.ends_with(suffix))
}

/// Whether a value looks like a credential: a known token prefix, or a URL with a password
/// (`postgres://user:secret@host`).
pub fn looks_like_credential(value: &str) -> bool {
    let value = value.trim();
    if TOKEN_PREFIXES.iter().any(|p| value.starts_with(p)) && value.len() >= 12 {
        return true;
    }
    url_with_password(value)
}

fn url_with_password(value: &str) -> bool {
    let Some((scheme, rest)) = value.split_once("://") else {
        return false;
    };
    if scheme.is_empty()
        || !scheme
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "+.-".contains(c))
    {
        return false;
    }
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    match authority.rsplit_once('@') {
        Some((userinfo, _)) => userinfo
            .split_once(':')
            .is_some_and(|(_, password)| !password.is_empty()),
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn vars(names: &[&str]) -> Vec<(String, String)> {
        names
            .iter()
            .map(|n| ((*n).to_owned(), "value".to_owned()))
            .collect()
    }

    fn names(vars: &[(String, String)]) -> Vec<&str> {
        vars.iter().map(|(k, _)| k.as_str()).collect()
    }

    #[test]
    fn the_mode_comes_from_setting_then_variable_then_defaults_to_scrub() {
        assert_eq!(
            mode(Some(EnvMode::Strict), &vars(&["CI"])),
            Ok(EnvMode::Strict)
        );
        assert_eq!(
            mode(None, &[("KEEL_BASH_ENV_SANITIZE".into(), "off".into())]),
            Ok(EnvMode::Off)
        );
        assert_eq!(mode(None, &vars(&["PATH"])), Ok(EnvMode::Scrub));
    }

    #[test]
    fn an_unknown_mode_is_an_error_not_off() {
        assert_eq!(
            mode(None, &[("KEEL_BASH_ENV_SANITIZE".into(), "Strikt".into())]),
            Err(UnknownEnvMode("strikt".into()))
        );
    }

    #[test]
    fn strict_removes_credential_shaped_values_and_suffixes() {
        let all: Vec<(String, String)> = [
            ("STRIPE_SK", "sk_live_abcdefghijklmnop"),
            ("DATABASE_URL", "postgres://u:hunter2@db.example/app"),
            ("PLAIN_URL", "https://example.com/a@b"),
            ("USER_URL", "https://user@example.com/"),
            ("SOMETHING", "ghp_0123456789abcdefghij"),
            ("SHORT", "sk-"),
            ("PATH", "/usr/bin"),
        ]
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
        let (kept, removed) = clean(all, EnvMode::Strict, &[]);
        assert_eq!(names(&kept), ["PLAIN_URL", "USER_URL", "SHORT", "PATH"]);
        assert_eq!(removed, ["DATABASE_URL", "SOMETHING", "STRIPE_SK"]);
    }

    #[test]
    fn the_provider_key_goes_in_every_mode() {
        let all = vars(&["MY_PROVIDER_KEY_VAR", "PATH"]);
        let always = ["MY_PROVIDER_KEY_VAR".to_owned()];
        let (kept, removed) = clean(all, EnvMode::Off, &always);
        assert_eq!(names(&kept), ["PATH"]);
        assert_eq!(removed, ["MY_PROVIDER_KEY_VAR"]);
    }

    #[test]
    fn each_mode_removes_what_it_should() {
        let all = vars(&[
            "PATH",
            "HOME",
            "KEEL_SESSION_ID",
            "KEEL_RUNTIME_SOCKET",
            "OPENAI_API_KEY",
            "MY_SERVICE_TOKEN",
            "SSH_AUTH_SOCK",
        ]);
        let (kept, removed) = clean(all.clone(), EnvMode::Off, &[]);
        assert_eq!(
            names(&kept),
            [
                "PATH",
                "HOME",
                "OPENAI_API_KEY",
                "MY_SERVICE_TOKEN",
                "SSH_AUTH_SOCK"
            ]
        );
        assert_eq!(removed, ["KEEL_RUNTIME_SOCKET", "KEEL_SESSION_ID"]);
        let (kept, _) = clean(all.clone(), EnvMode::Scrub, &[]);
        assert_eq!(
            names(&kept),
            ["PATH", "HOME", "MY_SERVICE_TOKEN", "SSH_AUTH_SOCK"]
        );
        let (kept, removed) = clean(all, EnvMode::Strict, &[]);
        assert_eq!(names(&kept), ["PATH", "HOME", "SSH_AUTH_SOCK"]);
        assert_eq!(
            removed,
            [
                "KEEL_RUNTIME_SOCKET",
                "KEEL_SESSION_ID",
                "MY_SERVICE_TOKEN",
                "OPENAI_API_KEY"
            ]
        );
    }
}
