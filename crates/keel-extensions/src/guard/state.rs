//! Counting (DESIGN §7, steps 2–4): which signals a step raises and how far each has run,
//! and when the guard observes or reminds. Pure state, no I/O: the extension feeds it live
//! steps, `keel debug replay-guard` stored ones.
//!
//! A key seen in consecutive steps adds to its count and the first step without it sets it
//! back. Progress is the exception: a failing action is followed wherever it recurs, since
//! a loop of edit, test, same failure is the case it exists for, and a success clears it.

use std::collections::{HashMap, HashSet};

use super::fingerprint::{CallPrint, Kind, Print, short};

/// The six signals.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Signal {
    /// The same action, step after step.
    RepeatedAction,
    /// The same result, step after step.
    RepeatedResult,
    /// Errors of the same family, step after step.
    SameErrorFamily,
    /// Two batches taking turns (ABAB).
    Alternation,
    /// Polling that sees nothing change.
    PollingWithoutChange,
    /// A failing action that keeps failing the same way.
    NoProgress,
}

impl Signal {
    /// Every signal.
    pub const ALL: [Self; 6] = [
        Self::RepeatedAction,
        Self::RepeatedResult,
        Self::SameErrorFamily,
        Self::Alternation,
        Self::PollingWithoutChange,
        Self::NoProgress,
    ];

    /// The signal's name in events and output.
    pub fn name(self) -> &'static str {
        match self {
            Self::RepeatedAction => "repeated_action",
            Self::RepeatedResult => "repeated_result",
            Self::SameErrorFamily => "same_error_family",
            Self::Alternation => "alternation",
            Self::PollingWithoutChange => "polling_without_change",
            Self::NoProgress => "no_progress",
        }
    }

    /// Signals that may remind, highest priority first; a repeated result alone (the same
    /// "ok" from different calls) is only observed.
    pub const REMINDING: [Self; 5] = [
        Self::NoProgress,
        Self::SameErrorFamily,
        Self::RepeatedAction,
        Self::Alternation,
        Self::PollingWithoutChange,
    ];
}

/// A signal's count after a step, with the fingerprint prefix of the key that carries it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Count {
    /// The signal.
    pub signal: Signal,
    /// How far it has run.
    pub count: u32,
    /// The first bytes of the key's fingerprint, as hex (never the key's content).
    pub key: String,
}

/// What the guard makes of one step.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct Verdict {
    /// Every signal above 1, in [`Signal::ALL`] order.
    pub counts: Vec<Count>,
    /// Signals that reached 2 with this step: worth an observation event.
    pub observed: Vec<Count>,
    /// The signal to remind of, when one reached the threshold and the turn has had no
    /// reminder yet.
    pub remind: Option<Count>,
}

/// Counts per key, kept from one step to the next.
#[derive(Debug, Default)]
struct Runs(HashMap<Print, u32>);

impl Runs {
    /// Advances with the keys of a step; returns the longest run and its key.
    fn step(&mut self, keys: impl IntoIterator<Item = Print>) -> Option<(u32, Print)> {
        let mut next = HashMap::new();
        for key in keys.into_iter().collect::<HashSet<_>>() {
            let count = self.0.get(&key).map_or(1, |c| c + 1);
            next.insert(key, count);
        }
        self.0 = next;
        self.0
            .iter()
            .max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(a.0)))
            .map(|(k, c)| (*c, *k))
    }
}

/// The guard's memory of one turn.
#[derive(Debug)]
pub struct GuardState {
    threshold: u32,
    actions: Runs,
    results: Runs,
    errors: Runs,
    polls: Runs,
    /// Failing actions: what they last showed and how often in a row.
    progress: HashMap<Print, (Print, u32)>,
    /// Action batches of the last steps, newest last.
    batches: Vec<Print>,
    alternation: u32,
    reminded: bool,
    /// Signals at 2 or more in the previous step (an observation is made once per run).
    above: HashSet<Signal>,
}

