//! A plan submitted for review in plan mode, as its `plan_ready` event tells it: the plan is shown as a cell at once, and when its turn has ended (the
//! runtime would refuse a new one before) a choice opens: approve it into auto or ask mode,
//! which sends `/approve-plan` to the runtime like any extension command, or keep planning,
//! which leaves the composer for feedback (a normal prompt, still in plan mode).

use super::popup::{PickItem, Picker, PickerKind, Popup};
use super::{App, Effect};
use crate::cells::{Cell, Tone};
use crate::slash::Expect;

/// The command that approves the plan (the plan extension's).
const APPROVE: &str = "approve-plan";

impl App {
    /// A plan was submitted: shown now, the choice once the turn ends.
    pub(super) fn plan_ready(&mut self, plan: &keel_protocol::PlanInfo) {
        self.push(Cell::Plan(plan.text.clone()));
        self.plan_review = true;
        if !self.busy() {
            self.open_plan_review();
        }
    }

    /// Opens the choice for a plan waiting for review, if one is.
    pub(super) fn open_plan_review(&mut self) {
        if !std::mem::take(&mut self.plan_review) {
            return;
        }
        let items = [
            (
                "approve, then auto",
                "carry the plan out, editing the workspace without asking",
                "auto",
            ),
            (
                "approve, then ask",
                "carry the plan out, asking before each change",
                "ask",
            ),
            (
                "keep planning",
                "type feedback for the model in the composer",
                "",
            ),
        ]
        .into_iter()
        .map(|(label, detail, value)| PickItem {
            label: label.to_owned(),
            detail: detail.to_owned(),
            value: value.to_owned(),
            revision: None,
        })
        .collect();
        self.popup = Some(Popup::Picker(Picker::new(
            PickerKind::PlanReview,
            "The plan is ready for review",
            items,
        )));
    }

    /// The choice was made.
    pub(super) fn plan_picked(&mut self, item: &PickItem, effects: &mut Vec<Effect>) {
        if item.value.is_empty() {
            self.notice(
                Tone::Info,
                "still planning: tell the model what to change, and it revises the plan",
            );
        } else {
            self.extension_command(APPROVE, &item.value, Expect::Turn, effects);
        }
    }
}
