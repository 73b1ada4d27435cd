//! Executor protocol: the one wire language between the daemon and every
//! carrier (the WebExtension, the CDP host agent, the fake executor).
//!
//! Frames are JSON text, tagged by `type`, camelCase fields. The executor
//! speaks first with `hello`; every command carries `commandId`, `workerId`,
//! an absolute deadline and an idempotency key, and is answered by an `ack`
//! (received and journaled) and later exactly one `result` (terminal outcome).
//! `conversationSend` completes on submission, not at the end of generation.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::error::ErrorCode;
use crate::ids::{CommandId, ConversationId, WorkerId};

/// The newest protocol version this build speaks; its executors say it in
/// `hello`. Version 2 adds `host.name` and `host.capacity`, caller
/// attribution (`callerSeen`, `callerLookup`) and `conversationBlock`;
/// version 3 the operator channel; version 4 `host.release` and the
/// `welcome`'s `release`, each side's build version; version 5 the
/// read-only page inspection (`pageInspect`, `pageInspected`).
pub const PROTOCOL_VERSION: u32 = 5;
/// The oldest version the daemon still serves: a `hello` outside
/// `OLDEST_PROTOCOL_VERSION..=PROTOCOL_VERSION` is refused with
/// `PROTOCOL_VERSION_MISMATCH`, and `welcome` echoes the executor's own.
pub const OLDEST_PROTOCOL_VERSION: u32 = 1;

/// Longest build version either side says (`host.release`, `release`).
pub const RELEASE_MAX: usize = 32;

/// Whether `release` is a build version as the wire carries it: 1 to
/// [`RELEASE_MAX`] of `[0-9A-Za-z.+-]` (semver's alphabet), so it is safe
/// in a close reason, a status line and a log.
pub fn valid_release(release: &str) -> bool {
    (1..=RELEASE_MAX).contains(&release.len())
        && release.bytes().all(|b| b.is_ascii_alphanumeric() || b"+-.".contains(&b))
}

/// Largest frame either side accepts, in bytes.
pub const FRAME_MAX: usize = 256 * 1024;

/// Largest `detail` an executor may report (error details carry no page
/// content), in bytes.
pub const DETAIL_MAX: usize = 2 * 1024;
/// Largest conversation URL, in bytes.
pub const URL_MAX: usize = 2 * 1024;
/// The only URLs an executor may report: chatgpt.com pages.
pub const URL_PREFIX: &str = "https://chatgpt.com/";
/// Largest host fact (`os`, `browser`) and capability name, in bytes.
pub const FACT_MAX: usize = 256;
/// Most capabilities a `hello` may declare.
pub const CAPABILITIES_MAX: usize = 32;
/// The largest `host.capacity` an executor may declare.
pub const CAPACITY_MAX: u32 = 256;

/// The least time between two `conversationProgress` frames for one
/// worker: the daemon's bound for a turn without progress is a minute or
/// more, so two signals fit in the shortest.
pub const PROGRESS_EVERY_MS: u64 = 30_000;

/// Largest request id (`x-request-id` before its `/`), in bytes.
pub const REQUEST_ID_MAX: usize = 100;
/// Largest tool name, in bytes.
pub const TOOL_NAME_MAX: usize = 64;
/// Most request ids one page reading reports (a page shows a few turns).
pub const CALLS_PER_REPORT_MAX: usize = 64;

