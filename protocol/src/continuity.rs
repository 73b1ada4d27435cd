//! Execution Continuity vocabulary (`execution-continuity-SPEC.md` §7): the
//! policy that says whether and how an unfinished worker is given another
//! ChatGPT turn, the execution attempts that carry its work across turns,
//! and the wakes that asked for one. A ChatGPT turn ending is not the worker
//! finishing: only `worker_complete`, `worker_fail` or an explicit hold is.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Whether an unfinished worker is resumed on its own (`manual` by default).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema, Default)]
#[serde(rename_all = "snake_case")]
pub enum ContinuationMode {
    /// Only an explicit `worker_continue_now` (or follow-up) starts a turn
    /// (seed §25: workers of runs that did not opt in).
    #[default]
    Manual,
    /// Auto Resume: an idle conversation of a runnable worker gets a fresh
    /// resume turn, and an active one a checkpoint every 20–21 minutes.
    Auto,
}

/// How a worker is continued (durations in ms; 0 turns a stall threshold
/// off). A run's default is inherited by workers spawned after it is set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct ContinuationPolicy {
    /// `auto` resumes an unfinished worker when its turn ends.
    pub mode: ContinuationMode,
    /// Idle this long before a resume (default 3000).
    pub idle_grace_ms: u64,
    /// Checkpoint an active worker this long after its last submission (default 20 min)…
    pub active_keepalive_min_ms: u64,
    /// …at the latest this long (default 21 min).
    pub active_keepalive_max_ms: u64,
    /// Least time between two non-idle continuations (default 15 min).
    pub min_continuation_spacing_ms: u64,
    /// An idle conversation may be resumed inside that spacing (default true).
    pub idle_may_bypass_min_spacing: bool,
    /// Warn after this many attempts without progress (default 10).
    pub stall_warning_after_no_progress_attempts: u32,
    /// Pause after this many (default 20).
    pub stall_pause_after_no_progress_attempts: u32,
    /// Warn after this long without progress (default 30 min).
    pub stall_warning_after_no_progress_ms: u64,
    /// Pause after this long (default 60 min).
    pub stall_pause_after_no_progress_ms: u64,
}

const MINUTE: u64 = 60_000;

impl Default for ContinuationPolicy {
    /// The seed's recommended defaults (§7.1), in manual mode.
    fn default() -> Self {
        Self {
            mode: ContinuationMode::Manual,
            idle_grace_ms: 3_000,
            active_keepalive_min_ms: 20 * MINUTE,
            active_keepalive_max_ms: 21 * MINUTE,
            min_continuation_spacing_ms: 15 * MINUTE,
            idle_may_bypass_min_spacing: true,
            stall_warning_after_no_progress_attempts: 10,
            stall_pause_after_no_progress_attempts: 20,
            stall_warning_after_no_progress_ms: 30 * MINUTE,
            stall_pause_after_no_progress_ms: 60 * MINUTE,
        }
    }
}

/// Why a [`ContinuationPolicy`] was refused; nothing of it was applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PolicyRefusal {
    /// A duration or count outside its bounds.
    OutOfRange {
        /// The field.
        field: &'static str,
        /// Smallest accepted value.
        min: u64,
        /// Largest accepted value.
        max: u64,
        /// What was given.
        got: u64,
    },
    /// Two fields that must be ordered are not.
    Unordered {
        /// The field that must be the smaller.
        low: &'static str,
        /// The field that must be the larger.
        high: &'static str,
    },
}

impl std::fmt::Display for PolicyRefusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::OutOfRange { field, min, max, got } => {
                write!(f, "{field} must be between {min} and {max}, got {got}")
            }
            Self::Unordered { low, high } => write!(f, "{low} must not exceed {high}"),
        }
    }
}

impl std::error::Error for PolicyRefusal {}

