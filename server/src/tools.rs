//! The MCP tools. One handler, served unchanged over streamable HTTP and stdio.
//!
//! Every tool takes JSON-schema'd arguments (unknown fields refused), returns
//! structured output with an `outputSchema`, and sets all four annotation
//! hints explicitly. Errors come back as a tool result with `isError: true`
//! whose text is `{"code": "...", "message": "..."}` with a stable code from
//! `docs/errors.md` (text, not `structuredContent`, so clients that validate
//! structured output against the schema accept it).
//!
//! Authority: a capability names exactly one worker; a caller acts only as
//! that worker, and root-only tools refuse every other worker.

use std::sync::Arc;
use std::time::Duration;

use control::decide::Command;
use control::model::{Run, Worker};
use control::plane::{Page, Viewer};
use control::{ControlPlane, Error};
use protocol::limits::{PREVIEW_MAX, RESPONSE_MAX, WAIT_MAX_MS};
use protocol::{Assignment, Event, MessageId, MessageKind, RunId, RunState, WorkerId, WorkerState};
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::model::{Implementation, ServerCapabilities, ServerConfig};
use rmcp::service::RequestContext;
use rmcp::{Json, RoleServer, ServerHandler, tool, tool_handler, tool_router};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::args::Parameters;
use crate::peers::Peers;
use control::prompts::{BOOTSTRAP_VERSION, bootstrap_prompt};

/// The error text: `{"code": "FORBIDDEN", "message": "..."}`.
pub(crate) fn error_text(e: &Error) -> String {
    serde_json::json!({ "code": e.code().as_str(), "message": e.to_string() }).to_string()
}

/// Runs blocking control-plane work (SQLite commits) off the async workers.
async fn blocking<T: Send + 'static>(f: impl FnOnce() -> Result<T, Error> + Send + 'static) -> Result<Json<T>, String> {
    match tokio::task::spawn_blocking(f).await {
        Ok(Ok(v)) => Ok(Json(v)),
        Ok(Err(e)) => Err(error_text(&e)),
        Err(join) => Err(serde_json::json!({"code": "INTERNAL", "message": join.to_string()}).to_string()),
    }
}

fn parse<T: std::str::FromStr<Err = protocol::IdError>>(text: &str) -> Result<T, Error> {
    text.parse().map_err(Error::InvalidId)
}

/// Root and workers authenticate with a capability; this checks it and, when
/// the caller also named a worker, that it names itself.
fn acting_as(plane: &ControlPlane, capability: &str, claimed: Option<&str>) -> Result<Worker, Error> {
    let me = plane.authenticate(capability)?;
    if let Some(claimed) = claimed {
        let claimed: WorkerId = parse(claimed)?;
        if claimed != me.id {
            return Err(Error::Forbidden("a capability acts only as its own worker".into()));
        }
    }
    Ok(me)
}

/// What an attached worker receives: itself, its capability, its assignment.
/// What an attach returns: everything but the follow-ups fits by the
/// bounds of its parts; the follow-ups are as many of the newest as fit in
/// `RESPONSE_MAX`, so an attach always fits what clients accept.
fn attach_out(plane: &ControlPlane, id: &WorkerId) -> Result<WorkerAttachOut, Error> {
    let w = plane.worker(id).ok_or_else(|| Error::NotFound(format!("worker {id}")))?;
    let mut out = WorkerAttachOut {
        // Its own long texts cut, as in a list: room for the newest follow-up.
        worker: WorkerView::in_list(&w),
        run_id: w.run_id.clone(),
        capability: plane.keys().capability(id),
        assignment: w.assignment.clone().ok_or_else(|| Error::Forbidden("root does not attach".into()))?,
        followups: Vec::new(),
        followups_from: 1,
        instructions: WORKER_INSTRUCTIONS.into(),
    };
    let mut room = RESPONSE_MAX.saturating_sub(json_len(&out));
    let mut newest = Vec::new();
    for text in w.followups.iter().rev() {
        let len = json_len(text) + 1;
        if len > room {
            break;
        }
        room -= len;
        newest.push(text.clone());
    }
    newest.reverse();
    out.followups_from = (w.followups.len() - newest.len()) as u32 + 1;
    out.followups = newest;
    Ok(out)
}

fn json_len(value: &impl Serialize) -> usize {
    serde_json::to_vec(value).map_or(usize::MAX, |json| json.len())
}

fn root_only(plane: &ControlPlane, capability: &str) -> Result<Worker, Error> {
    let me = plane.authenticate(capability)?;
    if !me.is_root() {
        return Err(Error::Forbidden("only root may call this tool".into()));
    }
    Ok(me)
}

/// A run as tools show it.
#[derive(Debug, Serialize, JsonSchema)]
pub struct RunView {
    /// The run.
    pub run_id: RunId,
    /// Human title.
    pub title: String,
    /// Lifecycle state.
    pub state: RunState,
    /// The `/root` worker.
    pub root_worker_id: WorkerId,
    /// Last event cursor.
    pub cursor: u64,
    /// Creation time (ms since epoch).
    pub created_at_ms: u64,
    /// Last change (ms since epoch).
    pub updated_at_ms: u64,
}

impl From<&Run> for RunView {
    fn from(r: &Run) -> Self {
        Self {
            run_id: r.id.clone(),
            title: r.title.clone(),
            state: r.state,
            root_worker_id: r.root.clone(),
            cursor: r.cursor,
            created_at_ms: r.created_at_ms,
            updated_at_ms: r.updated_at_ms,
        }
    }
}

