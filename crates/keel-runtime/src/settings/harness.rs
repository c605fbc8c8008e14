//! Configuration of keel's own extensions (DESIGN §4, §7, §9, §12): which models get no
//! optional reminders, the runaway guard, source references and the tool-output budget.
//!
//! An untrusted project file may set none of these: each could hide a reminder, silence the
//! guard or let a tool flood the context, so they are the user's to choose.

use serde::Deserialize;

use super::config::LimitError;

/// Reminder threshold of the runaway guard (DESIGN §7); a lower configured value is raised
/// to it.
pub const GUARD_MIN_THRESHOLD: u32 = 3;

/// `runaway_guard: {enabled, threshold}`.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize, schemars::JsonSchema,
)]
#[serde(deny_unknown_fields)]
pub struct RunawayGuardConfig {
    /// Whether the guard watches turns at all.
    #[serde(default = "yes")]
    pub enabled: bool,
    /// Consecutive repeats before the guard reminds (never below 3).
    #[serde(default = "min_threshold")]
    pub threshold: u32,
}

impl Default for RunawayGuardConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            threshold: GUARD_MIN_THRESHOLD,
        }
    }
}

impl RunawayGuardConfig {
    /// The threshold in force: the configured one, raised to the minimum.
    pub fn effective_threshold(&self) -> u32 {
        self.threshold.max(GUARD_MIN_THRESHOLD)
    }
}

fn yes() -> bool {
    true
}

fn min_threshold() -> u32 {
    GUARD_MIN_THRESHOLD
}

/// `output_budget: {inline_kib, head_kib, tail_kib, artifact_max_mib, artifacts_quota_mib}`.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize, schemars::JsonSchema,
)]
#[serde(deny_unknown_fields)]
pub struct OutputBudgetConfig {
    /// A tool result larger than this is archived (KiB).
    #[serde(default = "inline_kib")]
    pub inline_kib: u32,
    /// What the model sees of an archived result's beginning (KiB).
    #[serde(default = "preview_kib")]
    pub head_kib: u32,
    /// What the model sees of its end (KiB).
    #[serde(default = "preview_kib")]
    pub tail_kib: u32,
    /// Most of one output kept in its artifact (MiB); the receipt says when it was cut.
    #[serde(default = "artifact_max_mib")]
    pub artifact_max_mib: u32,
    /// Most a session's artifacts hold together (MiB); past it outputs are not saved, and
    /// the model is told why.
    #[serde(default = "artifacts_quota_mib")]
    pub artifacts_quota_mib: u32,
}

impl Default for OutputBudgetConfig {
    fn default() -> Self {
        Self {
            inline_kib: inline_kib(),
            head_kib: preview_kib(),
            tail_kib: preview_kib(),
            artifact_max_mib: artifact_max_mib(),
            artifacts_quota_mib: artifacts_quota_mib(),
        }
    }
}

fn inline_kib() -> u32 {
    64
}

fn preview_kib() -> u32 {
    16
}

fn artifact_max_mib() -> u32 {
    1024
}

fn artifacts_quota_mib() -> u32 {
    2048
}

impl OutputBudgetConfig {
    /// The limits in bytes, checked: the preview must fit in the inline size, and none may
    /// be zero.
    pub fn limits(&self) -> Result<keel_tools::OutputLimits, LimitError> {
        let kib = |v: u32| {
            usize::try_from(v)
                .unwrap_or(usize::MAX)
                .saturating_mul(1024)
        };
        let limits = keel_tools::OutputLimits {
            inline: kib(self.inline_kib),
            head: kib(self.head_kib),
            tail: kib(self.tail_kib),
            max_artifact: u64::from(self.artifact_max_mib).saturating_mul(1024 * 1024),
            quota: u64::from(self.artifacts_quota_mib).saturating_mul(1024 * 1024),
        };
        if limits.inline == 0 || limits.max_artifact == 0 || limits.quota == 0 {
            return Err(LimitError::new(
                "output_budget",
                "inline_kib, artifact_max_mib and artifacts_quota_mib must be above 0",
            ));
        }
        if limits.head.saturating_add(limits.tail) > limits.inline {
            return Err(LimitError::new(
                "output_budget",
                format!(
                    "head_kib + tail_kib ({} KiB) must not exceed inline_kib ({} KiB)",
                    u64::from(self.head_kib) + u64::from(self.tail_kib),
                    self.inline_kib
                ),
            ));
        }
        Ok(limits)
    }
}