/// Whether `id` is a well-formed request id: 1-100 of `[A-Za-z0-9_-]`
/// (ChatGPT's `wfr_…`).
pub fn valid_request_id(id: &str) -> bool {
    (1..=REQUEST_ID_MAX).contains(&id.len()) && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// Whether `name` is a well-formed tool name: 1-64 of `[a-z0-9_]`.
pub fn valid_tool_name(name: &str) -> bool {
    (1..=TOOL_NAME_MAX).contains(&name.len())
        && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
}

/// The capability an executor declares in `hello` when its pages offer a
/// safe seam for a mid-turn submission (`conversation_steer`). The daemon
/// sends that op to no other executor; the WebExtension does not declare
/// it, since no capture of the real chatgpt.com shows such a seam.
pub const STEER: &str = "conversation_steer";

/// The capability an executor declares in `hello` when it honours
/// `conversation_close` with `park: true` (closes only an idle page with an
/// empty composer, keeps the binding). The daemon parks tabs only on such
/// executors: an older one would close the tab for good.
pub const PARK: &str = "conversation_park";

/// The capability an executor declares in `hello` when it honours
/// `conversation_create` with `replaces`: it stops managing the replaced
/// conversation (its tab stays open, untouched) and creates the worker's
/// fresh one. The daemon rolls workers over only on such executors.
pub const ROLLOVER: &str = "conversation_rollover";

/// The capability an executor declares in `hello` when it honours `model`
/// on `conversation_create` and `conversation_send`: it sets the page's
/// model picker and verifies it before typing, failing closed. A worker
/// pinned to a model is placed only on such executors.
pub const MODEL: &str = "conversation_model";

/// The capability an executor declares in `hello` when it honours `effort`
/// beside `model`: it sets the picker's thinking effort ("Pro" is one since
/// 2026-08) and verifies it before typing, failing closed. A worker pinned
/// to an effort is placed only on such executors.
pub const EFFORT: &str = "conversation_effort";

mod inspect;
pub mod pair_offer;
pub use inspect::{INSPECT_WITHIN_MS, PAGE_INSPECT, PILLS_MAX, PageInspection, inspectable};

/// Which kind of carrier an executor is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ExecutorKind {
    /// The WebExtension in a managed browser profile.
    Webext,
    /// The CDP host agent attached to an authorized browser session.
    Cdp,
    /// The scripted fake executor used by tests.
    Fake,
}

/// Facts about the executor's machine (the wire field is `host`), for status and diagnostics only.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MachineFacts {
    /// Operating system, for example `linux`.
    #[serde(default)]
    pub os: String,
    /// Browser name and version, when there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub browser: Option<String>,
    /// The machine's name, so status can tell hosts apart (v2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// How many managed conversations this executor takes at most; new
    /// workers go to executors with room (v2). None: no limit of its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity: Option<u32>,
    /// The executor's own build version, in the words the daemon's
    /// `orchestrator --version` begins with (v4): status names it, and so
    /// does a refusal.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub release: Option<String>,
}