/// A worker as tools show it (no assignment body; `worker_attach` gives that).
#[derive(Debug, Serialize, JsonSchema)]
pub struct WorkerView {
    /// The worker.
    pub worker_id: WorkerId,
    /// Hierarchical name.
    pub path: String,
    /// Lifecycle state.
    pub state: WorkerState,
    /// How many times its conversation attached.
    pub attach_count: u32,
    /// Follow-ups received.
    pub followups: u32,
    /// Last progress summary.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_progress: Option<String>,
    /// Completion summary or failure reason.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub outcome: Option<String>,
    /// True in a list when `last_progress` or `outcome` was cut to its first
    /// 256 bytes (so 256 workers fit one response); the full texts are in
    /// the worker's `worker.progress` / `worker.completed` events.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub shortened: bool,
    /// Last change (ms since epoch).
    pub updated_at_ms: u64,
}

impl From<&Worker> for WorkerView {
    fn from(w: &Worker) -> Self {
        Self {
            worker_id: w.id.clone(),
            path: w.path.clone(),
            state: w.state,
            attach_count: w.attach_count,
            followups: w.followups.len() as u32,
            last_progress: w.last_progress.clone(),
            outcome: w.outcome.clone(),
            shortened: false,
            updated_at_ms: w.updated_at_ms,
        }
    }
}

impl WorkerView {
    /// The view in a list of workers: long texts cut to `PREVIEW_MAX`
    /// bytes as JSON (escapes counted), at a character boundary.
    fn in_list(w: &Worker) -> Self {
        let mut view = Self::from(w);
        for text in [&mut view.last_progress, &mut view.outcome].into_iter().flatten() {
            let mut escaped = 0;
            let cut = text.char_indices().find(|(_, c)| {
                escaped += match c {
                    '"' | '\\' | '\n' | '\r' | '\t' | '\u{8}' | '\u{c}' => 2,
                    c if (*c as u32) < 0x20 => 6,
                    c => c.len_utf8(),
                };
                escaped > PREVIEW_MAX
            });
            if let Some((at, _)) = cut {
                text.truncate(at);
                view.shortened = true;
            }
        }
        view
    }
}

// ---- arguments and outputs -------------------------------------------------

/// `run_create` arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RunCreateArgs {
    /// Short human title of the run's goal.
    pub title: String,
    /// Replaying the same key with the same title returns the same run,
    /// without the capability (only the creating call gets it).
    #[serde(default)]
    pub idempotency_key: Option<String>,
}

/// `run_create` output.
#[derive(Debug, Serialize, JsonSchema)]
pub struct RunCreateOut {
    /// The run.
    pub run: RunView,
    /// Root's capability: pass it as `capability` to every other tool. Keep it out of worker prompts.
    /// Only the call that created the run receives it; a replay does not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub root_capability: Option<String>,
    /// This call replayed an earlier key: the run exists, its capability went to its creator.
    pub replayed: bool,
}

/// Arguments of tools that need only the caller's capability.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CapabilityArgs {
    /// The caller's capability (from run_create or worker_attach).
    pub capability: String,
}

/// `run_get` output.
#[derive(Debug, Serialize, JsonSchema)]
pub struct RunGetOut {
    /// The run.
    pub run: RunView,
    /// Root sees every worker; a worker sees itself.
    pub workers: Vec<WorkerView>,
}

/// `run_cancel` arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RunCancelArgs {
    /// Root's capability.
    pub capability: String,
    /// Why the run is cancelled.
    pub reason: String,
}

/// `worker_spawn` arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WorkerSpawnArgs {
    /// Root's capability.
    pub capability: String,
    /// Worker name, unique in the run: 1-64 of `a-z 0-9 - _`. Its path becomes `/root/<name>`.
    pub name: String,
    /// The worker's authoritative task; it stays in the orchestrator, never in a prompt.
    pub assignment: Assignment,
    /// Replaying the same key with the same arguments returns the same worker.
    #[serde(default)]
    pub idempotency_key: Option<String>,
}

/// `worker_spawn` output.
#[derive(Debug, Serialize, JsonSchema)]
pub struct WorkerSpawnOut {
    /// The new (or replayed) worker.
    pub worker: WorkerView,
    /// The prompt that starts the worker's conversation; it carries only an opaque attach identity.
    pub bootstrap_prompt: String,
    /// Version of the bootstrap wording.
    pub bootstrap_version: u32,
}

/// `worker_attach` arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WorkerAttachArgs {
    /// The attach identity from your bootstrap prompt.
    pub attach_identity: String,
    /// The catalog stamp shown in this tool's description, exactly as your tool list has it.
    #[serde(default)]
    pub catalog: Option<String>,
}

/// The identity of this daemon's tool catalog: what a ChatGPT app (connector)
/// must have fetched for its conversations to call these tools as they are.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Catalog {
    /// SHA-256 (hex) over every tool's name, input schema and output schema, in name order.
    pub hash: String,
    /// The hash's first 16 hex digits, shown in `worker_attach`'s description.
    pub stamp: String,
    /// How many tools.
    pub tools: usize,
}

/// The catalog of this build (computed once).
pub fn catalog() -> &'static Catalog {
    static CATALOG: std::sync::OnceLock<Catalog> = std::sync::OnceLock::new();
    CATALOG.get_or_init(|| {
        use sha2::{Digest, Sha256};
        let mut tools = Tools::tool_router().list_all();
        tools.sort_by(|a, b| a.name.cmp(&b.name));
        let mut hasher = Sha256::new();
        for tool in &tools {
            let schemas = serde_json::json!([tool.input_schema, tool.output_schema]);
            hasher.update(format!("{}\n{schemas}\n", tool.name).as_bytes());
        }
        let hash: String = hasher.finalize().iter().map(|b| format!("{b:02x}")).collect();
        Catalog { stamp: hash[..16].to_owned(), hash, tools: tools.len() }
    })
}

