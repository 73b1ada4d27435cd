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
//!
//! # Layout
//! One file per tool family, each with its own router (`#[tool_router(router
//! = <family>_tools)]`), composed in [`Tools::new`]: `run`, `worker`,
//! `attach` (with the catalog stamp), `message`, `events`, `runtime` (the
//! pool and its tasks), `continuity`, `rollover`, `ownership`, `caller`. This file holds what every family shares: the
//! handler, authentication (`acting_as`, `root_only`), `on_blocking_pool` (where a
//! control-plane error becomes a `ToolError`) and the views.
//! A new family is one new file and one `+` in `Tools::router`.

use std::sync::Arc;
use std::time::Duration;

use control::decide::{Refusal, Request};
use control::model::{Run, Worker};
use control::plane::{Page, Viewer};
use control::{ControlPlane, Error};
use protocol::limits::{PREVIEW_MAX, RESPONSE_MAX, WAIT_MAX_MS};
use protocol::{Assignment, ErrorCode, Event, MessageId, MessageKind, RunId, RunState, WorkerId, WorkerState};
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::model::{Implementation, ServerCapabilities, ServerConfig};
use rmcp::service::RequestContext;
use rmcp::{Json, RoleServer, ServerHandler, tool, tool_handler, tool_router};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::args::Parameters;
use crate::peers::Peers;
use control::prompts::{BOOTSTRAP_VERSION, bootstrap_prompt};

mod attach;
mod caller;
mod continuity;
mod events;
mod message;
mod ownership;
mod rollover;
mod run;
mod runtime;
mod schema;
mod worker;

pub use attach::{Catalog, catalog};
pub use caller::ATTRIBUTION_WAIT;

/// A refused tool call: a stable code (`docs/errors.md`) and a message.
/// Every tool returns it, and it is rendered in this one place: an
/// `isError` result whose text is `{"code": "FORBIDDEN", "message": "..."}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolError {
    /// The stable code.
    pub code: ErrorCode,
    /// What was wrong, without secrets.
    pub message: String,
}

impl ToolError {
    /// A refusal with `code`.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self { code, message: message.into() }
    }

    /// The rendered text (for the stdio and HTTP edges alike).
    pub fn text(&self) -> String {
        serde_json::json!({ "code": self.code.as_str(), "message": self.message }).to_string()
    }
}

impl From<Error> for ToolError {
    fn from(e: Error) -> Self {
        Self::new(e.code(), e.to_string())
    }
}

impl From<pool::Error> for ToolError {
    fn from(e: pool::Error) -> Self {
        Self::new(e.code(), e.to_string())
    }
}

impl rmcp::model::IntoContents for ToolError {
    fn into_contents(self) -> Vec<rmcp::model::ContentBlock> {
        vec![rmcp::model::ContentBlock::text(self.text())]
    }
}

/// Runs blocking control-plane work (SQLite commits) off the async workers.
/// (Tools spell their return type out as `Result<Json<T>, ToolError>`: rmcp's
/// `#[tool]` reads the output schema from that very shape.)
async fn on_blocking_pool<T: Send + 'static, E: Into<ToolError> + Send + 'static>(
    f: impl FnOnce() -> Result<T, E> + Send + 'static,
) -> Result<Json<T>, ToolError> {
    match tokio::task::spawn_blocking(f).await {
        Ok(result) => result.map(Json).map_err(Into::into),
        Err(join) => Err(ToolError::new(ErrorCode::Internal, join.to_string())),
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
            return Err(Error::from(Refusal::NotYourself));
        }
    }
    Ok(me)
}