impl GuardState {
    /// A fresh turn with the reminder threshold `threshold` (at least 3).
    pub fn new(threshold: u32) -> Self {
        Self {
            threshold: threshold.max(keel_runtime::settings::harness::GUARD_MIN_THRESHOLD),
            actions: Runs::default(),
            results: Runs::default(),
            errors: Runs::default(),
            polls: Runs::default(),
            progress: HashMap::new(),
            batches: Vec::new(),
            alternation: 0,
            reminded: false,
            above: HashSet::new(),
        }
    }

    /// Whether the turn already had its reminder.
    pub fn reminded(&self) -> bool {
        self.reminded
    }

    /// Takes one step's calls (in call order) and says what they raise. `batch` is the
    /// fingerprint of the step's actions together.
    pub fn step(&mut self, calls: &[CallPrint], batch: Print) -> Verdict {
        let mut counts: Vec<Count> = Vec::new();
        let mut put = |signal: Signal, found: Option<(u32, Print)>| {
            if let Some((count, key)) = found.filter(|(c, _)| *c >= 2) {
                counts.push(Count {
                    signal,
                    count,
                    key: short(&key),
                });
            }
        };
        // Polls are judged by whether what they see changes, searches that find nothing
        // not at all: only plain calls repeat as actions.
        put(
            Signal::RepeatedAction,
            self.actions.step(
                calls
                    .iter()
                    .filter(|c| c.kind == Kind::Plain)
                    .map(|c| c.action),
            ),
        );
        put(
            Signal::RepeatedResult,
            self.results.step(calls.iter().filter_map(|c| c.result)),
        );
        put(
            Signal::SameErrorFamily,
            self.errors.step(calls.iter().filter_map(|c| c.error)),
        );
        put(Signal::Alternation, self.alternate(batch));
        put(
            Signal::PollingWithoutChange,
            self.polls.step(
                calls
                    .iter()
                    .filter(|c| c.kind == Kind::Poll)
                    .filter_map(|c| c.progress.map(|(about, seen)| mix(about, seen))),
            ),
        );
        put(Signal::NoProgress, self.advance_progress(calls));
        counts.sort_by_key(|c| Signal::ALL.iter().position(|s| *s == c.signal));
        let now: HashSet<Signal> = counts.iter().map(|c| c.signal).collect();
        let observed = counts
            .iter()
            .filter(|c| c.count == 2 || !self.above.contains(&c.signal))
            .cloned()
            .collect();
        self.above = now;
        let remind = if self.reminded {
            None
        } else {
            Signal::REMINDING.iter().find_map(|signal| {
                counts
                    .iter()
                    .find(|c| c.signal == *signal && c.count >= self.threshold)
                    .cloned()
            })
        };
        if remind.is_some() {
            self.reminded = true;
        }
        Verdict {
            counts,
            observed,
            remind,
        }
    }

    /// ABAB: the length of the alternating run ending at this step, less one (so A B A is
    /// 2 and A B A B is 3).
    fn alternate(&mut self, batch: Print) -> Option<(u32, Print)> {
        self.batches.push(batch);
        if self.batches.len() > 4 {
            self.batches.remove(0);
        }
        let n = self.batches.len();
        let alternating = n >= 3
            && self.batches[n - 1] == self.batches[n - 3]
            && self.batches[n - 1] != self.batches[n - 2];
        self.alternation = if alternating {
            self.alternation.max(1) + 1
        } else {
            0
        };
        (self.alternation >= 2).then_some((self.alternation, batch))
    }

    fn advance_progress(&mut self, calls: &[CallPrint]) -> Option<(u32, Print)> {
        let mut longest: Option<(u32, Print)> = None;
        for call in calls {
            match call.progress {
                Some((about, seen)) if call.kind == Kind::Plain => {
                    let entry = self.progress.entry(about).or_insert((seen, 0));
                    if entry.0 == seen {
                        entry.1 += 1;
                    } else {
                        *entry = (seen, 1);
                    }
                    let count = entry.1;
                    if longest.is_none_or(|(c, _)| count > c) {
                        longest = Some((count, about));
                    }
                }
                // A success of the same action is progress.
                None if call.kind == Kind::Plain => {
                    self.progress.remove(&call.action);
                }
                _ => {}
            }
        }
        longest
    }
}