/// Refuses a caller whose host lists an older catalog than this daemon's,
/// and records that against the worker it would attach (a setup state the
/// pool shows in `runtime_status`, not the worker's failure).
fn check_catalog(plane: &ControlPlane, worker_id: &WorkerId, stamp: Option<&str>) -> Result<(), Error> {
    let current = &catalog().stamp;
    let Some(stamp) = stamp.filter(|s| s != current) else { return Ok(()) };
    // A stamp is 16 hex digits; anything else is refused before it can reach the log.
    if stamp.len() > CATALOG_STAMP_MAX {
        return Err(Error::TooLarge { field: "catalog", len: stamp.len(), max: CATALOG_STAMP_MAX });
    }
    if !stamp.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(Error::InvalidArgument("catalog is the 16-digit stamp shown in this tool's description".into()));
    }
    let detail = format!(
        "ChatGPT lists this daemon's tools from catalog {stamp}, the daemon serves {current}: \
         refresh the app in ChatGPT (Settings → Apps → the orchestrator's app → Refresh), then retry"
    );
    let code = protocol::ErrorCode::HostAppStale;
    plane.execute(Command::HostState { worker_id: worker_id.clone(), code, detail: detail.clone() })?;
    Err(Error::HostAppStale(detail))
}

/// A work report, fenced by the follow-up it names when it names one.
fn answering(followup: Option<u32>, report: Command) -> Command {
    match followup {
        Some(followup) => Command::Answering { followup, report: Box::new(report) },
        None => report,
    }
}

/// A page size as asked: 1–500 events (default 100); over the bound is
/// `TOO_LARGE`, never silently cut.
fn page_limit(limit: Option<usize>) -> Result<usize, Error> {
    match limit.unwrap_or(DEFAULT_PAGE) {
        0 => Err(Error::InvalidArgument("limit is 1-500".into())),
        n if n > protocol::limits::EVENTS_PAGE_MAX => {
            Err(Error::TooLarge { field: "limit", len: n, max: protocol::limits::EVENTS_PAGE_MAX })
        }
        n => Ok(n),
    }
}

/// The longest catalog stamp accepted (stamps are 16 hex digits).
const CATALOG_STAMP_MAX: usize = 64;

/// `runtime_status` output: the pool's readiness and the tool catalog.
#[derive(Debug, Serialize, JsonSchema)]
pub struct StatusOut {
    /// The pool.
    #[serde(flatten)]
    pub status: pool::Status,
    /// The tool catalog this daemon serves.
    pub catalog: Catalog,
}

/// `worker_attach` output.
#[derive(Debug, Serialize, JsonSchema)]
pub struct WorkerAttachOut {
    /// You.
    pub worker: WorkerView,
    /// Your run.
    pub run_id: RunId,
    /// Your capability: pass it as `capability` to every other tool.
    pub capability: String,
    /// Your authoritative task.
    pub assignment: Assignment,
    /// Further instructions from root, oldest first: follow-up
    /// `followups_from`, then the next, up to the newest. The oldest are left
    /// out only when all would not fit one response (their
    /// `worker.followup` events still hold them).
    pub followups: Vec<String>,
    /// The number of the first follow-up listed (1 unless older ones were left out).
    pub followups_from: u32,
    /// How to work with the orchestrator.
    pub instructions: String,
}

/// `worker_list` output.
#[derive(Debug, Serialize, JsonSchema)]
pub struct WorkerListOut {
    /// Every worker of the run, root first.
    pub workers: Vec<WorkerView>,
}

/// `worker_progress` arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WorkerProgressArgs {
    /// Your capability.
    pub capability: String,
    /// Optional: your own worker id; any other id is refused.
    #[serde(default)]
    #[schemars(with = "Option<WorkerId>")]
    pub worker_id: Option<String>,
    /// What you did or are doing.
    pub summary: String,
    /// Rough completion, 0-100.
    #[serde(default)]
    pub percent: Option<u8>,
    /// The follow-up number this reports on (0: the original assignment), as
    /// the wake prompt names it; a report on superseded work is refused.
    #[serde(default)]
    pub followup: Option<u32>,
}

/// Output of tools that change one worker.
#[derive(Debug, Serialize, JsonSchema)]
pub struct WorkerOut {
    /// The worker after the change.
    pub worker: WorkerView,
    /// The run's state after the change.
    pub run_state: RunState,
    /// The run's cursor after the change.
    pub cursor: u64,
}

/// `worker_complete` arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WorkerCompleteArgs {
    /// Your capability. Root completing completes the run once every worker is finished.
    pub capability: String,
    /// Optional: your own worker id; any other id is refused.
    #[serde(default)]
    #[schemars(with = "Option<WorkerId>")]
    pub worker_id: Option<String>,
    /// What you delivered.
    pub summary: String,
    /// References to what you produced (paths, commits, URLs).
    #[serde(default)]
    pub artifacts: Vec<String>,
    /// The follow-up number this reports on (0: the original assignment), as
    /// the wake prompt names it; a report on superseded work is refused.
    #[serde(default)]
    pub followup: Option<u32>,
}

/// `worker_fail` arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WorkerFailArgs {
    /// Your capability. Root failing fails the run and cancels its workers.
    pub capability: String,
    /// Optional: your own worker id; any other id is refused.
    #[serde(default)]
    #[schemars(with = "Option<WorkerId>")]
    pub worker_id: Option<String>,
    /// Why you cannot finish.
    pub reason: String,
    /// The follow-up number this reports on (0: the original assignment), as
    /// the wake prompt names it; a report on superseded work is refused.
    #[serde(default)]
    pub followup: Option<u32>,
}

