//! Attaching a conversation: `worker_attach` (any worker) and
//! `runtime_bootstrap` (a pool worker's admission), and the catalog stamp
//! both check.

use super::*;

/// What an attach returns: everything but the follow-ups fits by the
/// bounds of its parts; the follow-ups are as many of the newest as fit in
/// `RESPONSE_MAX`, so an attach always fits what clients accept.
fn attach_out(plane: &ControlPlane, id: &WorkerId) -> Result<WorkerAttachOut, Error> {
    let w = plane.worker(id).ok_or_else(|| Error::from(Refusal::NoWorker(id.clone())))?;
    let mut out = WorkerAttachOut {
        // Its own long texts cut, as in a list: room for the newest follow-up.
        worker: WorkerView::in_list(&w),
        run_id: w.run_id.clone(),
        capability: plane.keys().capability_at(id, w.epoch),
        assignment: w.assignment.clone().ok_or_else(|| Error::from(Refusal::RootDoesNotAttach))?,
        followups: Vec::new(),
        followups_from: 1,
        instructions: if w.is_root() { ROOT_INSTRUCTIONS } else { WORKER_INSTRUCTIONS }.into(),
        continuation: w.capsule.clone(),
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

/// `worker_attach` arguments.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
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
        let mut tools = Tools::router().list_all();
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

/// The stamp a caller sent, if it is not this daemon's: refused if malformed
/// (a stamp is 16 hex digits; anything else never reaches the log).
fn other_catalog(stamp: Option<&str>) -> Result<Option<&str>, Error> {
    let Some(stamp) = stamp.filter(|s| *s != catalog().stamp) else { return Ok(None) };
    if stamp.len() > CATALOG_STAMP_MAX {
        return Err(Error::TooLarge { field: "catalog", len: stamp.len(), max: CATALOG_STAMP_MAX });
    }
    if !stamp.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(Error::InvalidArgument("catalog is the 16-digit stamp shown in this tool's description".into()));
    }
    Ok(Some(stamp))
}

/// Refuses a caller whose host lists an older catalog than this daemon's,
/// and records that against the worker it would attach (a setup state the
/// pool shows in `runtime_status`, not the worker's failure). Only for a
/// caller already proven to be that worker's conversation: an unproven
/// one changes nothing.
fn check_catalog(plane: &ControlPlane, worker_id: &WorkerId, stamp: Option<&str>) -> Result<(), Error> {
    let current = &catalog().stamp;
    let Some(stamp) = other_catalog(stamp)? else { return Ok(()) };
    let detail = format!(
        "ChatGPT lists this daemon's tools from catalog {stamp}, the daemon serves {current}: \
         refresh the app in ChatGPT (Settings → Apps → the orchestrator's app → Refresh), then retry"
    );
    let code = protocol::ErrorCode::HostAppStale;
    plane.execute(Request::HostState { worker_id: worker_id.clone(), code, detail: detail.clone() })?;
    Err(Error::HostAppStale(detail))
}

/// The longest catalog stamp accepted (stamps are 16 hex digits).
const CATALOG_STAMP_MAX: usize = 64;

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
    /// After a rollover: what your earlier conversations left you. Go on from it.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<serde_json::Map<String, serde_json::Value>>")]
    pub continuation: Option<protocol::rollover::Capsule>,
}

impl Tools {
    /// Both attach tools: the attach identity verified, the caller's catalog
    /// current, then a pool worker admitted (`pool_only`: nothing else is
    /// taken) or any other worker attached.
    async fn attach(
        &self,
        args: WorkerAttachArgs,
        ctx: &RequestContext<RoleServer>,
        pool_only: bool,
    ) -> Result<Json<WorkerAttachOut>, ToolError> {
        let worker = self.plane.attaching(&args.attach_identity)?;
        // Bad input is refused at once, before any wait on attribution; a
        // stale catalog is recorded only once the caller is proven.
        other_catalog(args.catalog.as_deref())?;
        let tool = if pool_only { "runtime_bootstrap" } else { "worker_attach" };
        // Proven from its own conversation, a pool worker is that
        // conversation to admission; otherwise its transport session is.
        let peer = match self.prove_worker(ctx, &worker, tool).await? {
            Some(conversation) => admission::conversation_peer(&conversation),
            None => self.peers.claimant(Peers::session_of(ctx).as_deref()),
        };
        let deadline = tokio::time::Instant::now() + BOOTSTRAP_WAIT;
        let mut changes = self.plane.subscribe_changes();
        loop {
            changes.borrow_and_update();
            let attempt = self.attach_once(&args, peer.clone(), pool_only).await;
            match attempt {
                Err(e) if e.code == protocol::ErrorCode::PeerIdentityUnresolved && self.launching(&args) => {
                    if !matches!(tokio::time::timeout_at(deadline, changes.changed()).await, Ok(Ok(()))) {
                        return Err(e);
                    }
                }
                other => return other,
            }
        }
    }

    /// Whether the worker named by the attach identity still has its
    /// conversation's create open (queued, sent or acknowledged).
    fn launching(&self, args: &WorkerAttachArgs) -> bool {
        let Ok(worker) = self.plane.attaching(&args.attach_identity) else { return false };
        create_open(&self.plane, &worker.id)
    }

    async fn attach_once(
        &self,
        args: &WorkerAttachArgs,
        peer: String,
        pool_only: bool,
    ) -> Result<Json<WorkerAttachOut>, ToolError> {
        let args = args.clone();
        let (plane, pool) = (self.plane.clone(), self.pool.clone());
        on_blocking_pool(move || -> Result<_, ToolError> {
            let id = plane.attaching(&args.attach_identity)?.id;
            check_catalog(&plane, &id, args.catalog.as_deref())?;
            // A pool worker following its bootstrap prompt lands in
            // worker_attach too: it is admitted exactly as through runtime_bootstrap.
            if pool_only || plane.with_state(|s| s.runtime.by_worker(&id).is_some()) {
                pool.bootstrap(&args.attach_identity, &peer)?;
            } else {
                plane.execute(Request::Attach { worker_id: id.clone() })?;
            }
            Ok(attach_out(&plane, &id)?)
        })
        .await
    }
}

/// How long an attach waits for its worker's open create to complete.
const BOOTSTRAP_WAIT: std::time::Duration = std::time::Duration::from_secs(20);

const WORKER_INSTRUCTIONS: &str = "Work on your assignment. Report milestones with worker_progress. \
Ask root with message_send (to \"/root\", kind question or blocker) and read replies with events_wait \
(pass back the cursor it returns). Finish with worker_complete (summary, artifacts) or worker_fail (reason). Give \
every worker_progress, worker_complete and worker_fail the followup number of the work it answers: 0 for the \
assignment, N once you carry out follow-up #N (a report on older work is refused).";

const ROOT_INSTRUCTIONS: &str = "You are root: your assignment is the run's objective. Spawn workers with \
worker_spawn, follow them with events_wait (pass back the cursor it returns), answer with message_send. Finish with \
worker_complete once the objective is met (the run completes when its workers have) or worker_fail.";

#[tool_router(router = attach_tools, vis = "pub(super)")]
impl Tools {
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
    ) -> Result<Json<WorkerAttachOut>, ToolError> {
        self.attach(args?, &ctx, true).await
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
    ) -> Result<Json<WorkerAttachOut>, ToolError> {
        self.attach(args?, &ctx, false).await
    }
}