impl ContinuationPolicy {
    /// Bounds: the grace at most 10 minutes; the keepalive window within
    /// 1 minute to 24 hours and ordered; the floor at least 1 minute (so no
    /// policy turns continuation into a tight loop) and at most 24 hours;
    /// stall thresholds off (0) or at most 10,000 attempts and between
    /// 1 minute and 30 days, each warning no later than its pause.
    pub fn check(&self) -> Result<(), PolicyRefusal> {
        const DAY: u64 = 24 * 60 * MINUTE;
        let range = |field, got: u64, min, max| {
            if (min..=max).contains(&got) { Ok(()) } else { Err(PolicyRefusal::OutOfRange { field, min, max, got }) }
        };
        range("idle_grace_ms", self.idle_grace_ms, 0, 10 * MINUTE)?;
        range("active_keepalive_min_ms", self.active_keepalive_min_ms, MINUTE, DAY)?;
        range("active_keepalive_max_ms", self.active_keepalive_max_ms, MINUTE, DAY)?;
        range("min_continuation_spacing_ms", self.min_continuation_spacing_ms, MINUTE, DAY)?;
        let ordered = |low, high, l: Option<u64>, h: Option<u64>| match (l, h) {
            (Some(l), Some(h)) if l > h => Err(PolicyRefusal::Unordered { low, high }),
            _ => Ok(()),
        };
        ordered(
            "active_keepalive_min_ms",
            "active_keepalive_max_ms",
            Some(self.active_keepalive_min_ms),
            Some(self.active_keepalive_max_ms),
        )?;
        range(
            "stall_warning_after_no_progress_attempts",
            self.stall_warning_after_no_progress_attempts.into(),
            0,
            10_000,
        )?;
        range("stall_pause_after_no_progress_attempts", self.stall_pause_after_no_progress_attempts.into(), 0, 10_000)?;
        for (field, value) in [
            ("stall_warning_after_no_progress_ms", self.stall_warning_after_no_progress_ms),
            ("stall_pause_after_no_progress_ms", self.stall_pause_after_no_progress_ms),
        ] {
            if value != 0 {
                range(field, value, MINUTE, 30 * DAY)?;
            }
        }
        ordered(
            "stall_warning_after_no_progress_attempts",
            "stall_pause_after_no_progress_attempts",
            threshold(self.stall_warning_after_no_progress_attempts.into()),
            threshold(self.stall_pause_after_no_progress_attempts.into()),
        )?;
        ordered(
            "stall_warning_after_no_progress_ms",
            "stall_pause_after_no_progress_ms",
            threshold(self.stall_warning_after_no_progress_ms),
            threshold(self.stall_pause_after_no_progress_ms),
        )
    }
}

/// A stall threshold that is set: 0 means never.
pub fn threshold(value: u64) -> Option<u64> {
    (value != 0).then_some(value)
}

/// An explicit hold on a worker's automatic turns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Hold {
    /// `worker_await_human`: a person must act ("Needs you").
    AwaitingHuman,
    /// `worker_await_dependency`: another worker, CI or a deploy must change first.
    AwaitingDependency,
    /// `worker_pause` by root or the operator: the current turn may finish, no next one starts.
    Paused,
    /// The stall guard paused it: too many attempts, or too long, without progress.
    Stalled,
}

/// A turn that does not end: what the daemon saw.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum TurnStall {
    /// The page has been generating past the bound with no durable progress
    /// from the worker meanwhile.
    GeneratingWithoutProgress,
    /// A prompt went in and the page never showed its turn generating.
    NeverStarted,
}

/// How far the stall guard has gone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum StallLevel {
    /// Past a warning threshold: surfaced, resumes go on.
    Warning,
    /// Past a pause threshold: resumes are held until `worker_resume`.
    Paused,
}

/// What started an execution attempt: `initial` (the bootstrap), `auto_resume`,
/// `manual_resume` (`worker_continue_now`), `followup`, `recovery`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum AttemptReason {
    /// The worker's bootstrap.
    Initial,
    /// Auto Resume (an idle, keepalive or event wake).
    AutoResume,
    /// `worker_continue_now` by root or the operator.
    ManualResume,
    /// `worker_followup`: new instructions.
    Followup,
    /// A recovery action (a fresh `continue` after a delivery timeout).
    Recovery,
}

