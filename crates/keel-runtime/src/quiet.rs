//! When a session comes to rest. Front ends must not guess it from timers: the runtime
//! knows every way a turn can still come (a follow-up it decided to start, a task's notice,
//! a goal's next turn queued at its turn's end) and says `quiescent` once none is left.
//!
//! The check runs where activity ends: after a turn that starts no follow-up, after a
//! decided start is given up, and after a task leaves the running set (its notice is queued
//! by then, and a notice to an idle parent has started its turn). It holds the session's
//! state lock while it emits, so no turn can be admitted between the look and the event:
//! `quiescent` is never followed by a turn nobody asked for.

use keel_protocol::SessionEventBody;

use crate::runtime::{Admission, Runtime, Slot};

impl Runtime {
    /// Tells `slot`'s subscribers that it is at rest, when it is.
    pub(crate) fn check_quiet(&self, slot: &Slot) {
        // A task starts only inside a turn of its parent, so with no turn admitted this
        // cannot change before the state lock is taken.
        let tasks_running = self.inner.tasks.any_live_for(&slot.id);
        let state = slot.lock();
        let at_rest =
            matches!(state.admission, Admission::Idle) && state.starting == 0 && !tasks_running;
        if at_rest {
            slot.emit(SessionEventBody::Quiescent {
                queued: state.queue.len(),
                background_commands: state.services.env.background.running(),
            });
            drop(state);
            slot.activity.send_modify(|n| *n += 1);
        }
    }

    /// Checks the session `id` when it is open here.
    pub(crate) fn check_quiet_of(&self, id: &keel_protocol::SessionId) {
        if let Ok(slot) = self.slot(id) {
            self.check_quiet(&slot);
        }
    }
}

impl Slot {
    /// Records that a decided turn was admitted (or given up).
    pub(crate) fn start_settled(&self) {
        {
            let mut state = self.lock();
            state.starting = state.starting.saturating_sub(1);
        }
        self.activity.send_modify(|n| *n += 1);
    }

    /// Waits until no turn of this session runs and none is on its way.
    pub(crate) async fn at_rest(&self) {
        loop {
            let mut activity = self.activity.subscribe();
            if let Some(turn) = self.running() {
                turn.ended().await;
                continue;
            }
            let pending = {
                let state = self.lock();
                !matches!(state.admission, Admission::Idle) || state.starting > 0
            };
            if !pending {
                return;
            }
            if activity.changed().await.is_err() {
                return;
            }
        }
    }
}
