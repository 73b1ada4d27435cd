//! What a person operating the pool sees and does, in Execution
//! Continuity's terms (seed §17.1): the daemon's dashboard, and (protocol
//! v3) the extension's popup and overlay, read one [`View`] and send one
//! [`Act`]. Raw ids travel so a control can name its worker; the surfaces
//! show paths, states and words.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::RunState;

/// A worker's state as a person reads it (seed §17.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Its conversation is being opened.
    Starting,
    /// ChatGPT is working on its turn, or it is between turns with nothing held.
    Working,
    /// Another execution attempt is scheduled or being submitted.
    Resuming,
    /// A person must act: its own question, or something in its conversation.
    NeedsYou,
    /// Another worker, a deploy or root's answer must come first.
    Waiting,
    /// Unfinished, and no automatic turn starts.
    Paused,
    /// No progress across its resumes: the guard paused it.
    Stalled,
    /// Finished its objective.
    Complete,
    /// Failed.
    Failed,
    /// Stopped by root or a person.
    Stopped,
}

impl Status {
    /// The words a person reads (never colour alone, §17.6).
    pub fn label(self) -> &'static str {
        match self {
            Status::Starting => "Starting",
            Status::Working => "Working",
            Status::Resuming => "Resuming",
            Status::NeedsYou => "Needs you",
            Status::Waiting => "Waiting for dependency",
            Status::Paused => "Paused",
            Status::Stalled => "Stalled",
            Status::Complete => "Complete",
            Status::Failed => "Failed",
            Status::Stopped => "Stopped",
        }
    }

    /// Whether the worker has finished for good.
    pub fn is_final(self) -> bool {
        matches!(self, Status::Complete | Status::Failed | Status::Stopped)
    }
}

/// A worker's question to a person (`worker_await_human`, seed §14.1).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Ask {
    /// Answers it offers, if any (a person may still write another).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub choices: Vec<String>,
    /// What a person needs to know to answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<String>,
}

/// Most choices one question offers.
pub const CHOICES_MAX: usize = 8;
/// Most bytes of one choice.
pub const CHOICE_MAX: usize = 200;
/// Most bytes of a question's context.
pub const CONTEXT_MAX: usize = 4096;

impl Ask {
    /// Checks the bounds; the error names the field.
    pub fn check(&self) -> Result<(), String> {
        if self.choices.len() > CHOICES_MAX {
            return Err(format!("choices: at most {CHOICES_MAX}"));
        }
        if let Some(c) = self.choices.iter().find(|c| c.trim().is_empty() || c.len() > CHOICE_MAX) {
            return Err(format!("choices: each 1-{CHOICE_MAX} bytes, not blank ({} bytes)", c.len()));
        }
        if self.context.as_ref().is_some_and(|c| c.len() > CONTEXT_MAX) {
            return Err(format!("context: at most {CONTEXT_MAX} bytes"));
        }
        Ok(())
    }
}

/// One worker on an operator surface.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Worker {
    /// Its id (for controls; not shown).
    pub worker_id: String,
    /// Its path in the run (`/root/backend`): its name for a person.
    pub path: String,
    /// Its state.
    pub status: Status,
    /// Why, in words (its question, when it asked a person).
    pub why: String,
    /// Since when it has been in this state (ms since the Unix epoch).
    pub since_ms: u64,
    /// Its execution attempts so far (the bootstrap is not one).
    pub attempt: u32,
    /// Of those, how many Auto Resume started.
    pub auto_resumes: u32,
    /// Whether Auto Resume is on for it.
    pub auto_resume: bool,
    /// Whether something holds its turns (its control is Resume, not Pause).
    pub held: bool,
    /// Whether a person's answer releases it (its question to a person, or
    /// to root); never ChatGPT's tool-approval card, which only a click in
    /// ChatGPT answers.
    pub answerable: bool,
    /// The choices and context of its question, when it asked one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ask: Option<Ask>,
    /// Whether it is the run's root.
    pub root: bool,
    /// Its conversation's address, once bound (`https://chatgpt.com/…` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conversation_url: Option<String>,
    /// The executor holding it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub executor_id: Option<String>,
    /// Its last Execution Continuity events, newest last (at most 5).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub recent: Vec<Recent>,
    /// The model it is pinned to, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// How many times it rolled over to a fresh conversation.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub epoch: u32,
    /// Its context meter: bytes its conversation carried, as the orchestrator saw them.
    #[serde(default)]
    pub context_bytes: u64,
    /// Its tab is parked: closed to keep within the tab capacity, reopened
    /// on its exact conversation before its next prompt.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub parked: bool,
}

