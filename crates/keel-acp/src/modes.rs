//! Session modes (keel's permission modes, with `default` for the folder's configured one)
//! and config options (the mode and the model), as ACP offers them.

use keel_protocol::{PermissionMode, ThinkingChoice, ThinkingLevel};

use agent_client_protocol::v1::schema::{
    SessionConfigOption, SessionConfigOptionCategory, SessionConfigSelectOption, SessionMode,
    SessionModeState,
};

/// The id `session/set_mode` takes for the folder's configured mode.
pub const DEFAULT_MODE: &str = "default";

/// The mode `id` names, with `default` resolved to `configured`; `None` when keel has no
/// such mode.
pub fn resolve(id: &str, configured: PermissionMode) -> Option<PermissionMode> {
    if id == DEFAULT_MODE {
        return Some(configured);
    }
    id.parse().ok()
}

/// The modes and the current one.
pub fn state(current: PermissionMode) -> SessionModeState {
    SessionModeState::new(
        current.name(),
        PermissionMode::ALL
            .iter()
            .map(|mode| {
                SessionMode::new(mode.name(), mode.label()).description(mode.summary().to_owned())
            })
            .collect(),
    )
}

/// What a session's config options show.
#[derive(Debug, Clone, Copy)]
pub struct Current<'a> {
    /// The permission mode.
    pub mode: PermissionMode,
    /// The model, provider/model.
    pub model: &'a str,
    /// The thinking level chosen, `None`: the model's own.
    pub thinking: Option<ThinkingLevel>,
    /// The levels the model offers (`off` first); empty: no thinking option.
    pub levels: &'a [ThinkingLevel],
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
            mode.name(),
            PermissionMode::ALL
                .iter()
                .map(|mode| {
                    SessionConfigSelectOption::new(mode.name(), mode.label())
                        .description(mode.summary().to_owned())
                })
                .collect::<Vec<_>>(),
        )
        .category(SessionConfigOptionCategory::Mode),
        SessionConfigOption::select("model", "Model", model.to_owned(), choices)
            .category(SessionConfigOptionCategory::Model),
    ]
    .into_iter()
    .chain((!levels.is_empty()).then(|| {
        let choices: Vec<SessionConfigSelectOption> = std::iter::once(ThinkingChoice::Default)
            .chain(levels.iter().copied().map(ThinkingChoice::Level))
            .map(|choice| SessionConfigSelectOption::new(choice.name(), choice.name()))
            .collect();
        SessionConfigOption::select(
            "thinking",
            "Thinking",
            ThinkingChoice::from(thinking).name(),
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
        let auto = PermissionMode::Auto;
        assert_eq!(resolve("default", auto), Some(auto));
        assert_eq!(resolve("plan", auto), Some(PermissionMode::Plan));
        assert_eq!(resolve("yolo", auto), None);
        let state = state(PermissionMode::Ask);
        assert_eq!(state.available_modes.len(), 4);
    }
}