/// Frames the executor sends to the daemon. Unknown fields are refused: a
/// frame grows only with a protocol version (see the compatibility fixtures
/// in `protocol/tests/executor_compat.rs`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type", rename_all = "camelCase", rename_all_fields = "camelCase", deny_unknown_fields)]
pub enum ExecutorFrame {
    /// First frame: authenticates and declares who is speaking.
    Hello {
        /// A version the daemon serves, from [`OLDEST_PROTOCOL_VERSION`] to [`PROTOCOL_VERSION`].
        protocol_version: u32,
        /// This executor's credential, `exc1.<executorId>.<64 hex>`, as
        /// `orchestrator pair` issued it for `executor_id`. Never logged.
        token: String,
        /// Stable identity of this carrier installation (kept in its storage);
        /// worker bindings are to this id. 1-64 of `[A-Za-z0-9_-]`.
        executor_id: String,
        /// Unique per executor process start; changes on restart.
        executor_instance_id: String,
        /// What kind of carrier this is.
        executor_kind: ExecutorKind,
        /// Declared capabilities, for example `conversation_steer`.
        #[serde(default)]
        capabilities: Vec<String>,
        /// Host facts.
        #[serde(default)]
        host: MachineFacts,
    },
    /// Liveness; renews the lease.
    Heartbeat {
        /// Monotonic per connection.
        seq: u64,
    },
    /// The command was received and journaled; not that it took effect.
    Ack {
        /// The command.
        command_id: CommandId,
    },
    /// The command's terminal outcome; sent exactly once per command.
    Result {
        /// The command.
        command_id: CommandId,
        /// What happened.
        outcome: CommandOutcome,
    },
    /// A conversation was created for a worker (before its identity is known).
    ConversationCreated {
        /// The creating command.
        command_id: CommandId,
        /// The worker.
        worker_id: WorkerId,
    },
    /// The exact conversation identity observed for a worker.
    ConversationBound {
        /// The worker.
        worker_id: WorkerId,
        /// The UUID from `/c/<uuid>`.
        conversation_id: ConversationId,
        /// Canonical URL of the conversation.
        url: String,
    },
    /// The conversation's coarse state changed.
    ConversationState {
        /// The worker.
        worker_id: WorkerId,
        /// The new state.
        state: ConversationState,
        /// Error detail when `state` is `error`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<ErrorCode>,
    },
    /// The running turn's content moved on (text streamed, a tool-call row
    /// appeared) since this frame was last sent for the worker: the turn is
    /// alive even when its worker reports nothing. Sent only while the page
    /// is generating, at most once per [`PROGRESS_EVERY_MS`] per worker.
    ConversationProgress {
        /// The worker.
        worker_id: WorkerId,
    },
    /// An error not tied to one command (for example the page changed).
    ConversationError {
        /// The worker.
        worker_id: WorkerId,
        /// What went wrong.
        code: ErrorCode,
        /// Human-readable detail (no page content).
        #[serde(default)]
        detail: String,
    },
    /// The managed tab or target closed.
    ConversationClosed {
        /// The worker.
        worker_id: WorkerId,
    },
    /// (v2) The worker's managed page shows a request id in its page data
    /// (`metadata.request_id` on any message of its turns: ChatGPT stamps
    /// one id per turn on every connector call the turn makes). Never text,
    /// arguments or results. Sent once per request id the executor sees
    /// (unprompted, and again when a `callerLookup` asks); the daemon
    /// attributes the MCP calls that carry the same `x-request-id` to this
    /// conversation while the id is its newest.
    CallerSeen {
        /// The worker whose page it is.
        worker_id: WorkerId,
        /// The conversation the page shows (the worker's bound one).
        conversation_id: ConversationId,
        /// The request id.
        request_id: String,
        /// Whether it is the newest request id the page shows (in the
        /// page's own order) when this is sent: a call with an older id
        /// belongs to a turn that has ended.
        newest: bool,
    },
    /// (v2) A person blocked (or unblocked) this managed chat from the
    /// executor's own interface (the extension's popup).
    ConversationBlock {
        /// The worker.
        worker_id: WorkerId,
        /// Blocked (`true`) or not.
        blocked: bool,
    },
    /// (v5, with [`PAGE_INSPECT`]) The answer to one `pageInspect`: how the
    /// page read, or why it could not be read. Sent once per `inspectId`.
    PageInspected {
        /// The request answered.
        inspect_id: String,
        /// The reading, when the page was read.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        inspection: Option<PageInspection>,
        /// Why it was not read (`BROWSER_CONTROL_UNAVAILABLE`,
        /// `ADAPTER_BLOCKED`, `DEADLINE_EXCEEDED`, `INVALID_ARGUMENT`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<ErrorCode>,
        /// The refusal in words (no page content).
        #[serde(default, skip_serializing_if = "String::is_empty")]
        detail: String,
    },
    /// (v3, with the [`OPERATOR_CAPABILITY`]) A person's control from the
    /// executor's own interface (the popup, the overlay). The daemon applies
    /// it as the run's root would and answers `operatorActed`.
    OperatorAct {
        /// Names this act in the answer; an `answer` act's idempotency key
        /// (the same id never delivers an answer twice). 1-64 of `[A-Za-z0-9_-]`.
        act_id: String,
        /// What to do.
        action: crate::operator::Action,
        /// The worker (every action but a run's).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        worker_id: Option<WorkerId>,
        /// The run (`pause_all`, `resume_all`, `stop_run`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        run_id: Option<crate::RunId>,
        /// The answer (`answer`), at most [`crate::operator::ANSWER_MAX`] bytes.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        text: Option<String>,
    },
}

/// The capability (protocol v3) of an executor with a person's interface:
/// the daemon sends it `operatorView` and takes its `operatorAct`.
pub const OPERATOR_CAPABILITY: &str = "operator";

impl ExecutorFrame {
    /// The version that introduced this frame: a session of an older one may
    /// not send it.
    pub fn since_version(&self) -> u32 {
        match self {
            ExecutorFrame::CallerSeen { .. } | ExecutorFrame::ConversationBlock { .. } => 2,
            ExecutorFrame::OperatorAct { .. } => 3,
            ExecutorFrame::PageInspected { .. } => 5,
            _ => 1,
        }
    }
}