/// `worker_interrupt` arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WorkerInterruptArgs {
    /// Root's capability.
    pub capability: String,
    /// The worker to stop.
    #[schemars(with = "WorkerId")]
    pub worker_id: String,
    /// Why.
    pub reason: String,
}

/// `worker_followup` arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WorkerFollowupArgs {
    /// Root's capability.
    pub capability: String,
    /// The worker to reopen (running, waiting, completed or failed).
    #[schemars(with = "WorkerId")]
    pub worker_id: String,
    /// What to do next.
    pub instructions: String,
    /// Replaying the same key with the same arguments does not add a second follow-up.
    #[serde(default)]
    pub idempotency_key: Option<String>,
}

/// `worker_followup` output.
#[derive(Debug, Serialize, JsonSchema)]
pub struct WorkerFollowupOut {
    /// The worker after the change.
    pub worker: WorkerView,
    /// This follow-up's number for the worker, from 1.
    pub seq: u32,
}

/// `message_send` arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MessageSendArgs {
    /// Your capability.
    pub capability: String,
    /// Recipient: a worker id, or a path such as `/root`. Workers may write to root only.
    pub to: String,
    /// Kind: question and blocker make you wait; answer and correction release a waiting recipient.
    pub kind: MessageKind,
    /// The message.
    pub body: String,
    /// The message (addressed to you) this one answers.
    #[serde(default)]
    #[schemars(with = "Option<MessageId>")]
    pub in_reply_to: Option<String>,
    /// Replaying the same key with the same arguments sends nothing new.
    #[serde(default)]
    pub idempotency_key: Option<String>,
}

/// `message_send` output.
#[derive(Debug, Serialize, JsonSchema)]
pub struct MessageSendOut {
    /// The message.
    pub message_id: MessageId,
    /// The recipient.
    pub to: WorkerId,
}

/// `message_broadcast` arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MessageBroadcastArgs {
    /// Root's capability.
    pub capability: String,
    /// Kind of message.
    pub kind: MessageKind,
    /// The message, sent to every unfinished worker.
    pub body: String,
    /// Replaying the same key with the same arguments sends nothing new.
    #[serde(default)]
    pub idempotency_key: Option<String>,
}

/// `message_broadcast` output.
#[derive(Debug, Serialize, JsonSchema)]
pub struct MessageBroadcastOut {
    /// One message per recipient (the same ids on an idempotent replay).
    pub message_ids: Vec<MessageId>,
}

/// `events_wait` arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EventsWaitArgs {
    /// Your capability. Root sees the whole run; a worker sees its own events and its mail.
    pub capability: String,
    /// Return events after this cursor (0 for the beginning); pass back the `cursor` you got.
    pub after_cursor: u64,
    /// How long to wait for something new, in ms; at most 50000 (hosts time tool calls out at about 60 s).
    #[serde(default)]
    pub timeout_ms: Option<u64>,
    /// Most events to return (1-500, default 100).
    #[serde(default)]
    pub limit: Option<usize>,
}

/// `events_list` arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EventsListArgs {
    /// Your capability. Root sees the whole run; a worker sees its own events and its mail.
    pub capability: String,
    /// Return events after this cursor (default 0, the beginning).
    #[serde(default)]
    pub after_cursor: u64,
    /// Most events to return (1-500, default 100).
    #[serde(default)]
    pub limit: Option<usize>,
}

/// `events_wait` and `events_list` output.
#[derive(Debug, Serialize, JsonSchema)]
pub struct EventsOut {
    /// Pass this back as `after_cursor` to continue.
    pub cursor: u64,
    /// Events in cursor order.
    pub events: Vec<Event>,
    /// True when a wait ended at its bound with nothing new.
    pub timed_out: bool,
}

impl From<Page> for EventsOut {
    fn from(p: Page) -> Self {
        Self { cursor: p.cursor, events: p.events, timed_out: p.timed_out }
    }
}

const DEFAULT_PAGE: usize = 100;
const DEFAULT_WAIT_MS: u64 = 25_000;

const WORKER_INSTRUCTIONS: &str = "Work on your assignment. Report milestones with worker_progress. \
Ask root with message_send (to \"/root\", kind question or blocker) and read replies with events_wait \
(pass back the cursor it returns). Finish with worker_complete (summary, artifacts) or worker_fail (reason).";

const SERVER_INSTRUCTIONS: &str = "ChatGPT Orchestrator. As root: run_create, then worker_spawn for each \
parallel task (each gets its own conversation), then loop on events_wait to answer questions \
(message_send kind answer, in_reply_to the question) and watch completion; worker_followup gives a finished \
worker more work; worker_complete with root's capability closes the run. As a worker: worker_attach with the \
attach identity from your bootstrap prompt, then follow its instructions.";

/// `runtime_ensure` and `runtime_scale` arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DesiredArgs {
    /// Root's capability.
    pub capability: String,
    /// How many parked workers the pool should hold (at most the configured maximum, default 16).
    pub desired_workers: u32,
}

/// Output of the pool's mutating tools.
#[derive(Debug, Serialize, JsonSchema)]
pub struct PoolOut {
    /// What this call did.
    pub outcome: pool::Outcome,
    /// The pool afterwards.
    pub status: pool::Status,
}

/// `task_dispatch` arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TaskDispatchArgs {
    /// Root's capability.
    pub capability: String,
    /// The task, delivered to one parked worker.
    pub instructions: String,
    /// A specific slot; default: the lowest parked idle one.
    #[serde(default)]
    pub slot: Option<u32>,
    /// Replaying the same key with the same arguments dispatches nothing new.
    #[serde(default)]
    pub idempotency_key: Option<String>,
}

