//! The goal banner: the session's goal as its last `goal` event told it (with a ready
//! `banner` line), shown above the composer while a goal is set. Only a change of status reaches the transcript, as a
//! notice with the reason, so a long goal does not fill it with one line per turn.

use keel_protocol::{GoalInfo, GoalStatus};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};

use crate::cells::Tone;
use crate::wrap::truncate;

/// The goal as the banner shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GoalBanner {
    /// Where the goal stands.
    pub status: GoalStatus,
    /// The line: status, objective, tokens, turns.
    pub text: String,
}

impl GoalBanner {
    /// The banner a goal event shows; `None` once the goal is cleared.
    pub fn of(goal: &GoalInfo) -> Option<Self> {
        (goal.status != GoalStatus::Cleared).then(|| Self {
            status: goal.status,
            text: goal.banner.clone(),
        })
    }

    /// The banner line, cut to `width`.
    pub fn line(&self, width: usize) -> Line<'static> {
        let color = match self.status {
            GoalStatus::Active => Color::Cyan,
            GoalStatus::Complete => Color::Green,
            GoalStatus::Blocked => Color::Red,
            _ => Color::Yellow,
        };
        Line::from(vec![
            Span::styled("◎ ", Style::new().fg(color)),
            Span::styled(
                truncate(&self.text, width.saturating_sub(2)),
                Style::new().fg(color).add_modifier(Modifier::BOLD),
            ),
        ])
    }
}

/// The notice a change from `before` to `goal` deserves, if any: a new goal, or a new
/// status with its reason.
pub fn notice(before: Option<&GoalBanner>, goal: &GoalInfo) -> Option<(Tone, String)> {
    if before.map(|b| b.status) == Some(goal.status) {
        return None;
    }
    let objective = &goal.objective;
    let reason = goal
        .reason
        .as_deref()
        .map(|r| format!(": {r}"))
        .unwrap_or_default();
    Some(match goal.status {
        GoalStatus::Active => (Tone::Info, format!("goal set: {objective}")),
        GoalStatus::Complete => (Tone::Info, format!("goal complete: {objective}")),
        GoalStatus::Cleared => (Tone::Info, "goal cleared".to_owned()),
        GoalStatus::Blocked => (Tone::Error, format!("goal blocked{reason}")),
        other => (
            Tone::Warn,
            format!("goal {}{reason}", other.as_str().replace('_', " ")),
        ),
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use pretty_assertions::assert_eq;

    use super::*;

    fn goal(status: GoalStatus, reason: Option<&str>) -> GoalInfo {
        GoalInfo {
            objective: "ship".into(),
            status,
            reason: reason.map(str::to_owned),
            banner: format!("goal {status}: ship"),
            record: serde_json::Value::Null,
        }
    }

    #[test]
    fn a_status_change_is_one_notice_with_its_reason() {
        let active = goal(GoalStatus::Active, None);
        let banner = GoalBanner::of(&active).unwrap();
        assert_eq!(
            notice(None, &active),
            Some((Tone::Info, "goal set: ship".into()))
        );
        assert_eq!(notice(Some(&banner), &active), None);
        let paused = goal(GoalStatus::Paused, Some("3 identical replies"));
        assert_eq!(
            notice(Some(&banner), &paused),
            Some((Tone::Warn, "goal paused: 3 identical replies".into()))
        );
        assert_eq!(GoalBanner::of(&goal(GoalStatus::Cleared, None)), None);
    }
}
