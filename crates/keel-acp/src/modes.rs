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

/// What a session's config options show.
#[derive(Debug, Clone, Copy)]
pub struct Current<'a> {
    /// The permission mode.
    pub mode: &'a str,
    /// The model, provider/model.
    pub model: &'a str,
    /// The thinking level chosen, `None`: the model's own.
    pub thinking: Option<&'a str>,
    /// The levels the model offers (`off` first); empty: no thinking option.
    pub levels: &'a [String],
}

/// The session's config options: its mode, its model, and its thinking level when the
/// model reasons.
pub fn options(current: Current<'_>, models: &[String]) -> Vec<SessionConfigOption> {
    let Current {
        mode,
        model,
        thinking,
        levels,
    } = current;
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
    .into_iter()
    .chain((!levels.is_empty()).then(|| {
        let choices: Vec<SessionConfigSelectOption> = std::iter::once("default")
            .chain(levels.iter().map(String::as_str))
            .map(|level| SessionConfigSelectOption::new(level.to_owned(), level.to_owned()))
            .collect();
        SessionConfigOption::select(
            "thinking",
            "Thinking",
            thinking.unwrap_or("default").to_owned(),
            choices,
        )
        .category(SessionConfigOptionCategory::ThoughtLevel)
    }))
    .collect()
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