/// `task_collect` arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TaskCollectArgs {
    /// Root's capability.
    pub capability: String,
    /// The task id from task_dispatch.
    pub task_id: String,
}

/// The MCP tool handler.
#[derive(Clone)]
pub struct Tools {
    plane: Arc<ControlPlane>,
    pool: Arc<pool::Pool>,
    executors: Option<Arc<carrier_webext::Bridge>>,
    peers: Peers,
    tool_router: ToolRouter<Self>,
}

impl Tools {
    fn worker_out(&self, id: &WorkerId) -> Result<WorkerOut, Error> {
        let w = self.plane.worker(id).ok_or_else(|| Error::NotFound(format!("worker {id}")))?;
        let run = self.plane.run(&w.run_id).ok_or_else(|| Error::NotFound(format!("run {}", w.run_id)))?;
        Ok(WorkerOut { worker: WorkerView::from(&w), run_state: run.state, cursor: run.cursor })
    }

    /// Runs a command the caller issues as itself (progress, complete, fail):
    /// authenticates, checks an optional claimed worker id is the caller's own,
    /// commits, and returns the caller's worker afterwards.
    async fn as_self(
        &self,
        capability: String,
        claimed: Option<String>,
        command: impl FnOnce(WorkerId) -> Command + Send + 'static,
    ) -> Result<Json<WorkerOut>, String> {
        let tools = self.clone();
        blocking(move || {
            let me = acting_as(&tools.plane, &capability, claimed.as_deref())?;
            tools.plane.execute(command(me.id.clone()))?;
            tools.worker_out(&me.id)
        })
        .await
    }

    /// Resolves a recipient given as a worker id or a path in `run`.
    fn recipient(&self, run: &RunId, to: &str) -> Result<WorkerId, Error> {
        if to.starts_with('/') {
            return self
                .plane
                .workers_of(run)
                .into_iter()
                .find(|w| w.path == to)
                .map(|w| w.id)
                .ok_or_else(|| Error::NotFound(format!("worker {to} in this run")));
        }
        parse(to)
    }
}

#[tool_router(router = tool_router)]
impl Tools {
    /// A handler over `plane`, its runtime `pool` and, when serving HTTP, the executor bridge.
    pub fn new(
        plane: Arc<ControlPlane>,
        pool: Arc<pool::Pool>,
        executors: Option<Arc<carrier_webext::Bridge>>,
        peers: Peers,
    ) -> Self {
        Self { plane, pool, executors, peers, tool_router: Self::stamped_router() }
    }

    /// The tools, with the catalog stamp in the attach tools' descriptions:
    /// ChatGPT caches the tool list per app, so a stale app shows an old stamp.
    fn stamped_router() -> ToolRouter<Self> {
        let mut router = Self::tool_router();
        let stamp = &catalog().stamp;
        for name in protocol::catalog::STAMPED_TOOLS {
            let tool = &mut router.map.get_mut(name).expect("the attach tools exist").attr;
            let text = tool.description.as_deref().unwrap_or_default();
            tool.description = Some(protocol::catalog::stamp_description(text, stamp).into());
        }
        router
    }

    async fn connected(&self) -> Vec<String> {
        match &self.executors {
            Some(bridge) => bridge.connected().await,
            None => Vec::new(),
        }
    }

    async fn pool_call(
        &self,
        capability: String,
        act: impl FnOnce(&pool::Pool, &Worker) -> Result<pool::Outcome, Error> + Send + 'static,
    ) -> Result<Json<PoolOut>, String> {
        let connected = self.connected().await;
        let alive = self.peers.alive().await;
        let (plane, pool) = (self.plane.clone(), self.pool.clone());
        blocking(move || {
            let root = root_only(&plane, &capability)?;
            let outcome = act(&pool, &root)?;
            Ok(PoolOut { outcome, status: pool.status(&root.run_id, &connected, &|p| alive.contains(p)) })
        })
        .await
    }

