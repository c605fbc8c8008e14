//! The goal banner: the session's goal as the goals extension last reported it (its
//! `goal_updated` event carries the whole goal and a ready `banner` line), shown above the
//! composer while a goal is set. Only a change of status reaches the transcript, as a
//! notice with the reason, so a long goal does not fill it with one line per turn.

use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use serde_json::Value;

use crate::cells::Tone;
use crate::wrap::truncate;

/// The extension whose events carry the goal.
pub const EXTENSION: &str = "goals";
/// The event kind of a goal's change.
pub const UPDATED: &str = "goal_updated";

/// The goal as the banner shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GoalBanner {
    /// `active`, `paused`, `budget_limited`, `blocked` or `complete`.
    pub status: String,
    /// The line: status, objective, tokens, turns.
    pub text: String,
}

impl GoalBanner {
    /// The banner `goal_updated`'s details show; `None` once the goal is cleared.
    pub fn from_details(details: &Value) -> Option<Self> {
        let status = details.get("status")?.as_str()?;
        let text = details.get("banner")?.as_str()?;
        (status != "cleared").then(|| Self {
            status: status.to_owned(),
            text: text.to_owned(),
        })
    }

    /// The banner line, cut to `width`.
    pub fn line(&self, width: usize) -> Line<'static> {
        let color = match self.status.as_str() {
            "active" => Color::Cyan,
            "complete" => Color::Green,
            "blocked" => Color::Red,
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

/// The notice a change from `before` to the goal in `details` deserves, if any: a new
/// goal, or a new status with its reason.
pub fn notice(before: Option<&GoalBanner>, details: &Value) -> Option<(Tone, String)> {
    let status = details.get("status").and_then(Value::as_str)?;
    if before.map(|b| b.status.as_str()) == Some(status) {
        return None;
    }
    let objective = details
        .get("objective")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let reason = details
        .get("reason")
        .and_then(Value::as_str)
        .map(|r| format!(": {r}"))
        .unwrap_or_default();
    Some(match status {
        "active" => (Tone::Info, format!("goal set: {objective}")),
        "complete" => (Tone::Info, format!("goal complete: {objective}")),
        "cleared" => (Tone::Info, "goal cleared".to_owned()),
        "blocked" => (Tone::Error, format!("goal blocked{reason}")),
        other => (
            Tone::Warn,
            format!("goal {}{reason}", other.replace('_', " ")),
        ),
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use pretty_assertions::assert_eq;
    use serde_json::json;

    use super::*;

    #[test]
    fn a_status_change_is_one_notice_with_its_reason() {
        let active =
            json!({"status": "active", "objective": "ship", "banner": "goal active: ship"});
        let banner = GoalBanner::from_details(&active).unwrap();
        assert_eq!(
            notice(None, &active),
            Some((Tone::Info, "goal set: ship".into()))
        );
        assert_eq!(notice(Some(&banner), &active), None);
        let paused = json!({"status": "paused", "reason": "3 identical replies", "banner": "goal paused: ship"});
        assert_eq!(
            notice(Some(&banner), &paused),
            Some((Tone::Warn, "goal paused: 3 identical replies".into()))
        );
        let cleared = json!({"status": "cleared", "objective": "ship", "banner": null});
        assert_eq!(GoalBanner::from_details(&cleared), None);
    }
}