/// One fingerprint standing for two.
fn mix(a: Print, b: Print) -> Print {
    let mut out = a;
    for (o, x) in out.iter_mut().zip(b) {
        *o ^= x.rotate_left(3);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plain(action: u8, result: u8, error: Option<u8>) -> CallPrint {
        CallPrint {
            action: [action; 32],
            result: Some([result; 32]),
            error: error.map(|e| [e; 32]),
            error_class: None,
            progress: error.map(|_| ([action; 32], [result; 32])),
            kind: Kind::Plain,
        }
    }

    fn signals(verdict: &Verdict) -> Vec<(Signal, u32)> {
        verdict.counts.iter().map(|c| (c.signal, c.count)).collect()
    }

    #[test]
    fn the_same_failing_call_three_times_reminds_once_of_its_error_family() {
        let mut guard = GuardState::new(3);
        let failing = plain(1, 2, Some(3));
        let first = guard.step(std::slice::from_ref(&failing), [1; 32]);
        assert_eq!(first, Verdict::default());
        let second = guard.step(std::slice::from_ref(&failing), [1; 32]);
        assert_eq!(
            signals(&second),
            [
                (Signal::RepeatedAction, 2),
                (Signal::RepeatedResult, 2),
                (Signal::SameErrorFamily, 2),
                (Signal::NoProgress, 2)
            ]
        );
        assert_eq!(second.observed.len(), 4);
        assert_eq!(second.remind, None);
        let third = guard.step(std::slice::from_ref(&failing), [1; 32]);
        assert_eq!(third.remind.map(|c| c.signal), Some(Signal::NoProgress));
        assert!(third.observed.is_empty());
        let fourth = guard.step(std::slice::from_ref(&failing), [1; 32]);
        assert_eq!(fourth.remind, None);
        assert!(guard.reminded());
    }

    #[test]
    fn a_break_sets_counts_back() {
        let mut guard = GuardState::new(3);
        let a = plain(1, 1, None);
        let b = plain(2, 2, None);
        guard.step(std::slice::from_ref(&a), [1; 32]);
        guard.step(std::slice::from_ref(&a), [1; 32]);
        guard.step(std::slice::from_ref(&b), [2; 32]);
        // The repeats of A were broken by B; A B A is only the start of an alternation.
        let verdict = guard.step(std::slice::from_ref(&a), [1; 32]);
        assert_eq!(signals(&verdict), [(Signal::Alternation, 2)]);
    }

    #[test]
    fn abab_alternation_reminds_at_the_fourth_step() {
        let mut guard = GuardState::new(3);
        let a = plain(1, 1, None);
        let b = plain(2, 2, None);
        assert_eq!(guard.step(std::slice::from_ref(&a), [1; 32]).remind, None);
        assert_eq!(guard.step(std::slice::from_ref(&b), [2; 32]).remind, None);
        let third = guard.step(std::slice::from_ref(&a), [1; 32]);
        assert_eq!(signals(&third), [(Signal::Alternation, 2)]);
        let fourth = guard.step(std::slice::from_ref(&b), [2; 32]);
        assert_eq!(
            fourth.remind.map(|c| (c.signal, c.count)),
            Some((Signal::Alternation, 3))
        );
    }

    #[test]
    fn searches_that_find_nothing_raise_nothing() {
        let mut guard = GuardState::new(3);
        for pattern in 1..=3u8 {
            let call = CallPrint {
                action: [pattern; 32],
                result: None,
                error: None,
                error_class: None,
                progress: None,
                kind: Kind::NoMatch,
            };
            assert_eq!(guard.step(&[call], [pattern; 32]), Verdict::default());
        }
    }

    #[test]
    fn polling_that_sees_change_is_no_repeated_action() {
        let mut guard = GuardState::new(3);
        for seen in 1..=4u8 {
            let poll = CallPrint {
                action: [7; 32],
                result: Some([seen; 32]),
                error: None,
                error_class: None,
                progress: Some(([7; 32], [seen; 32])),
                kind: Kind::Poll,
            };
            let verdict = guard.step(&[poll], [7; 32]);
            assert_eq!(signals(&verdict), [], "poll {seen}");
        }
        // The same poll seeing the same thing is polling without change.
        let same = || CallPrint {
            action: [8; 32],
            result: Some([1; 32]),
            error: None,
            error_class: None,
            progress: Some(([8; 32], [1; 32])),
            kind: Kind::Poll,
        };
        guard.step(&[same()], [8; 32]);
        guard.step(&[same()], [8; 32]);
        let third = guard.step(&[same()], [8; 32]);
        assert!(signals(&third).contains(&(Signal::PollingWithoutChange, 3)));
        assert_eq!(
            third.remind.map(|c| c.signal),
            Some(Signal::PollingWithoutChange)
        );
    }

    #[test]
    fn a_threshold_below_three_is_raised_to_three() {
        let mut guard = GuardState::new(1);
        let a = plain(1, 1, None);
        guard.step(std::slice::from_ref(&a), [1; 32]);
        assert_eq!(guard.step(std::slice::from_ref(&a), [1; 32]).remind, None);
        assert!(
            guard
                .step(std::slice::from_ref(&a), [1; 32])
                .remind
                .is_some()
        );
    }

    #[test]
    fn failing_the_same_way_between_other_steps_is_no_progress() {
        let mut guard = GuardState::new(3);
        let test = plain(9, 9, Some(9));
        let edit = |n: u8| plain(n, n, None);
        let mut last = Verdict::default();
        for n in 1..=3u8 {
            last = guard.step(std::slice::from_ref(&test), [9; 32]);
            guard.step(&[edit(n)], [n; 32]);
        }
        assert_eq!(last.remind.map(|c| c.signal), Some(Signal::NoProgress));
    }
}

#[cfg(test)]
mod properties {
    use super::*;
    use proptest::prelude::*;

    fn call(action: u8, result: u8, failed: bool, kind: u8) -> CallPrint {
        let kind = match kind % 3 {
            0 => Kind::Plain,
            1 => Kind::NoMatch,
            _ => Kind::Poll,
        };
        CallPrint {
            action: [action; 32],
            result: (kind != Kind::NoMatch).then_some([result; 32]),
            error: (failed && kind == Kind::Plain).then_some([result ^ 0x55; 32]),
            error_class: None,
            progress: match kind {
                Kind::Poll => Some(([action; 32], [result; 32])),
                Kind::Plain if failed => Some(([action; 32], [result; 32])),
                _ => None,
            },
            kind,
        }
    }

    proptest! {
        /// Whatever the steps, the guard reminds at most once, only for a reminding signal
        /// that reached the threshold, and reports only counts of 2 and more.
        #[test]
        fn at_most_one_reminder_and_only_past_the_threshold(
            threshold in 0u32..6,
            steps in proptest::collection::vec(
                proptest::collection::vec((0u8..3, 0u8..3, any::<bool>(), 0u8..3), 1..4),
                0..30,
            ),
        ) {
            let mut guard = GuardState::new(threshold);
            let mut reminders = 0;
            for step in steps {
                let calls: Vec<CallPrint> =
                    step.iter().map(|(a, r, f, k)| call(*a, *r, *f, *k)).collect();
                let batch = [calls.iter().map(|c| c.action[0]).fold(0u8, |x, y| x.wrapping_mul(7).wrapping_add(y)); 32];
                let verdict = guard.step(&calls, batch);
                prop_assert!(verdict.counts.iter().all(|c| c.count >= 2));
                if let Some(remind) = &verdict.remind {
                    reminders += 1;
                    prop_assert!(remind.count >= threshold.max(3));
                    prop_assert!(Signal::REMINDING.contains(&remind.signal));
                }
            }
            prop_assert!(reminders <= 1);
        }
    }
}
