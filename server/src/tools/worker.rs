//! Worker tools: `worker_spawn`, `worker_list`, `worker_progress`,
//! `worker_complete`, `worker_fail`, `worker_stop`, `worker_followup`.

use super::*;

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
    /// Model to pin, the picker's label; unset: the default.
    #[serde(default)]
    pub model: Option<String>,
    /// Effort to pin with it ("Pro").
    #[serde(default)]
    pub effort: Option<String>,
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

/// A work report, fenced by the follow-up it names, or else by its turn's.
fn answering(followup: Option<u32>, report: Request) -> Request {
    Request::Answering { followup, report: Box::new(report) }
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
    /// The follow-up this reports on (0: the assignment); superseded work is refused.
    #[serde(default)]
    pub followup: Option<u32>,
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
    /// The follow-up this reports on (0: the assignment); superseded work is refused.
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
    /// The follow-up this reports on (0: the assignment); superseded work is refused.
    #[serde(default)]
    pub followup: Option<u32>,
}

/// `worker_stop` arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WorkerStopArgs {
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

#[tool_router(router = worker_tools, vis = "pub(super)")]
impl Tools {
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
        ctx: RequestContext<RoleServer>,
    ) -> Result<Json<WorkerSpawnOut>, ToolError> {
        let args = args?;
        self.prove(&ctx, &args.capability, "worker_spawn").await?;
        let plane = self.plane.clone();
        on_blocking_pool(move || -> Result<_, Error> {
            let root = root_only(&plane, &args.capability)?;
            let (model, effort) = (args.model.as_deref(), args.effort.as_deref());
            let idem = args.idempotency_key.as_deref();
            let id = plane.spawn_pinned_with(&root, &args.name, &args.assignment, model, effort, idem)?;
            let worker = plane.worker(&id).ok_or_else(|| Error::from(Refusal::NoWorker(id.clone())))?;
            Ok(WorkerSpawnOut {
                worker: WorkerView::from(&worker),
                bootstrap_prompt: bootstrap_prompt(&plane.keys().attach_identity(&id)),
                bootstrap_version: BOOTSTRAP_VERSION,
            })
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
    async fn worker_list(
        &self,
        Parameters(args): Parameters<CapabilityArgs>,
    ) -> Result<Json<WorkerListOut>, ToolError> {
        let args = args?;
        self.not_blocked(&args.capability)?;
        let plane = self.plane.clone();
        let live = self.connected().await;
        on_blocking_pool(move || -> Result<_, Error> {
            let root = root_only(&plane, &args.capability)?;
            let workers = plane.workers_of(&root.run_id);
            Ok(WorkerListOut {
                workers: workers.iter().map(|w| WorkerView::in_list_waiting(&plane, w, &live)).collect(),
            })
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
        ctx: RequestContext<RoleServer>,
    ) -> Result<Json<WorkerOut>, ToolError> {
        let args = args?;
        self.prove(&ctx, &args.capability, "worker_progress").await?;
        let followup = args.followup;
        self.as_self(args.capability, args.worker_id, move |me| {
            answering(followup, Request::Progress { actor: me, summary: args.summary, percent: args.percent })
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
        ctx: RequestContext<RoleServer>,
    ) -> Result<Json<WorkerOut>, ToolError> {
        let args = args?;
        self.prove(&ctx, &args.capability, "worker_complete").await?;
        let followup = args.followup;
        self.as_self(args.capability, args.worker_id, move |me| {
            answering(followup, Request::Complete { actor: me, summary: args.summary, artifacts: args.artifacts })
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
    async fn worker_fail(
        &self,
        Parameters(args): Parameters<WorkerFailArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<Json<WorkerOut>, ToolError> {
        let args = args?;
        self.prove(&ctx, &args.capability, "worker_fail").await?;
        let followup = args.followup;
        self.as_self(args.capability, args.worker_id, move |me| {
            answering(followup, Request::Fail { actor: me, reason: args.reason })
        })
        .await
    }

    /// Stop a worker for good (it becomes cancelled; nothing resumes it). Not a pause. Root only.
    #[tool(annotations(
        title = "Stop worker",
        read_only_hint = false,
        destructive_hint = true,
        idempotent_hint = false,
        open_world_hint = false
    ))]
    async fn worker_stop(
        &self,
        Parameters(args): Parameters<WorkerStopArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<Json<WorkerOut>, ToolError> {
        let args = args?;
        self.prove(&ctx, &args.capability, "worker_stop").await?;
        let tools = self.clone();
        on_blocking_pool(move || {
            let root = root_only(&tools.plane, &args.capability)?;
            let target: WorkerId = parse(&args.worker_id)?;
            tools.plane.execute(Request::Interrupt { actor: root.id, target: target.clone(), reason: args.reason })?;
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
        ctx: RequestContext<RoleServer>,
    ) -> Result<Json<WorkerFollowupOut>, ToolError> {
        let args = args?;
        self.prove(&ctx, &args.capability, "worker_followup").await?;
        let plane = self.plane.clone();
        on_blocking_pool(move || -> Result<_, Error> {
            let root = root_only(&plane, &args.capability)?;
            let target: WorkerId = parse(&args.worker_id)?;
            let seq = plane.followup(&root, &target, &args.instructions, args.idempotency_key.as_deref())?;
            let w = plane.worker(&target).ok_or_else(|| Error::from(Refusal::NoWorker(target.clone())))?;
            Ok(WorkerFollowupOut { worker: WorkerView::from(&w), seq })
        })
        .await
    }
}
