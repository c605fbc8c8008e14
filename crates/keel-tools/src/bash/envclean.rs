//! Cleaning the environment of shell subprocesses (SPEC §16).
//!
//! Layer A always removes the variables that describe keel's own runtime boundary, so a
//! command cannot pose as the parent session. Layer B removes credentials by mode: `off`
//! (interactive default), `scrub` (a list of known keys; automatic under CI), `strict`
//! (every name that looks like a secret). The mode comes from an explicit setting, else
//! `KEEL_BASH_ENV_SANITIZE`, else `scrub` when `CI` or `GITHUB_ACTIONS` is set, else `off`.

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

/// The layer-B mode: the explicit setting, else the environment.
pub fn mode(explicit: Option<EnvMode>, vars: &[(String, String)]) -> EnvMode {
    if let Some(mode) = explicit {
        return mode;
    }
    let get = |name: &str| {
        vars.iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    };
    match get(MODE_VARIABLE).map(|v| v.trim().to_ascii_lowercase()) {
        Some(v) if v == "off" => EnvMode::Off,
        Some(v) if v == "scrub" => EnvMode::Scrub,
        Some(v) if v == "strict" => EnvMode::Strict,
        _ if get("CI").is_some_and(|v| !v.is_empty())
            || get("GITHUB_ACTIONS").is_some_and(|v| !v.is_empty()) =>
        {
            EnvMode::Scrub
        }
        _ => EnvMode::Off,
    }
}

/// The cleaned environment and the names removed (values are never reported).
pub fn clean(vars: Vec<(String, String)>, mode: EnvMode) -> (Vec<(String, String)>, Vec<String>) {
    let mut removed = Vec::new();
    let kept = vars
        .into_iter()
        .filter(|(name, _)| {
            let drop = is_boundary(name)
                || match mode {
                    EnvMode::Off => false,
                    EnvMode::Scrub => KNOWN_KEYS.contains(&name.as_str()),
                    EnvMode::Strict => KNOWN_KEYS.contains(&name.as_str()) || looks_secret(name),
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

fn looks_secret(name: &str) -> bool {
    if NOT_SECRETS.contains(&name) {
        return false;
    }
    let upper = name.to_ascii_uppercase();
    SECRET_MARKS.iter().any(|mark| upper.contains(mark))
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
    fn the_mode_comes_from_setting_then_variable_then_ci() {
        assert_eq!(mode(Some(EnvMode::Strict), &vars(&["CI"])), EnvMode::Strict);
        assert_eq!(
            mode(
                None,
                &[
                    ("KEEL_BASH_ENV_SANITIZE".into(), "off".into()),
                    ("CI".into(), "1".into())
                ]
            ),
            EnvMode::Off
        );
        assert_eq!(
            mode(None, &[("GITHUB_ACTIONS".into(), "true".into())]),
            EnvMode::Scrub
        );
        assert_eq!(mode(None, &vars(&["PATH"])), EnvMode::Off);
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
        let (kept, removed) = clean(all.clone(), EnvMode::Off);
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
        let (kept, _) = clean(all.clone(), EnvMode::Scrub);
        assert_eq!(
            names(&kept),
            ["PATH", "HOME", "MY_SERVICE_TOKEN", "SSH_AUTH_SOCK"]
        );
        let (kept, removed) = clean(all, EnvMode::Strict);
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
