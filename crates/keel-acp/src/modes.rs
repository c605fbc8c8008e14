//! Session modes (keel's permission modes, with `default` for the folder's configured one)
//! and config options (the mode and the model), as ACP offers them.

use agent_client_protocol::v1::schema::{
    SessionConfigOption, SessionConfigOptionCategory, SessionConfigSelectOption, SessionMode,
    SessionModeState,
};

/// The modes keel offers, with what each lets the agent do.
pub const MODES: [(&str, &str, &str); 4] = [
    (
        "ask",
        "Ask",
        "Ask before every edit and command; reads run freely",
    ),
    (
        "auto",
        "Auto",
        "Edit and run inside the workspace; ask before anything riskier",
    ),
    (
        "full",
        "Full access",
        "Run everything without asking (the sandbox still applies)",
    ),
    (
        "plan",
        "Plan",
        "Read and investigate only; no edits or commands that change things",
    ),
];

/// The id `session/set_mode` takes for the folder's configured mode.
pub const DEFAULT_MODE: &str = "default";

/// The mode `id` names, with `default` resolved to `configured`; `None` when keel has no
/// such mode.
pub fn resolve<'a>(id: &'a str, configured: &'a str) -> Option<&'a str> {
    if id == DEFAULT_MODE {
        return Some(configured);
    }
    MODES.iter().find(|(mode, _, _)| *mode == id).map(|_| id)
}

/// The modes and the current one.
pub fn state(current: &str) -> SessionModeState {
    SessionModeState::new(
        current.to_owned(),
        MODES
            .iter()
            .map(|(id, name, description)| {
                SessionMode::new(*id, *name).description((*description).to_owned())
            })
            .collect(),
    )
}

/// The session's config options: its mode and its model.
pub fn options(mode: &str, model: &str, models: &[String]) -> Vec<SessionConfigOption> {
    let mut choices: Vec<SessionConfigSelectOption> = models
        .iter()
        .map(|m| SessionConfigSelectOption::new(m.clone(), m.clone()))
        .collect();
    if !models.iter().any(|m| m == model) {
        choices.insert(
            0,
            SessionConfigSelectOption::new(model.to_owned(), model.to_owned()),
        );
    }
    vec![
        SessionConfigOption::select(
            "mode",
            "Mode",
            mode.to_owned(),
            MODES
                .iter()
                .map(|(id, name, description)| {
                    SessionConfigSelectOption::new(*id, *name)
                        .description((*description).to_owned())
                })
                .collect::<Vec<_>>(),
        )
        .category(SessionConfigOptionCategory::Mode),
        SessionConfigOption::select("model", "Model", model.to_owned(), choices)
            .category(SessionConfigOptionCategory::Model),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_is_the_configured_mode_and_unknown_modes_are_refused() {
        assert_eq!(resolve("default", "auto"), Some("auto"));
        assert_eq!(resolve("plan", "auto"), Some("plan"));
        assert_eq!(resolve("yolo", "auto"), None);
        let state = state("ask");
        assert_eq!(state.available_modes.len(), 4);
    }
}