/// Coarse state of a managed conversation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ConversationState {
    /// The page is loading.
    Loading,
    /// The assistant is generating a reply.
    Generating,
    /// No generation; the composer accepts input.
    Idle,
    /// The page shows an error or incident.
    Error,
    /// The tab or target is gone.
    Closed,
}

/// The terminal outcome of a command.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "status", rename_all = "snake_case", rename_all_fields = "camelCase", deny_unknown_fields)]
pub enum CommandOutcome {
    /// The effect happened (for `send`: the prompt was submitted).
    Ok {
        /// The conversation concerned, when known.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        conversation_id: Option<ConversationId>,
    },
    /// The effect did not happen, or may have happened (`OUTCOME_UNKNOWN`,
    /// `AMBIGUOUS_SUBMISSION`).
    Error {
        /// Why.
        code: ErrorCode,
        /// Human-readable detail (no page content).
        #[serde(default)]
        detail: String,
    },
}

/// Frames the daemon sends to the executor.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type", rename_all = "camelCase", rename_all_fields = "camelCase")]
pub enum DaemonFrame {
    /// Accepts a `hello`.
    Welcome {
        /// The daemon's protocol version.
        protocol_version: u32,
        /// Heartbeat interval the executor should keep, in milliseconds.
        heartbeat_ms: u64,
        /// Lease: missing heartbeats this long marks the executor disconnected.
        lease_ms: u64,
        /// The daemon's build version (v4; empty from older daemons).
        #[serde(default, skip_serializing_if = "String::is_empty")]
        release: String,
    },
    /// Work for the executor.
    Command(Command),
    /// (v2; sent only to v2 executors) An MCP call names this worker and
    /// carries `requestId`: look for it in the worker's page now, and send
    /// `callerSeen` if it is there (or once it appears, until `untilMs`).
    /// Not a command: no ack, no result, nothing journaled.
    CallerLookup {
        /// The worker.
        worker_id: WorkerId,
        /// The conversation bound to it.
        conversation_id: ConversationId,
        /// The call's request id.
        request_id: String,
        /// When the daemon stops waiting (ms since the Unix epoch).
        until_ms: u64,
    },
    /// (v3; only to an executor that declared [`OPERATOR_CAPABILITY`]) What
    /// the pool looks like to a person, whole: sent after `welcome` and again
    /// whenever it changes (at most four a second). Replaces the last one.
    OperatorView(crate::operator::View),
    /// (v5; only to an executor that declared [`PAGE_INSPECT`]) Read the
    /// page at `url` and act on nothing: the executor opens it in a
    /// background tab of its own (never a person's tab, never focused),
    /// waits for the page to settle, reads it as a submit would before
    /// typing, closes that tab, and answers `pageInspected` by `untilMs`.
    /// Nothing is typed, clicked or focused. Not a command: no ack, no
    /// result, nothing journaled (an answer that does not come in time is
    /// reported to whoever asked as `DEADLINE_EXCEEDED`).
    PageInspect {
        /// Names the answer: 1-64 of `[A-Za-z0-9_-]`.
        inspect_id: String,
        /// The page, under [`URL_PREFIX`].
        url: String,
        /// When the daemon stops waiting (ms since the Unix epoch).
        until_ms: u64,
    },
    /// (v3) The answer to one `operatorAct`.
    OperatorActed {
        /// The act answered.
        act_id: String,
        /// How many workers or runs it changed (0: already so).
        changed: u32,
        /// Why it was refused, when it was.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<ErrorCode>,
        /// The refusal in words.
        #[serde(default, skip_serializing_if = "String::is_empty")]
        detail: String,
    },
}

/// One unit of work for an executor.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Command {
    /// Unique per command.
    pub command_id: CommandId,
    /// The logical worker it serves.
    pub worker_id: WorkerId,
    /// Absolute deadline, milliseconds since the Unix epoch.
    pub deadline_ms: u64,
    /// Stable across replays of the same intent; the executor's journal key.
    pub idempotency_key: String,
    /// What to do.
    pub op: CommandOp,
}