/// Where an execution attempt is. `scheduled → submitted → generating →
/// idle`, then one of the endings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum AttemptState {
    /// Decided; its command is queued or about to be.
    Scheduled,
    /// The executor submitted its prompt.
    Submitted,
    /// ChatGPT is generating the turn.
    Generating,
    /// The turn ended; the worker is still unfinished.
    Idle,
    /// The worker completed during (or at the end of) this attempt.
    Completed,
    /// The worker was held (human, dependency, pause) during this attempt.
    Blocked,
    /// The attempt's submission failed (its `error` says how).
    Failed,
    /// Withdrawn before submission (the worker ended or was held meanwhile).
    Cancelled,
}

impl AttemptState {
    /// Whether the attempt is over.
    pub fn is_final(self) -> bool {
        matches!(self, Self::Idle | Self::Completed | Self::Blocked | Self::Failed | Self::Cancelled)
    }
}

/// One reason a continuation was asked for. Several coalesce into one
/// delivery; the attempt keeps them all (its provenance).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "class", rename_all = "snake_case")]
pub enum Wake {
    /// The conversation went idle while the worker is unfinished.
    Idle,
    /// The active keepalive fell due (a checkpoint, even mid-generation).
    ActiveKeepalive,
    /// A durable event concerning the worker (a message, an answer, a
    /// dependency that completed).
    Event {
        /// The event's type, for example `message.sent`.
        kind: String,
    },
    /// Root or the operator asked for a turn now (`worker_continue_now`).
    Operator,
    /// Root's material corrective steering: not held by the spacing floor.
    Steering,
    /// The turn ended on ChatGPT's "Message delivery timed out": a fresh
    /// `continue` as a new user turn (its Retry button is never clicked).
    Recovery,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_defaults_pass_and_each_bound_is_refused_by_name() {
        let ok = ContinuationPolicy::default();
        assert_eq!(ok.check(), Ok(()));
        let refused = |p: ContinuationPolicy| p.check().unwrap_err().to_string();
        assert!(
            refused(ContinuationPolicy { min_continuation_spacing_ms: 0, ..ok })
                .starts_with("min_continuation_spacing_ms")
        );
        assert!(refused(ContinuationPolicy { idle_grace_ms: 11 * MINUTE, ..ok }).starts_with("idle_grace_ms"));
        assert_eq!(
            refused(ContinuationPolicy { active_keepalive_min_ms: 22 * MINUTE, ..ok }),
            "active_keepalive_min_ms must not exceed active_keepalive_max_ms"
        );
        assert!(
            refused(ContinuationPolicy { stall_pause_after_no_progress_ms: 1, ..ok })
                .starts_with("stall_pause_after_no_progress_ms")
        );
        assert!(
            refused(ContinuationPolicy { stall_warning_after_no_progress_attempts: 30, ..ok })
                .contains("must not exceed")
        );
        assert_eq!(
            ContinuationPolicy {
                stall_pause_after_no_progress_ms: 0,
                stall_warning_after_no_progress_attempts: 30,
                stall_pause_after_no_progress_attempts: 0,
                ..ok
            }
            .check(),
            Ok(())
        );
    }

    #[test]
    fn a_partial_policy_takes_the_defaults_and_wakes_name_their_class() {
        let p: ContinuationPolicy = serde_json::from_str(r#"{"mode":"auto","idle_grace_ms":0}"#).unwrap();
        assert_eq!(p, ContinuationPolicy { mode: ContinuationMode::Auto, idle_grace_ms: 0, ..Default::default() });
        let wake = serde_json::to_value(Wake::Event { kind: "message.sent".into() }).unwrap();
        assert_eq!(wake, serde_json::json!({"class": "event", "kind": "message.sent"}));
    }
}