    /// The pool's readiness and every slot. Root only; read-only and bounded.
    #[tool(annotations(
        title = "Runtime status",
        read_only_hint = true,
        destructive_hint = false,
        idempotent_hint = true,
        open_world_hint = false
    ))]
    async fn runtime_status(&self, Parameters(args): Parameters<CapabilityArgs>) -> Result<Json<StatusOut>, String> {
        let args = args?;
        let connected = self.connected().await;
        let alive = self.peers.alive().await;
        let (plane, pool) = (self.plane.clone(), self.pool.clone());
        blocking(move || {
            let root = root_only(&plane, &args.capability)?;
            let status = pool.status(&root.run_id, &connected, &|p| alive.contains(p));
            Ok(StatusOut { status, catalog: catalog().clone() })
        })
        .await
    }

    /// Ensure the pool holds desired_workers parked workers, creating only missing ones (idempotent).
    #[tool(annotations(
        title = "Ensure runtime",
        read_only_hint = false,
        destructive_hint = false,
        idempotent_hint = true,
        open_world_hint = true
    ))]
    async fn runtime_ensure(&self, Parameters(args): Parameters<DesiredArgs>) -> Result<Json<PoolOut>, String> {
        let args = args?;
        self.pool_call(args.capability, move |pool, root| pool.ensure(root, args.desired_workers)).await
    }

    /// Scale the pool to desired_workers: add missing workers, or retire safe idle ones (never busy, targeted or uncertain ones).
    #[tool(annotations(
        title = "Scale runtime",
        read_only_hint = false,
        destructive_hint = true,
        idempotent_hint = true,
        open_world_hint = true
    ))]
    async fn runtime_scale(&self, Parameters(args): Parameters<DesiredArgs>) -> Result<Json<PoolOut>, String> {
        let args = args?;
        self.pool_call(args.capability, move |pool, root| pool.scale(root, args.desired_workers)).await
    }

    /// Reopen every lost worker conversation exactly (same logical workers), and create again those refused for a setup state once it is fixed.
    #[tool(annotations(
        title = "Recover runtime",
        read_only_hint = false,
        destructive_hint = false,
        idempotent_hint = true,
        open_world_hint = true
    ))]
    async fn runtime_recover(&self, Parameters(args): Parameters<CapabilityArgs>) -> Result<Json<PoolOut>, String> {
        let args = args?;
        self.pool_call(args.capability, |pool, root| pool.recover(root)).await
    }

    /// Retire every safe idle pool worker (scale to 0, keeping protected ones).
    #[tool(annotations(
        title = "Stop runtime",
        read_only_hint = false,
        destructive_hint = true,
        idempotent_hint = true,
        open_world_hint = true
    ))]
    async fn runtime_stop(&self, Parameters(args): Parameters<CapabilityArgs>) -> Result<Json<PoolOut>, String> {
        let args = args?;
        self.pool_call(args.capability, |pool, root| pool.scale(root, 0)).await
    }

    /// Called by a freshly bootstrapped pool worker conversation with the attach identity from its prompt: admits it to its slot.
    #[tool(annotations(
        title = "Bootstrap pool worker",
        read_only_hint = false,
        destructive_hint = false,
        idempotent_hint = true,
        open_world_hint = false
    ))]
    async fn runtime_bootstrap(
        &self,
        Parameters(args): Parameters<WorkerAttachArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<Json<WorkerAttachOut>, String> {
        let args = args?;
        let peer = self.peers.fingerprint(&ctx);
        let (plane, pool) = (self.plane.clone(), self.pool.clone());
        blocking(move || {
            let id = plane.keys().verify_attach_identity(&args.attach_identity).ok_or(Error::Unauthorized)?;
            plane.worker(&id).ok_or(Error::Unauthorized)?;
            check_catalog(&plane, &id, args.catalog.as_deref())?;
            let w = pool.bootstrap(&args.attach_identity, &peer)?;
            attach_out(&plane, &w.id)
        })
        .await
    }

    /// Give one parked pool worker a task (recorded first, then an exact wake). Root only.
    #[tool(annotations(
        title = "Dispatch task",
        read_only_hint = false,
        destructive_hint = false,
        idempotent_hint = false,
        open_world_hint = true
    ))]
    async fn task_dispatch(&self, Parameters(args): Parameters<TaskDispatchArgs>) -> Result<Json<pool::Task>, String> {
        let args = args?;
        let alive = self.peers.alive().await;
        let (plane, pool) = (self.plane.clone(), self.pool.clone());
        blocking(move || {
            let root = root_only(&plane, &args.capability)?;
            let idem = args.idempotency_key.as_deref();
            pool.dispatch(&root, &args.instructions, args.slot, idem, &|p| alive.contains(p))
        })
        .await
    }

    /// Read a dispatched task's status and result. Root only.
    #[tool(annotations(
        title = "Collect task",
        read_only_hint = true,
        destructive_hint = false,
        idempotent_hint = true,
        open_world_hint = false
    ))]
    async fn task_collect(
        &self,
        Parameters(args): Parameters<TaskCollectArgs>,
    ) -> Result<Json<pool::TaskStatus>, String> {
        let args = args?;
        let (plane, pool) = (self.plane.clone(), self.pool.clone());
        blocking(move || {
            let root = root_only(&plane, &args.capability)?;
            pool.collect(&root, &args.task_id)
        })
        .await
    }

    /// Create a run for one large goal. Returns the run and root's capability.
    #[tool(annotations(
        title = "Create run",
        read_only_hint = false,
        destructive_hint = false,
        idempotent_hint = false,
        open_world_hint = false
    ))]
    async fn run_create(&self, Parameters(args): Parameters<RunCreateArgs>) -> Result<Json<RunCreateOut>, String> {
        let args = args?;
        let plane = self.plane.clone();
        blocking(move || {
            let (run_id, root, created) = plane.create_run_once(&args.title, args.idempotency_key.as_deref())?;
            let run = plane.run(&run_id).ok_or_else(|| Error::NotFound(format!("run {run_id}")))?;
            // A key proves nothing about who replays it: the credential goes to the creator only.
            let root_capability = created.then(|| plane.keys().capability(&root));
            Ok(RunCreateOut { run: RunView::from(&run), root_capability, replayed: !created })
        })
        .await
    }

    /// Read a run and its workers. Root sees every worker; a worker sees itself.
    #[tool(annotations(
        title = "Get run",
        read_only_hint = true,
        destructive_hint = false,
        idempotent_hint = true,
        open_world_hint = false
    ))]
    async fn run_get(&self, Parameters(args): Parameters<CapabilityArgs>) -> Result<Json<RunGetOut>, String> {
        let args = args?;
        let plane = self.plane.clone();
        blocking(move || {
            let me = plane.authenticate(&args.capability)?;
            let run = plane.run(&me.run_id).ok_or_else(|| Error::NotFound(format!("run {}", me.run_id)))?;
            let workers = if me.is_root() { plane.workers_of(&run.id) } else { vec![me] };
            Ok(RunGetOut { run: RunView::from(&run), workers: workers.iter().map(WorkerView::in_list).collect() })
        })
        .await
    }

    /// Cancel the run and every unfinished worker. Root only.
    #[tool(annotations(
        title = "Cancel run",
        read_only_hint = false,
        destructive_hint = true,
        idempotent_hint = false,
        open_world_hint = false
    ))]
    async fn run_cancel(&self, Parameters(args): Parameters<RunCancelArgs>) -> Result<Json<RunGetOut>, String> {
        let args = args?;
        let plane = self.plane.clone();
        blocking(move || {
            let root = root_only(&plane, &args.capability)?;
            plane.execute(Command::CancelRun { actor: root.id.clone(), reason: args.reason })?;
            let run = plane.run(&root.run_id).ok_or_else(|| Error::NotFound(format!("run {}", root.run_id)))?;
            Ok(RunGetOut {
                run: RunView::from(&run),
                workers: plane.workers_of(&run.id).iter().map(WorkerView::in_list).collect(),
            })
        })
        .await
    }

    /// Spawn a worker with its own assignment and conversation. Root only. Returns the bootstrap prompt.
    #[tool(annotations(
        title = "Spawn worker",
        read_only_hint = false,
        destructive_hint = false,
        idempotent_hint = false,
        open_world_hint = false
    ))]
    async fn worker_spawn(
        &self,
        Parameters(args): Parameters<WorkerSpawnArgs>,
    ) -> Result<Json<WorkerSpawnOut>, String> {
        let args = args?;
        let plane = self.plane.clone();
        blocking(move || {
            let root = root_only(&plane, &args.capability)?;
            let id = plane.spawn(&root, &args.name, &args.assignment, args.idempotency_key.as_deref())?;
            let worker = plane.worker(&id).ok_or_else(|| Error::NotFound(format!("worker {id}")))?;
            Ok(WorkerSpawnOut {
                worker: WorkerView::from(&worker),
                bootstrap_prompt: bootstrap_prompt(&plane.keys().attach_identity(&id)),
                bootstrap_version: BOOTSTRAP_VERSION,
            })
        })
        .await
    }

    /// Attach a worker conversation with the attach identity from its bootstrap prompt; returns its capability and assignment.
    #[tool(annotations(
        title = "Attach worker",
        read_only_hint = false,
        destructive_hint = false,
        idempotent_hint = true,
        open_world_hint = false
    ))]
    async fn worker_attach(
        &self,
        Parameters(args): Parameters<WorkerAttachArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<Json<WorkerAttachOut>, String> {
        let args = args?;
        let peer = self.peers.fingerprint(&ctx);
        let (plane, pool) = (self.plane.clone(), self.pool.clone());
        blocking(move || {
            let id = plane.keys().verify_attach_identity(&args.attach_identity).ok_or(Error::Unauthorized)?;
            plane.worker(&id).ok_or(Error::Unauthorized)?;
            check_catalog(&plane, &id, args.catalog.as_deref())?;
            // A pool worker following its bootstrap prompt lands here too: it is
            // admitted exactly as through runtime_bootstrap.
            if plane.with_state(|s| s.runtime.by_worker(&id).is_some()) {
                pool.bootstrap(&args.attach_identity, &peer)?;
            } else {
                plane.execute(Command::Attach { worker_id: id.clone() })?;
            }
            attach_out(&plane, &id)
        })
        .await
    }

    /// List every worker of the run with its state. Root only.
    #[tool(annotations(
        title = "List workers",
        read_only_hint = true,
        destructive_hint = false,
        idempotent_hint = true,
        open_world_hint = false
    ))]
    async fn worker_list(&self, Parameters(args): Parameters<CapabilityArgs>) -> Result<Json<WorkerListOut>, String> {
        let args = args?;
        let plane = self.plane.clone();
        blocking(move || {
            let root = root_only(&plane, &args.capability)?;
            Ok(WorkerListOut { workers: plane.workers_of(&root.run_id).iter().map(WorkerView::in_list).collect() })
        })
        .await
    }

    /// Report your progress.
    #[tool(annotations(
        title = "Report progress",
        read_only_hint = false,
        destructive_hint = false,
        idempotent_hint = false,
        open_world_hint = false
    ))]
    async fn worker_progress(
        &self,
        Parameters(args): Parameters<WorkerProgressArgs>,
    ) -> Result<Json<WorkerOut>, String> {
        let args = args?;
        let followup = args.followup;
        self.as_self(args.capability, args.worker_id, move |me| {
            answering(followup, Command::Progress { actor: me, summary: args.summary, percent: args.percent })
        })
        .await
    }

    /// Report that you finished your assignment. Root completing closes the run once every worker is finished.
    #[tool(annotations(
        title = "Complete",
        read_only_hint = false,
        destructive_hint = false,
        idempotent_hint = false,
        open_world_hint = false
    ))]
    async fn worker_complete(
        &self,
        Parameters(args): Parameters<WorkerCompleteArgs>,
    ) -> Result<Json<WorkerOut>, String> {
        let args = args?;
        let followup = args.followup;
        self.as_self(args.capability, args.worker_id, move |me| {
            answering(followup, Command::Complete { actor: me, summary: args.summary, artifacts: args.artifacts })
        })
        .await
    }

    /// Report that you cannot finish. Root failing fails the run.
    #[tool(annotations(
        title = "Fail",
        read_only_hint = false,
        destructive_hint = true,
        idempotent_hint = false,
        open_world_hint = false
    ))]
    async fn worker_fail(&self, Parameters(args): Parameters<WorkerFailArgs>) -> Result<Json<WorkerOut>, String> {
        let args = args?;
        let followup = args.followup;
        self.as_self(args.capability, args.worker_id, move |me| {
            answering(followup, Command::Fail { actor: me, reason: args.reason })
        })
        .await
    }

    /// Stop a worker's work (it becomes cancelled). Root only.
    #[tool(annotations(
        title = "Interrupt worker",
        read_only_hint = false,
        destructive_hint = true,
        idempotent_hint = false,
        open_world_hint = false
    ))]
    async fn worker_interrupt(
        &self,
        Parameters(args): Parameters<WorkerInterruptArgs>,
    ) -> Result<Json<WorkerOut>, String> {
        let args = args?;
        let tools = self.clone();
        blocking(move || {
            let root = root_only(&tools.plane, &args.capability)?;
            let target: WorkerId = parse(&args.worker_id)?;
            tools.plane.execute(Command::Interrupt { actor: root.id, target: target.clone(), reason: args.reason })?;
            tools.worker_out(&target)
        })
        .await
    }

    /// Give a worker further work in its existing conversation, reopening it if it finished. Root only.
    #[tool(annotations(
        title = "Follow up",
        read_only_hint = false,
        destructive_hint = false,
        idempotent_hint = false,
        open_world_hint = false
    ))]
    async fn worker_followup(
        &self,
        Parameters(args): Parameters<WorkerFollowupArgs>,
    ) -> Result<Json<WorkerFollowupOut>, String> {
        let args = args?;
        let plane = self.plane.clone();
        blocking(move || {
            let root = root_only(&plane, &args.capability)?;
            let target: WorkerId = parse(&args.worker_id)?;
            let seq = plane.followup(&root, &target, &args.instructions, args.idempotency_key.as_deref())?;
            let w = plane.worker(&target).ok_or_else(|| Error::NotFound(format!("worker {target}")))?;
            Ok(WorkerFollowupOut { worker: WorkerView::from(&w), seq })
        })
        .await
    }

    /// Send a durable message. Workers write to root; root writes to any worker.
    #[tool(annotations(
        title = "Send message",
        read_only_hint = false,
        destructive_hint = false,
        idempotent_hint = false,
        open_world_hint = false
    ))]
    async fn message_send(
        &self,
        Parameters(args): Parameters<MessageSendArgs>,
    ) -> Result<Json<MessageSendOut>, String> {
        let args = args?;
        let tools = self.clone();
        blocking(move || {
            let me = tools.plane.authenticate(&args.capability)?;
            let to = tools.recipient(&me.run_id, &args.to)?;
            let reply_to: Option<MessageId> = args.in_reply_to.as_deref().map(parse).transpose()?;
            let id = tools.plane.send(
                &me,
                &to,
                args.kind,
                &args.body,
                reply_to.as_ref(),
                args.idempotency_key.as_deref(),
            )?;
            Ok(MessageSendOut { message_id: id, to })
        })
        .await
    }

    /// Send one message to every unfinished worker. Root only.
    #[tool(annotations(
        title = "Broadcast message",
        read_only_hint = false,
        destructive_hint = false,
        idempotent_hint = false,
        open_world_hint = false
    ))]
    async fn message_broadcast(
        &self,
        Parameters(args): Parameters<MessageBroadcastArgs>,
    ) -> Result<Json<MessageBroadcastOut>, String> {
        let args = args?;
        let plane = self.plane.clone();
        blocking(move || {
            let root = root_only(&plane, &args.capability)?;
            let ids = plane.broadcast(&root, args.kind, &args.body, args.idempotency_key.as_deref())?;
            Ok(MessageBroadcastOut { message_ids: ids })
        })
        .await
    }

    /// Wait (bounded, at most 50 s) for events after a cursor. Returns {cursor, events, timed_out}.
    #[tool(annotations(
        title = "Wait for events",
        read_only_hint = true,
        destructive_hint = false,
        idempotent_hint = true,
        open_world_hint = false
    ))]
    async fn events_wait(&self, Parameters(args): Parameters<EventsWaitArgs>) -> Result<Json<EventsOut>, String> {
        let args = args?;
        let me = match self.plane.authenticate(&args.capability) {
            Ok(me) => me,
            Err(e) => return Err(error_text(&e)),
        };
        let viewer = if me.is_root() { Viewer::Root } else { Viewer::Worker(me.id.clone()) };
        let timeout_ms = args.timeout_ms.unwrap_or(DEFAULT_WAIT_MS);
        if timeout_ms > WAIT_MAX_MS {
            let e = Error::TooLarge { field: "timeout_ms", len: timeout_ms as usize, max: WAIT_MAX_MS as usize };
            return Err(error_text(&e));
        }
        let limit = match page_limit(args.limit) {
            Ok(limit) => limit,
            Err(e) => return Err(error_text(&e)),
        };
        match self.plane.wait(&me.run_id, args.after_cursor, Duration::from_millis(timeout_ms), limit, &viewer).await {
            Ok(page) => Ok(Json(page.into())),
            Err(e) => Err(error_text(&e)),
        }
    }

    /// List events after a cursor without waiting.
    #[tool(annotations(
        title = "List events",
        read_only_hint = true,
        destructive_hint = false,
        idempotent_hint = true,
        open_world_hint = false
    ))]
    async fn events_list(&self, Parameters(args): Parameters<EventsListArgs>) -> Result<Json<EventsOut>, String> {
        let args = args?;
        let plane = self.plane.clone();
        blocking(move || {
            let me = plane.authenticate(&args.capability)?;
            let viewer = if me.is_root() { Viewer::Root } else { Viewer::Worker(me.id.clone()) };
            Ok(plane.events(&me.run_id, args.after_cursor, page_limit(args.limit)?, &viewer)?.into())
        })
        .await
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for Tools {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("chatgpt-orchestrator", env!("CARGO_PKG_VERSION")))
            .with_instructions(SERVER_INSTRUCTIONS)
    }
}
