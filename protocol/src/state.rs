//! Lifecycle states. Transitions are decided in `control`; this module only
//! names the states and which of them are terminal.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The lifecycle of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RunState {
    /// Accepting work: workers may be spawned and messages exchanged.
    Active,
    /// Root has completed; the run closes when its last worker is terminal.
    Completing,
    /// Root and every worker finished.
    Completed,
    /// Root reported failure; unfinished workers were cancelled.
    Failed,
    /// Cancelled by root; unfinished workers were cancelled.
    Cancelled,
}

impl RunState {
    /// Whether no further transition is possible.
    pub fn is_terminal(self) -> bool {
        match self {
            RunState::Active | RunState::Completing => false,
            RunState::Completed | RunState::Failed | RunState::Cancelled => true,
        }
    }
}

/// The lifecycle of a logical worker (not of its conversation).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum WorkerState {
    /// The record exists; nothing was asked of any executor yet.
    Created,
    /// A conversation launch is queued for an executor.
    LaunchRequested,
    /// An executor acknowledged the launch; the conversation is being created.
    Launching,
    /// The worker attached (or acted) and is working.
    Running,
    /// The worker asked a question or raised a blocker and waits for an answer.
    Waiting,
    /// The worker reported completion. Reopened only by an explicit follow-up.
    Completed,
    /// The worker reported an unrecoverable failure. Reopened only by a follow-up.
    Failed,
    /// Root or the run cancelled the worker.
    Cancelled,
    /// The executor could not create the worker's conversation.
    LaunchFailed,
}

impl WorkerState {
    /// Whether the worker is finished unless explicitly reopened.
    pub fn is_terminal(self) -> bool {
        match self {
            WorkerState::Created
            | WorkerState::LaunchRequested
            | WorkerState::Launching
            | WorkerState::Running
            | WorkerState::Waiting => false,
            WorkerState::Completed | WorkerState::Failed | WorkerState::Cancelled | WorkerState::LaunchFailed => true,
        }
    }
}

/// Execution Continuity's disposition (seed §7.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum WorkerDisposition {
    /// A turn is expected or under way (launching, generating, or attached and working).
    Running,
    /// Unfinished, its conversation idle: eligible for another turn.
    AwaitingExecution,
    /// Held until a declared dependency changes (`worker_await_dependency`).
    AwaitingDependency,
    /// Held until a person (or root) answers: `worker_await_human`, or a
    /// question or blocker it raised.
    AwaitingHuman,
    /// Unfinished, with automatic turns stopped by root or the stall guard.
    Paused,
    /// Finished: no continuation.
    Completed,
    /// Failed (or its launch did): no continuation.
    Failed,
    /// Cancelled or stopped: no continuation.
    Cancelled,
}

/// The kind of a durable message between workers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum MessageKind {
    /// Asks the recipient something; the sender waits for an `answer`.
    Question,
    /// Answers a question; releases a waiting recipient.
    Answer,
    /// Shares a fact; no reply expected.
    Information,
    /// The sender cannot proceed until the recipient acts.
    Blocker,
    /// Asks the recipient to review an artifact.
    ReviewRequest,
    /// Corrects the recipient's course; releases a waiting recipient.
    Correction,
}

impl MessageKind {
    /// Whether sending this kind makes the sender wait.
    pub fn makes_sender_wait(self) -> bool {
        match self {
            MessageKind::Question | MessageKind::Blocker => true,
            MessageKind::Answer | MessageKind::Information | MessageKind::ReviewRequest | MessageKind::Correction => {
                false
            }
        }
    }

    /// Whether receiving this kind releases a waiting recipient.
    pub fn releases_recipient(self) -> bool {
        match self {
            MessageKind::Answer | MessageKind::Correction => true,
            MessageKind::Question | MessageKind::Information | MessageKind::Blocker | MessageKind::ReviewRequest => {
                false
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_use_snake_case_on_the_wire() {
        assert_eq!(serde_json::to_string(&WorkerState::LaunchRequested).unwrap(), "\"launch_requested\"");
        assert_eq!(serde_json::from_str::<RunState>("\"completing\"").unwrap(), RunState::Completing);
        assert_eq!(serde_json::from_str::<MessageKind>("\"review_request\"").unwrap(), MessageKind::ReviewRequest);
    }

    #[test]
    fn unknown_states_are_refused() {
        assert!(serde_json::from_str::<WorkerState>("\"sleeping\"").is_err());
        assert!(serde_json::from_str::<RunState>("\"Active\"").is_err());
        assert!(serde_json::from_str::<MessageKind>("\"gossip\"").is_err());
    }
}

/// What a worker that is not working is waiting for, so a person (or root)
/// knows whom to nudge. Shown in worker views beside `state`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum WaitingFor {
    /// The ChatGPT app setup: no app label, or the app cannot be bound.
    AppSetup,
    /// The browser: signed out, not authorized, or not under control.
    Browser,
    /// An executor to connect (the paired extension or agent is not running).
    Executor,
    /// A launch slot: other launches go first (`--max-launches`, `--max-active-workers`).
    LaunchSlot,
    /// The new conversation to call `worker_attach` (its bootstrap was submitted).
    Attach,
    /// An answer to the question or blocker it raised.
    Answer,
    /// A person, in its chat: ChatGPT asks whether to allow a tool call
    /// (the carriers never answer that card).
    Person,
}

/// A [`WaitingFor`] with the next step in words.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Waiting {
    /// On what.
    pub on: WaitingFor,
    /// What to do about it.
    pub next_step: String,
}

/// Whether a run's identity-sensitive calls must be proven to come from the
/// managed conversation their capability belongs to (caller attribution).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Attribution {
    /// Every changing call made as a managed conversation (a worker, or a
    /// managed root) carries an `x-request-id` that an executor saw in
    /// that very conversation's page; otherwise `UNIDENTIFIED_CALLER`.
    #[default]
    Required,
    /// The capability alone identifies the caller: for hosts where no
    /// executor can see the conversation (a stdio client, a plain MCP
    /// client). `run_get` says so.
    CapabilityOnly,
}

/// Who blocked a chat.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum BlockedBy {
    /// Root, with `worker_block`.
    Root,
    /// A person, from the executor's own interface (the extension's popup).
    Person,
}

/// In tool schemas: the two values, without the variants' prose (every
/// conversation pays for the catalogue in context; SPEC says what each means).
impl JsonSchema for Attribution {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Attribution".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({ "type": "string", "enum": ["required", "capability_only"] })
    }
}