/// `context: {…}`: context management (DESIGN §12).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize, schemars::JsonSchema,
)]
#[serde(deny_unknown_fields)]
pub struct ContextConfig {
    /// Whether keel archives and compacts on its own (manual compaction always works).
    #[serde(default = "yes")]
    pub auto_compact: bool,
    /// Reserve R of the budget (tokens); unset: an eighth of the window, at most 16,384.
    #[serde(default)]
    pub reserve_tokens: Option<u64>,
    /// Safety margin S of the budget (tokens); unset: a sixty-fourth of the window, at most
    /// 2,048.
    #[serde(default)]
    pub safety_tokens: Option<u64>,
    /// Largest request body in bytes; default the provider API's documented limit.
    #[serde(default)]
    pub max_request_bytes: Option<u64>,
    /// Genuine user messages kept verbatim after a compaction, newest first (tokens).
    #[serde(default = "user_tokens")]
    pub user_message_tokens: u64,
    /// Tool output kept inline outside the protected rounds once archiving starts (KiB).
    #[serde(default = "archive_inline")]
    pub archive_inline_kib: u64,
    /// Unprotected tool output that starts archiving (KiB).
    #[serde(default = "archive_water_mark")]
    pub archive_water_mark_kib: u64,
    /// Least saving worth archiving at the water mark (KiB).
    #[serde(default = "archive_water_mark")]
    pub archive_min_saving_kib: u64,
    /// Smallest output worth archiving (KiB).
    #[serde(default = "archive_min_candidate")]
    pub archive_min_candidate_kib: u64,
    /// Most recent tool rounds never archived.
    #[serde(default = "protected_rounds")]
    pub protected_rounds: usize,
}

impl Default for ContextConfig {
    fn default() -> Self {
        Self {
            auto_compact: true,
            reserve_tokens: None,
            safety_tokens: None,
            max_request_bytes: None,
            user_message_tokens: user_tokens(),
            archive_inline_kib: archive_inline(),
            archive_water_mark_kib: archive_water_mark(),
            archive_min_saving_kib: archive_water_mark(),
            archive_min_candidate_kib: archive_min_candidate(),
            protected_rounds: protected_rounds(),
        }
    }
}

fn user_tokens() -> u64 {
    20_000
}

fn archive_inline() -> u64 {
    64
}

fn archive_water_mark() -> u64 {
    256
}

fn archive_min_candidate() -> u64 {
    2
}

fn protected_rounds() -> usize {
    5
}

/// Whether `model` (`provider/model`) matches one of `patterns`: a pattern names a whole
/// `provider/model`, or a model id alone, and `*` stands for any run of characters.
pub fn model_matches(patterns: &[String], model: &str) -> bool {
    let id = model.split_once('/').map_or(model, |(_, id)| id);
    patterns.iter().any(|pattern| {
        wildcard(pattern, model) || (!pattern.contains('/') && wildcard(pattern, id))
    })
}

/// `*`-only glob matching, linear in the text for each star.
fn wildcard(pattern: &str, text: &str) -> bool {
    let parts: Vec<&str> = pattern.split('*').collect();
    if parts.len() == 1 {
        return pattern == text;
    }
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if !text.starts_with(first) || text.len() < first.len() + last.len() {
        return false;
    }
    let mut rest = &text[first.len()..];
    for middle in &parts[1..parts.len() - 1] {
        match rest.find(middle) {
            Some(at) => rest = &rest[at + middle.len()..],
            None => return false,
        }
    }
    rest.ends_with(last)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn models_match_by_full_name_id_or_wildcard() {
        let patterns = vec![
            "openai/gpt-4o".to_owned(),
            "*-mini".to_owned(),
            "mock/*".to_owned(),
        ];
        assert!(model_matches(&patterns, "openai/gpt-4o"));
        assert!(model_matches(&patterns, "openai/o4-mini"));
        assert!(model_matches(&patterns, "mock/anything"));
        assert!(!model_matches(&patterns, "anthropic/gpt-4o"));
        assert!(!model_matches(&patterns, "openai/gpt-4o-2"));
        assert!(model_matches(&["gpt-4o".to_owned()], "openai/gpt-4o"));
        assert!(!model_matches(&[], "openai/gpt-4o"));
        assert!(wildcard("a*b*c", "aXbYc"));
        assert!(!wildcard("a*b*c", "aXcYb"));
        assert!(!wildcard("ab*ba", "aba"));
    }

    #[test]
    fn the_guard_threshold_never_goes_below_three() {
        let guard = RunawayGuardConfig {
            enabled: true,
            threshold: 1,
        };
        assert_eq!(guard.effective_threshold(), 3);
        let guard = RunawayGuardConfig {
            enabled: true,
            threshold: 5,
        };
        assert_eq!(guard.effective_threshold(), 5);
    }

    #[test]
    fn budget_limits_are_checked() {
        assert_eq!(
            OutputBudgetConfig::default().limits().unwrap(),
            keel_tools::OutputLimits {
                inline: 64 * 1024,
                head: 16 * 1024,
                tail: 16 * 1024,
                max_artifact: 1024 * 1024 * 1024,
                quota: 2 * 1024 * 1024 * 1024,
            }
        );
        let too_big = OutputBudgetConfig {
            head_kib: 60,
            ..OutputBudgetConfig::default()
        };
        assert!(
            too_big
                .limits()
                .unwrap_err()
                .rule
                .contains("head_kib + tail_kib")
        );
    }
}