/// The operation of a command.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case", rename_all_fields = "camelCase")]
pub enum CommandOp {
    /// Open a new managed conversation, bind it to the orchestrator's app
    /// when `app` is set, and submit `prompt` exactly once.
    ConversationCreate {
        /// The bootstrap prompt.
        prompt: String,
        /// Create it inside this ChatGPT Project, when configured.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        project_url: Option<String>,
        /// The label the operator gave the orchestrator's app (connector) in
        /// ChatGPT: the conversation is bound to exactly this app before the
        /// prompt is submitted, and nothing is submitted if it cannot be.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        app: Option<String>,
        /// The model the worker is pinned to, as the picker labels it: the
        /// page's picker is set to it and verified before the prompt is
        /// typed, or nothing is typed (`MODEL_UNAVAILABLE`, or
        /// `HOST_UI_CHANGED` when the picker cannot be read). Only sent to
        /// an executor that declared [`MODEL`].
        #[serde(default, skip_serializing_if = "Option::is_none")]
        model: Option<String>,
        /// The thinking effort pinned with `model`, as the picker labels it
        /// ("High", "Pro"): set and verified after the model, or nothing is
        /// typed. Only sent to an executor that declared [`EFFORT`].
        #[serde(default, skip_serializing_if = "Option::is_none")]
        effort: Option<String>,
        /// A rollover: the worker's conversation this one replaces. The
        /// executor stops managing it (its tab is left open, untouched) and
        /// creates the fresh one as for a first create. Only sent to an
        /// executor that declared [`ROLLOVER`].
        #[serde(default, skip_serializing_if = "Option::is_none")]
        replaces: Option<ConversationId>,
    },
    /// Submit `prompt` into the bound conversation once it is idle.
    ConversationSend {
        /// The bound conversation.
        conversation_id: ConversationId,
        /// The prompt (wake, follow-up, continuation).
        prompt: String,
        /// The orchestrator's app label: the conversation must (still) show
        /// that app selected, or is bound to it again, before the prompt.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        app: Option<String>,
        /// The worker's pinned model, set and verified before the prompt
        /// (as for `conversation_create`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        model: Option<String>,
        /// Its pinned effort (as for `conversation_create`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        effort: Option<String>,
    },
    /// Submit a mid-turn checkpoint without waiting for idle (reserved).
    ConversationSteer {
        /// The bound conversation.
        conversation_id: ConversationId,
        /// The checkpoint text.
        prompt: String,
    },
    /// Reopen the exact conversation in a new managed tab (recovery).
    ConversationOpen {
        /// The bound conversation.
        conversation_id: ConversationId,
        /// Its canonical URL.
        url: String,
    },
    /// Report the conversation's current state.
    ConversationInspect {
        /// The bound conversation.
        conversation_id: ConversationId,
    },
    /// Close the managed tab or target.
    ConversationClose {
        /// The bound conversation.
        conversation_id: ConversationId,
        /// Close it only to free tab capacity (v3): the binding is kept and
        /// a later `conversation_open` reopens the exact conversation. The
        /// executor closes it only while its page is idle with an empty
        /// composer, and otherwise answers `TAB_IN_USE` and leaves it open.
        /// Absent: false (the tab goes for good, and the binding with it).
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        park: bool,
    },
}

/// An executor credential's parts, `(executor id, secret)`, if it reads
/// `exc1.<executor id>.<64 lowercase hex>` as `orchestrator pair` issues it.
/// The daemon verifies the secret; the extension reads the id from it.
pub fn parse_credential(credential: &str) -> Option<(&str, &str)> {
    let rest = credential.strip_prefix("exc1.")?;
    let (id, secret) = rest.split_once('.')?;
    let hex = secret.len() == 64 && secret.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
    (valid_executor_id(id) && hex).then_some((id, secret))
}

/// Whether `id` is a well-formed executor id (or instance id): 1-64 of `[A-Za-z0-9_-]`.
pub fn valid_executor_id(id: &str) -> bool {
    (1..=64).contains(&id.len()) && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// Why a well-formed frame is still refused: a field over its bound or a URL
/// outside the allow-list. Nothing of such a frame is stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FrameRefusal {
    /// `TOO_LARGE` or `INVALID_ARGUMENT`.
    pub code: ErrorCode,
    /// Which field, and its bound.
    pub detail: String,
}