fn root_only(plane: &ControlPlane, capability: &str) -> Result<Worker, Error> {
    let me = plane.authenticate(capability)?;
    if !me.is_root() {
        return Err(Error::from(Refusal::RootOnly));
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
    /// capability_only: callers are not proven.
    #[serde(skip_serializing_if = "is_required")]
    pub attribution: protocol::Attribution,
}

fn is_required(a: &protocol::Attribution) -> bool {
    *a == protocol::Attribution::Required
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
            attribution: r.attribution,
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
    /// Whether it is meant to get another turn.
    pub disposition: protocol::WorkerDisposition,
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
    /// What it waits for, with the next step, while it is not working
    /// (a launch waiting on the app setup, an executor, a slot, its attach;
    /// a question waiting for an answer). Set in `worker_list` and `run_get`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub waiting_for: Option<protocol::Waiting>,
    /// True in a list when `last_progress` or `outcome` was cut to its first
    /// 256 bytes (so 256 workers fit one response); the full texts are in
    /// the worker's `worker.progress` / `worker.completed` events.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub shortened: bool,
    /// Context meter (bytes).
    pub context_bytes: u64,
    /// Its pinned model.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,

    /// Last change (ms since epoch).
    pub updated_at_ms: u64,
}

impl From<&Worker> for WorkerView {
    fn from(w: &Worker) -> Self {
        Self {
            worker_id: w.id.clone(),
            path: w.path.clone(),
            state: w.state,
            disposition: w.continuity.disposition(w.state),
            attach_count: w.attach_count,
            followups: w.followups.len() as u32,
            last_progress: w.last_progress.clone(),
            outcome: w.outcome.clone(),
            waiting_for: None,
            shortened: false,
            context_bytes: w.context_bytes,
            model: w.model.clone(),
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

    /// The list view, with what the worker waits for (`live`: the executors with a session).
    fn in_list_waiting(plane: &ControlPlane, w: &Worker, live: &[String]) -> Self {
        Self { waiting_for: plane.waiting_for(w, live), ..Self::in_list(w) }
    }
}

/// Arguments of tools that need only the caller's capability.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CapabilityArgs {
    /// The caller's capability (from run_create or worker_attach).
    pub capability: String,
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

const SERVER_INSTRUCTIONS: &str = "ChatGPT Orchestrator. As root: run_create, then worker_spawn for each \
parallel task (each gets its own conversation), then loop on events_wait to answer questions \
(message_send kind answer, in_reply_to the question) and watch completion; worker_followup gives a finished \
worker more work; worker_complete with root's capability closes the run. As a worker: worker_attach with the \
attach identity from your bootstrap prompt, then follow its instructions.";

/// The MCP tool handler.
#[derive(Clone)]
pub struct Tools {
    plane: Arc<ControlPlane>,
    pool: Arc<pool::Pool>,
    executors: Option<Arc<carrier_webext::Bridge>>,
    peers: Peers,
    /// How long a call waits for an executor to see its request id.
    attribution_wait: Duration,
    /// The Git adapter of worktree ownership (`--worktree-root`); none: ownership is off.
    worktrees: Option<Arc<worktrees::Git>>,
    tool_router: ToolRouter<Self>,
}

/// Whether `id`'s conversation create is still open (queued, sent or
/// acknowledged): its model may call before the executor binds it.
fn create_open(plane: &ControlPlane, id: &WorkerId) -> bool {
    plane.with_state(|s| {
        s.open_commands
            .iter()
            .filter_map(|c| s.commands.get(c))
            .any(|c| c.worker_id == *id && c.intent == protocol::CommandIntent::Create)
    })
}

impl Tools {
    fn worker_out(&self, id: &WorkerId) -> Result<WorkerOut, Error> {
        let w = self.plane.worker(id).ok_or_else(|| Error::from(Refusal::NoWorker(id.clone())))?;
        let run = self.plane.run(&w.run_id).ok_or_else(|| Error::from(Refusal::NoRun(w.run_id.clone())))?;
        Ok(WorkerOut { worker: WorkerView::from(&w), run_state: run.state, cursor: run.cursor })
    }

    /// Runs a command the caller issues as itself (progress, complete, fail):
    /// authenticates, checks an optional claimed worker id is the caller's own,
    /// commits, and returns the caller's worker afterwards.
    async fn as_self(
        &self,
        capability: String,
        claimed: Option<String>,
        command: impl FnOnce(WorkerId) -> Request + Send + 'static,
    ) -> Result<Json<WorkerOut>, ToolError> {
        let tools = self.clone();
        on_blocking_pool(move || {
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
                .ok_or_else(|| Error::from(Refusal::NoPathInRun(to.to_owned())));
        }
        parse(to)
    }
}

impl Tools {
    /// A handler over `plane`, its runtime `pool` and, when serving HTTP, the executor bridge.
    pub fn new(
        plane: Arc<ControlPlane>,
        pool: Arc<pool::Pool>,
        executors: Option<Arc<carrier_webext::Bridge>>,
        peers: Peers,
    ) -> Self {
        Self {
            plane,
            pool,
            executors,
            peers,
            attribution_wait: ATTRIBUTION_WAIT,
            worktrees: None,
            tool_router: Self::shared_router(),
        }
    }

    /// The stamped router, built once per process: a stateless MCP request
    /// makes a handler of its own, and building the routes and their lean
    /// schemas each time cost milliseconds a call (issue 33).
    fn shared_router() -> ToolRouter<Self> {
        static ROUTER: std::sync::OnceLock<ToolRouter<Tools>> = std::sync::OnceLock::new();
        ROUTER.get_or_init(Self::stamped_router).clone()
    }

    /// The same handler, waiting at most `wait` for a call's request id to
    /// be seen (`--attribution-wait-ms`).
    pub fn with_attribution_wait(mut self, wait: Duration) -> Self {
        self.attribution_wait = wait;
        self
    }

    /// The same handler, with worktree ownership over `git` (`--worktree-root`).
    pub fn with_worktrees(mut self, git: Option<Arc<worktrees::Git>>) -> Self {
        self.worktrees = git;
        self
    }

    /// Every family's tools, composed: one router per file of this module,
    /// their schemas made lean and portable ([`schema::lean`]), each
    /// argument typed inline ([`schema::inline_definitions`]).
    fn router() -> ToolRouter<Self> {
        let mut router = Self::run_tools()
            + Self::worker_tools()
            + Self::attach_tools()
            + Self::message_tools()
            + Self::events_tools()
            + Self::runtime_tools()
            + Self::continuity_tools()
            + Self::rollover_tools()
            + Self::ownership_tools()
            + Self::caller_tools();
        for route in router.map.values_mut() {
            let tool = &mut route.attr;
            let input = schema::inline_definitions(tool.input_schema.as_ref().clone());
            tool.input_schema = Arc::new(schema::lean(input));
            tool.output_schema =
                tool.output_schema.take().map(|s| Arc::new(schema::outline(schema::lean(s.as_ref().clone()))));
            // The title (a display name) repeats the tool's name. Every hint
            // stays explicit: clients that gate a call on them must not guess.
            if let Some(a) = tool.annotations.as_mut() {
                a.title = None;
            }
        }
        router
    }

    /// The tools, with the catalog stamp in the attach tools' descriptions:
    /// ChatGPT caches the tool list per app, so a stale app shows an old stamp.
    fn stamped_router() -> ToolRouter<Self> {
        let mut router = Self::router();
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
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for Tools {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("chatgpt-orchestrator", env!("CARGO_PKG_VERSION")))
            .with_instructions(SERVER_INSTRUCTIONS)
    }
}

#[cfg(test)]
mod catalogue {
    use super::*;

    /// The whole `tools/list` a client reads, in bytes.
    fn tools_list_bytes() -> usize {
        serde_json::to_string(&Tools::stamped_router().list_all()).expect("tools serialize").len()
    }

    /// The budget for `tools/list`: 60 KB (about 15k tokens) for 35 tools.
    /// Every worker conversation carries the catalogue in its context, so
    /// growth is a decision: 179.5 KB before the schemas were made lean
    /// (`schema::lean`), then 75–105 KB as tools came (Execution Continuity,
    /// caller attribution, the operator surfaces' run controls), seven
    /// tenths of it output schemas. Outputs now keep their shape only
    /// (`schema::outline`: types, fields, enums) and annotations no title:
    /// 59.3 KB (issue 33). A new tool now comes with a cut elsewhere.
    /// Issue 34 added two tools (rollover), the context meter and the
    /// pinned model to every worker view: 2.4 KB after its own cuts, 62 KB.
    /// Issue 35 added worktree ownership: three tools whose records are
    /// described in brief (`ownership::owner_items`; the full view was
    /// 3.3 KB a tool) and the events tools' `stream`: 3.9 KB, 66 KB.
    /// Issue 47 named each pool slot's host (+190 B in the runtime tools'
    /// outputs), paid for by six shorter descriptions.
    const BUDGET: usize = 66_000;

    #[test]
    fn the_tool_catalogue_stays_under_its_budget() {
        let bytes = tools_list_bytes();
        let mut sizes: Vec<(usize, String)> = Tools::stamped_router()
            .list_all()
            .iter()
            .map(|t| (serde_json::to_string(t).expect("a tool serializes").len(), t.name.to_string()))
            .collect();
        sizes.sort_by(|a, b| b.cmp(a));
        eprintln!("tools/list: {bytes} bytes for {} tools", sizes.len());
        assert!(bytes <= BUDGET, "tools/list is {bytes} bytes, over its budget of {BUDGET}; largest: {sizes:?}");
    }

    /// What the MCP Inspector's portability lint and single-type dialects
    /// ask: one `type` per schema, and arguments that need no `$ref` lookup.
    #[test]
    fn every_schema_has_one_type_and_every_argument_is_inline() {
        fn type_arrays(value: &serde_json::Value, path: &str, found: &mut Vec<String>) {
            match value {
                serde_json::Value::Object(object) => {
                    if object.get("type").is_some_and(serde_json::Value::is_array) {
                        found.push(path.to_owned());
                    }
                    for (key, child) in object {
                        type_arrays(child, &format!("{path}.{key}"), found);
                    }
                }
                serde_json::Value::Array(items) => items.iter().for_each(|item| type_arrays(item, path, found)),
                _ => {}
            }
        }
        let mut found = Vec::new();
        for tool in Tools::stamped_router().list_all() {
            let input = serde_json::to_value(tool.input_schema.as_ref()).expect("a schema serializes");
            assert!(!input.to_string().contains("\"$ref\""), "{}: an argument refers to $defs", tool.name);
            type_arrays(&input, &format!("{}.input", tool.name), &mut found);
            if let Some(output) = &tool.output_schema {
                let output = serde_json::to_value(output.as_ref()).expect("a schema serializes");
                type_arrays(&output, &format!("{}.output", tool.name), &mut found);
            }
        }
        assert!(found.is_empty(), "type arrays at {found:?}");
    }
}