/// One Execution Continuity event of a worker, as a surface lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Recent {
    /// The event's type (`execution.scheduled`, `worker.hold_changed`, …).
    pub kind: String,
    /// When (ms since the Unix epoch).
    pub at_ms: u64,
}

impl Recent {
    /// The event in a person's words.
    pub fn words(&self) -> &str {
        match self.kind.as_str() {
            "execution.scheduled" => "a turn was scheduled",
            "continuation.requested" => "a turn was asked for",
            "worker.hold_changed" => "its hold changed",
            "continuation.stalled" => "no progress across its resumes",
            "continuation.turn_stalled" => "a turn ran long with no progress",
            "continuation.rate_limited" => "ChatGPT said too many requests",
            "continuation.policy_changed" => "its Auto Resume policy changed",
            other => other,
        }
    }
}

impl Worker {
    /// "Attempt 3 · 2 auto resumes"; empty before the first attempt.
    pub fn attempts_label(&self) -> String {
        match (self.attempt, self.auto_resumes) {
            (0, _) => String::new(),
            (n, 0) => format!("Attempt {n}"),
            (n, 1) => format!("Attempt {n} · 1 auto resume"),
            (n, a) => format!("Attempt {n} · {a} auto resumes"),
        }
    }

    /// Its conversation in words: "Model o3 · Conversation 3 (rolled over) ·
    /// Context 12 KB · Tab parked"; what is not set is left out.
    pub fn conversation_label(&self) -> String {
        let mut parts = Vec::new();
        if let Some(model) = &self.model {
            parts.push(format!("Model {model}"));
        }
        if self.epoch > 0 {
            parts.push(format!("Conversation {} (rolled over)", self.epoch + 1));
        }
        if self.context_bytes >= 1024 {
            parts.push(format!("Context {} KB", self.context_bytes / 1024));
        }
        if self.parked {
            parts.push("Tab parked".into());
        }
        parts.join(" · ")
    }
}

/// A run on an operator surface.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Run {
    /// The run (for controls).
    pub run_id: String,
    /// Its title.
    pub title: String,
    /// Its state.
    pub state: RunState,
    /// Its workers, root first.
    pub workers: Vec<Worker>,
}

/// What an operator surface shows: the newest runs.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct View {
    /// When the daemon made it (ms since the Unix epoch).
    pub at_ms: u64,
    /// The newest runs, newest first.
    pub runs: Vec<Run>,
    /// Older runs left out to keep the view within its bound.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub omitted_runs: u32,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// A person's control (seed §15, §17.5). Pause, Continue now and Stop are
/// distinct: Pause lets the current turn finish and starts no next one;
/// Continue now asks for exactly one turn; Stop ends the worker, not the
/// generation in its tab.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    /// Hold a worker's automatic turns.
    Pause,
    /// Release a worker's hold.
    Resume,
    /// One turn now.
    Continue,
    /// End the worker.
    Stop,
    /// Answer its question (`text`).
    Answer,
    /// Turn Auto Resume on for it.
    AutoResumeOn,
    /// Turn Auto Resume off for it.
    AutoResumeOff,
    /// Move it to a fresh conversation (it checkpoints first; its full one
    /// is retired, left open): as root's `worker_rollover`.
    Rollover,
    /// Pause every unfinished worker of a run but root, after their current turns.
    PauseAll,
    /// Release every paused or stalled worker of a run.
    ResumeAll,
    /// Cancel a run.
    StopRun,
}

impl Action {
    /// Its wire name (`pause`, `auto_resume_on`, `stop_run`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Pause => "pause",
            Action::Resume => "resume",
            Action::Continue => "continue",
            Action::Stop => "stop",
            Action::Answer => "answer",
            Action::AutoResumeOn => "auto_resume_on",
            Action::AutoResumeOff => "auto_resume_off",
            Action::Rollover => "rollover",
            Action::PauseAll => "pause_all",
            Action::ResumeAll => "resume_all",
            Action::StopRun => "stop_run",
        }
    }

    /// Whether it names a run (else a worker).
    pub fn is_run_level(self) -> bool {
        matches!(self, Action::PauseAll | Action::ResumeAll | Action::StopRun)
    }
}

/// Most bytes of a person's answer.
pub const ANSWER_MAX: usize = 16 * 1024;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_actions_name_is_its_wire_name() {
        let all = [
            Action::Pause,
            Action::Resume,
            Action::Continue,
            Action::Stop,
            Action::Answer,
            Action::AutoResumeOn,
            Action::AutoResumeOff,
            Action::Rollover,
            Action::PauseAll,
            Action::ResumeAll,
            Action::StopRun,
        ];
        for action in all {
            assert_eq!(serde_json::to_value(action).unwrap(), action.as_str());
        }
    }
}