fn bounded(field: &str, value: &str, max: usize) -> Result<(), FrameRefusal> {
    if value.len() > max {
        return Err(FrameRefusal { code: ErrorCode::TooLarge, detail: format!("{field} over {max} bytes") });
    }
    Ok(())
}

impl ExecutorFrame {
    /// Checks every string an executor can put into the log against its
    /// bound, and conversation URLs against the allow-list
    /// (`https://chatgpt.com/…` only: never `javascript:` or another site).
    pub fn validate(&self) -> Result<(), FrameRefusal> {
        match self {
            ExecutorFrame::Hello { protocol_version, capabilities, host, .. } => {
                if *protocol_version < 2 && (host.name.is_some() || host.capacity.is_some()) {
                    return Err(FrameRefusal {
                        code: ErrorCode::InvalidArgument,
                        detail: "host.name and host.capacity need protocol version 2".into(),
                    });
                }
                if host.capacity.is_some_and(|c| !(1..=CAPACITY_MAX).contains(&c)) {
                    return Err(FrameRefusal {
                        code: ErrorCode::InvalidArgument,
                        detail: format!("host.capacity must be 1-{CAPACITY_MAX}"),
                    });
                }
                if let Some(release) = &host.release {
                    if *protocol_version < 4 {
                        return Err(FrameRefusal {
                            code: ErrorCode::InvalidArgument,
                            detail: "host.release needs protocol version 4".into(),
                        });
                    }
                    if !valid_release(release) {
                        return Err(FrameRefusal {
                            code: ErrorCode::InvalidArgument,
                            detail: format!("host.release must be 1-{RELEASE_MAX} of [0-9A-Za-z.+-]"),
                        });
                    }
                }
                bounded("host.name", host.name.as_deref().unwrap_or_default(), FACT_MAX)?;
                let facts = [Some(host.os.as_str()), host.name.as_deref(), host.browser.as_deref()];
                if facts.into_iter().flatten().any(|f| f.chars().any(char::is_control)) {
                    return Err(FrameRefusal {
                        code: ErrorCode::InvalidArgument,
                        detail: "host facts must not hold control characters".into(),
                    });
                }
                if capabilities.len() > CAPABILITIES_MAX {
                    return Err(FrameRefusal {
                        code: ErrorCode::TooLarge,
                        detail: format!("more than {CAPABILITIES_MAX} capabilities"),
                    });
                }
                capabilities.iter().try_for_each(|c| bounded("capability", c, FACT_MAX))?;
                bounded("host.os", &host.os, FACT_MAX)?;
                bounded("host.browser", host.browser.as_deref().unwrap_or_default(), FACT_MAX)
            }
            ExecutorFrame::ConversationBound { url, .. } => {
                bounded("url", url, URL_MAX)?;
                if !url.starts_with(URL_PREFIX) || url.chars().any(char::is_control) {
                    return Err(FrameRefusal {
                        code: ErrorCode::InvalidArgument,
                        detail: format!("url must start with {URL_PREFIX}"),
                    });
                }
                Ok(())
            }
            ExecutorFrame::ConversationError { detail, .. }
            | ExecutorFrame::Result { outcome: CommandOutcome::Error { detail, .. }, .. } => {
                bounded("detail", detail, DETAIL_MAX)
            }
            ExecutorFrame::CallerSeen { request_id, .. } => {
                if !valid_request_id(request_id) {
                    return Err(FrameRefusal {
                        code: ErrorCode::InvalidArgument,
                        detail: format!("requestId must be 1-{REQUEST_ID_MAX} of [A-Za-z0-9_-]"),
                    });
                }
                Ok(())
            }
            // Its shape and bounds are the daemon's to answer (`operatorActed`
            // with the refusal): a person's typo never ends the session.
            ExecutorFrame::OperatorAct { act_id, .. } => {
                if !valid_executor_id(act_id) {
                    return Err(FrameRefusal {
                        code: ErrorCode::InvalidArgument,
                        detail: "actId must be 1-64 of [A-Za-z0-9_-]".into(),
                    });
                }
                Ok(())
            }
            ExecutorFrame::PageInspected { inspect_id, inspection, error, detail } => {
                // An inspect id has an executor id's alphabet and bounds.
                if !valid_executor_id(inspect_id) {
                    return Err(FrameRefusal {
                        code: ErrorCode::InvalidArgument,
                        detail: "inspectId must be 1-64 of [A-Za-z0-9_-]".into(),
                    });
                }
                if inspection.is_some() == error.is_some() {
                    return Err(FrameRefusal {
                        code: ErrorCode::InvalidArgument,
                        detail: "pageInspected carries an inspection or an error, one of the two".into(),
                    });
                }
                bounded("detail", detail, DETAIL_MAX)?;
                inspection.as_ref().map_or(Ok(()), PageInspection::validate)
            }
            ExecutorFrame::Heartbeat { .. }
            | ExecutorFrame::Ack { .. }
            | ExecutorFrame::Result { outcome: CommandOutcome::Ok { .. }, .. }
            | ExecutorFrame::ConversationCreated { .. }
            | ExecutorFrame::ConversationState { .. }
            | ExecutorFrame::ConversationProgress { .. }
            | ExecutorFrame::ConversationBlock { .. }
            | ExecutorFrame::ConversationClosed { .. } => Ok(()),
        }
    }

    /// Checks a `hello` against the versions this build serves.
    pub fn check_version(&self) -> Result<(), ErrorCode> {
        match self {
            ExecutorFrame::Hello { protocol_version, .. }
                if (OLDEST_PROTOCOL_VERSION..=PROTOCOL_VERSION).contains(protocol_version) =>
            {
                Ok(())
            }
            ExecutorFrame::Hello { .. } => Err(ErrorCode::ProtocolVersionMismatch),
            _ => Err(ErrorCode::ProtocolViolation),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The daemon can ask an executor for exactly these operations: none
    /// clicks ChatGPT's Retry (or any control but the composer's send),
    /// so a delivery timeout can only be answered by a fresh user turn. A
    /// new operation must be added here, on purpose.
    #[test]
    fn no_operation_can_click_retry() {
        let schema = serde_json::to_value(schemars::schema_for!(CommandOp)).unwrap();
        let mut kinds: Vec<String> = schema["oneOf"]
            .as_array()
            .expect("one schema per operation")
            .iter()
            .map(|op| op["properties"]["kind"]["const"].as_str().expect("a kind per operation").to_owned())
            .collect();
        kinds.sort();
        assert_eq!(
            kinds,
            [
                "conversation_close",
                "conversation_create",
                "conversation_inspect",
                "conversation_open",
                "conversation_send",
                "conversation_steer"
            ]
        );
    }

    #[test]
    fn commands_round_trip_in_camel_case() {
        let cmd = DaemonFrame::Command(Command {
            command_id: CommandId::from_uuid_bytes([1; 16]),
            worker_id: WorkerId::from_uuid_bytes([2; 16]),
            deadline_ms: 1_800_000_000_000,
            idempotency_key: "spawn:abc:create".into(),
            op: CommandOp::ConversationSend {
                conversation_id: "0196b2c4-8e1f-7a3b-9c2d-4e5f60718293".parse().unwrap(),
                prompt: "resume".into(),
                app: None,
                model: None,
                effort: None,
            },
        });
        let json = serde_json::to_value(&cmd).unwrap();
        assert_eq!(json["type"], "command");
        assert_eq!(json["commandId"], "cmd_01010101010101010101010101010101");
        assert_eq!(json["op"]["kind"], "conversation_send");
        assert_eq!(json["op"]["conversationId"], "0196b2c4-8e1f-7a3b-9c2d-4e5f60718293");
        assert_eq!(serde_json::from_value::<DaemonFrame>(json).unwrap(), cmd);
    }

    #[test]
    fn commands_without_deadline_or_idempotency_key_are_refused() {
        let base = serde_json::json!({
            "type": "command",
            "commandId": "cmd_01010101010101010101010101010101",
            "workerId": "wrk_02020202020202020202020202020202",
            "deadlineMs": 5,
            "idempotencyKey": "k",
            "op": {"kind": "conversation_inspect", "conversationId": "0196b2c4-8e1f-7a3b-9c2d-4e5f60718293"}
        });
        assert!(serde_json::from_value::<DaemonFrame>(base.clone()).is_ok());
        for field in ["deadlineMs", "idempotencyKey", "commandId", "workerId"] {
            let mut v = base.clone();
            v.as_object_mut().unwrap().remove(field);
            let err = serde_json::from_value::<DaemonFrame>(v).unwrap_err().to_string();
            assert!(err.contains(field), "{field}: {err}");
        }
    }

    #[test]
    fn hello_version_is_checked() {
        let hello = |v| ExecutorFrame::Hello {
            protocol_version: v,
            token: "t".into(),
            executor_id: "e".into(),
            executor_instance_id: "i".into(),
            executor_kind: ExecutorKind::Fake,
            capabilities: vec![],
            host: MachineFacts::default(),
        };
        assert_eq!(hello(PROTOCOL_VERSION).check_version(), Ok(()));
        assert_eq!(hello(OLDEST_PROTOCOL_VERSION).check_version(), Ok(()));
        assert_eq!(hello(0).check_version(), Err(ErrorCode::ProtocolVersionMismatch));
        assert_eq!(hello(PROTOCOL_VERSION + 1).check_version(), Err(ErrorCode::ProtocolVersionMismatch));
        assert_eq!(ExecutorFrame::Heartbeat { seq: 1 }.check_version(), Err(ErrorCode::ProtocolViolation));
    }

    #[test]
    fn host_release_is_a_version_4_field_in_semvers_alphabet() {
        let hello = |v: u32, release: &str| ExecutorFrame::Hello {
            protocol_version: v,
            token: "t".into(),
            executor_id: "e".into(),
            executor_instance_id: "i".into(),
            executor_kind: ExecutorKind::Webext,
            capabilities: vec![],
            host: MachineFacts { release: Some(release.into()), ..MachineFacts::default() },
        };
        assert_eq!(hello(4, "0.1.0-rc.1+g1a2b").validate(), Ok(()));
        assert!(hello(3, "0.1.0").validate().unwrap_err().detail.contains("version 4"));
        for bad in ["", "0.1.0 beta", "0.1.0\n", "1/2", &"9".repeat(RELEASE_MAX + 1)] {
            assert!(hello(4, bad).validate().is_err(), "{bad:?}");
        }
    }

    #[test]
    fn host_name_and_capacity_are_version_2_fields_and_bounded() {
        let hello = |v, name: Option<&str>, capacity| ExecutorFrame::Hello {
            protocol_version: v,
            token: "t".into(),
            executor_id: "e".into(),
            executor_instance_id: "i".into(),
            executor_kind: ExecutorKind::Cdp,
            capabilities: vec![],
            host: MachineFacts {
                os: "linux".into(),
                browser: None,
                name: name.map(Into::into),
                capacity,
                release: None,
            },
        };
        assert_eq!(hello(2, Some("studio"), Some(8)).validate(), Ok(()));
        assert_eq!(hello(1, None, None).validate(), Ok(()));
        for refused in [
            hello(1, Some("studio"), None),
            hello(1, None, Some(8)),
            hello(2, None, Some(0)),
            hello(2, None, Some(CAPACITY_MAX + 1)),
            hello(2, Some(&"n".repeat(FACT_MAX + 1)), None),
        ] {
            assert!(refused.validate().is_err(), "{refused:?}");
        }
    }

    #[test]
    fn results_carry_typed_error_codes() {
        let json = r#"{"type":"result","commandId":"cmd_01010101010101010101010101010101","outcome":{"status":"error","code":"AMBIGUOUS_SUBMISSION","detail":"no readback"}}"#;
        let frame: ExecutorFrame = serde_json::from_str(json).unwrap();
        let ExecutorFrame::Result { outcome: CommandOutcome::Error { code, .. }, .. } = frame else {
            panic!("expected an error result");
        };
        assert_eq!(code, ErrorCode::AmbiguousSubmission);
        let bad = json.replace("AMBIGUOUS_SUBMISSION", "WHATEVER");
        assert!(serde_json::from_str::<ExecutorFrame>(&bad).is_err());
    }
}
