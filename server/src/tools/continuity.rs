//! Execution Continuity tools: a worker declares its own wait
//! (`worker_await_human`, `worker_await_dependency`); root steers
//! (`worker_pause`, `worker_resume`, `worker_continue_now`,
//! `worker_continuation_get`/`_set`, `run_continuation_set_default`).
//! Pause is not stop: a paused worker is unfinished and keeps its
//! conversation; `worker_stop` stops (cancels) one.

use protocol::WorkerDisposition;
use protocol::continuity::AttemptReason;
use protocol::continuity::{ContinuationPolicy, Hold};

use super::*;

/// `worker_await_human` and `worker_await_dependency` arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AwaitArgs {
    /// Your capability.
    pub capability: String,
    /// Optional: your own worker id; any other id is refused.
    #[serde(default)]
    #[schemars(with = "Option<WorkerId>")]
    pub worker_id: Option<String>,
    /// What you wait for: the question for a person, or the dependency.
    pub reason: String,
}

/// `worker_await_human` arguments (seed §14.1).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AwaitHumanArgs {
    /// Your capability.
    pub capability: String,
    /// Optional: your own worker id; any other id is refused.
    #[serde(default)]
    #[schemars(with = "Option<WorkerId>")]
    pub worker_id: Option<String>,
    /// The question for a person, in one or two sentences.
    pub reason: String,
    /// Optional answers to offer (at most 8, each at most 200 bytes).
    #[serde(default)]
    pub choices: Vec<String>,
    /// Optional: what a person needs to know to answer (at most 4096 bytes).
    #[serde(default)]
    pub context: Option<String>,
}

/// Root names one worker.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TargetArgs {
    /// Root's capability (a worker may `worker_resume` itself).
    pub capability: String,
    /// The worker.
    #[schemars(with = "WorkerId")]
    pub worker_id: String,
}

/// `worker_pause` arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PauseArgs {
    /// Root's capability.
    pub capability: String,
    /// The worker: its current turn may finish, no next one starts.
    #[schemars(with = "WorkerId")]
    pub worker_id: String,
    /// Why, for the record.
    #[serde(default)]
    pub reason: String,
}

/// `worker_continuation_set` arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ContinuationSetArgs {
    /// Root's capability.
    pub capability: String,
    /// The worker (root included).
    #[schemars(with = "WorkerId")]
    pub worker_id: String,
    /// The whole policy; omitted fields take their defaults.
    pub policy: ContinuationPolicy,
}

/// `run_continuation_set_default` arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RunDefaultArgs {
    /// Root's capability.
    pub capability: String,
    /// The policy workers spawned from now on start with; omitted fields take their defaults.
    pub policy: ContinuationPolicy,
}

/// Output of the tools that change a worker's continuity: compact, since
/// every tool's output schema is part of every conversation's context.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ContinuityChanged {
    /// The worker.
    pub worker_id: WorkerId,
    /// Its lifecycle state.
    pub state: WorkerState,
    /// Whether it is meant to get another turn.
    pub disposition: WorkerDisposition,
    /// What holds its automatic turns, if anything.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hold: Option<Hold>,
    /// The run's cursor after the change.
    pub cursor: u64,
}

impl Tools {
    /// Commits `request` and shows the target worker afterwards.
    fn continuity_changed(&self, request: Request, target: &WorkerId) -> Result<ContinuityChanged, Error> {
        self.plane.execute(request)?;
        let w = self.plane.worker(target).ok_or_else(|| Error::from(Refusal::NoWorker(target.clone())))?;
        let cursor = self.plane.run(&w.run_id).map_or(0, |r| r.cursor);
        Ok(ContinuityChanged {
            worker_id: w.id.clone(),
            state: w.state,
            disposition: w.continuity.disposition(w.state),
            hold: w.continuity.hold,
            cursor,
        })
    }

    /// A command the caller issues about itself (its own wait).
    async fn own_hold(
        &self,
        args: AwaitArgs,
        hold: Hold,
        ask: Option<protocol::operator::Ask>,
    ) -> Result<Json<ContinuityChanged>, ToolError> {
        let tools = self.clone();
        on_blocking_pool(move || {
            let me = acting_as(&tools.plane, &args.capability, args.worker_id.as_deref())?;
            let request =
                Request::SetHold { actor: me.id.clone(), target: me.id.clone(), hold, reason: args.reason, ask };
            tools.continuity_changed(request, &me.id)
        })
        .await
    }
}

/// A worker's continuity as tools show it.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ContinuationOut {
    /// The worker.
    pub worker_id: WorkerId,
    /// Its policy.
    pub policy: ContinuationPolicy,
    /// Whether it is meant to get another turn.
    pub disposition: WorkerDisposition,
    /// What holds its automatic turns.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hold: Option<Hold>,
    /// Attempts scheduled (resumes, checkpoints).
    pub attempts: u32,
    /// What started the latest.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_reason: Option<AttemptReason>,
    /// A continuation command is queued or submitting.
    pub in_flight: bool,
    /// A turn is asked for, not yet delivered.
    pub pending: bool,
    /// Consecutive attempts without progress.
    pub attempts_without_progress: u32,
    /// Last progress (ms since epoch).
    pub last_progress_at_ms: u64,
    /// Last continuation submitted (ms since epoch).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_submitted_at_ms: Option<u64>,
}

impl ContinuationOut {
    fn of(worker: &Worker) -> Self {
        let c = &worker.continuity;
        Self {
            worker_id: worker.id.clone(),
            policy: c.policy,
            disposition: c.disposition(worker.state),
            hold: c.hold,
            attempts: c.attempts,
            last_reason: c.last_reason,
            in_flight: c.in_flight.is_some(),
            pending: c.intent.is_some(),
            attempts_without_progress: c.progress.attempts_without,
            last_progress_at_ms: c.progress.last_at_ms,
            last_submitted_at_ms: c.last_submitted_at_ms,
        }
    }
}

#[tool_router(router = continuity_tools, vis = "pub(super)")]
impl Tools {
    /// Declare that a person must act before you can go on (you will not be resumed automatically). Give the question.
    #[tool(annotations(
        title = "Await a person",
        read_only_hint = false,
        destructive_hint = false,
        idempotent_hint = true,
        open_world_hint = false
    ))]
    async fn worker_await_human(
        &self,
        Parameters(args): Parameters<AwaitHumanArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<Json<ContinuityChanged>, ToolError> {
        let args = args?;
        self.prove(&ctx, &args.capability, "worker_await_human").await?;
        let ask = protocol::operator::Ask { choices: args.choices, context: args.context };
        let wait = AwaitArgs { capability: args.capability, worker_id: args.worker_id, reason: args.reason };
        self.own_hold(wait, Hold::AwaitingHuman, Some(ask)).await
    }

    /// Declare that another worker or system must change before you can go on. Name the dependency.
    #[tool(annotations(
        title = "Await a dependency",
        read_only_hint = false,
        destructive_hint = false,
        idempotent_hint = true,
        open_world_hint = false
    ))]
    async fn worker_await_dependency(
        &self,
        Parameters(args): Parameters<AwaitArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<Json<ContinuityChanged>, ToolError> {
        let args = args?;
        self.prove(&ctx, &args.capability, "worker_await_dependency").await?;
        self.own_hold(args, Hold::AwaitingDependency, None).await
    }

    /// Pause a worker's automatic turns after its current one (it stays unfinished; not a stop). Root only.
    #[tool(annotations(
        title = "Pause worker",
        read_only_hint = false,
        destructive_hint = false,
        idempotent_hint = true,
        open_world_hint = false
    ))]
    async fn worker_pause(
        &self,
        Parameters(args): Parameters<PauseArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<Json<ContinuityChanged>, ToolError> {
        let args = args?;
        self.prove(&ctx, &args.capability, "worker_pause").await?;
        let tools = self.clone();
        on_blocking_pool(move || {
            let root = root_only(&tools.plane, &args.capability)?;
            let target: WorkerId = parse(&args.worker_id)?;
            let hold = Request::SetHold {
                actor: root.id,
                target: target.clone(),
                hold: Hold::Paused,
                reason: args.reason,
                ask: None,
            };
            tools.continuity_changed(hold, &target)
        })
        .await
    }

    /// Release a worker's hold (pause, stall, wait for a person or dependency); an idle Auto worker is then resumed.
    #[tool(annotations(
        title = "Resume worker",
        read_only_hint = false,
        destructive_hint = false,
        idempotent_hint = true,
        open_world_hint = false
    ))]
    async fn worker_resume(
        &self,
        Parameters(args): Parameters<TargetArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<Json<ContinuityChanged>, ToolError> {
        let args = args?;
        self.prove(&ctx, &args.capability, "worker_resume").await?;
        let tools = self.clone();
        on_blocking_pool(move || {
            let me = tools.plane.authenticate(&args.capability)?;
            let target: WorkerId = parse(&args.worker_id)?;
            tools.continuity_changed(Request::ReleaseHold { actor: me.id, target: target.clone() }, &target)
        })
        .await
    }

    /// Give a worker one turn now (clears a pause; never a second while one is pending). Root only.
    #[tool(annotations(
        title = "Continue now",
        read_only_hint = false,
        destructive_hint = false,
        idempotent_hint = true,
        open_world_hint = false
    ))]
    async fn worker_continue_now(
        &self,
        Parameters(args): Parameters<TargetArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<Json<ContinuityChanged>, ToolError> {
        let args = args?;
        self.prove(&ctx, &args.capability, "worker_continue_now").await?;
        let tools = self.clone();
        on_blocking_pool(move || {
            let root = root_only(&tools.plane, &args.capability)?;
            let target: WorkerId = parse(&args.worker_id)?;
            tools.continuity_changed(Request::ContinueNow { actor: root.id, target: target.clone() }, &target)
        })
        .await
    }

    /// A worker's continuation policy, disposition, attempts and stall counters. Root only.
    #[tool(annotations(
        title = "Continuation",
        read_only_hint = true,
        destructive_hint = false,
        idempotent_hint = true,
        open_world_hint = false
    ))]
    async fn worker_continuation_get(
        &self,
        Parameters(args): Parameters<TargetArgs>,
    ) -> Result<Json<ContinuationOut>, ToolError> {
        let args = args?;
        self.not_blocked(&args.capability)?;
        let plane = self.plane.clone();
        on_blocking_pool(move || -> Result<_, Error> {
            let root = root_only(&plane, &args.capability)?;
            let target: WorkerId = parse(&args.worker_id)?;
            let worker = plane
                .worker(&target)
                .filter(|w| w.run_id == root.run_id)
                .ok_or_else(|| Error::from(Refusal::NoWorkerInRun(target.clone())))?;
            Ok(ContinuationOut::of(&worker))
        })
        .await
    }

    /// Set a worker's continuation policy (mode auto resumes it when its turn ends unfinished). Root only.
    #[tool(annotations(
        title = "Set continuation",
        read_only_hint = false,
        destructive_hint = false,
        idempotent_hint = true,
        open_world_hint = false
    ))]
    async fn worker_continuation_set(
        &self,
        Parameters(args): Parameters<ContinuationSetArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<Json<ContinuityChanged>, ToolError> {
        let args = args?;
        self.prove(&ctx, &args.capability, "worker_continuation_set").await?;
        let tools = self.clone();
        on_blocking_pool(move || {
            let root = root_only(&tools.plane, &args.capability)?;
            let target: WorkerId = parse(&args.worker_id)?;
            let set = Request::SetContinuation { actor: root.id, target: Some(target.clone()), policy: args.policy };
            tools.continuity_changed(set, &target)
        })
        .await
    }

    /// Set the continuation policy that workers spawned from now on start with. Root only.
    #[tool(annotations(
        title = "Set run continuation default",
        read_only_hint = false,
        destructive_hint = false,
        idempotent_hint = true,
        open_world_hint = false
    ))]
    async fn run_continuation_set_default(
        &self,
        Parameters(args): Parameters<RunDefaultArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<Json<RunDefaultOut>, ToolError> {
        let args = args?;
        self.prove(&ctx, &args.capability, "run_continuation_set_default").await?;
        let plane = self.plane.clone();
        on_blocking_pool(move || -> Result<_, Error> {
            let root = root_only(&plane, &args.capability)?;
            plane.execute(Request::SetContinuation { actor: root.id.clone(), target: None, policy: args.policy })?;
            let run = plane.run(&root.run_id).ok_or_else(|| Error::from(Refusal::NoRun(root.run_id.clone())))?;
            Ok(RunDefaultOut { cursor: run.cursor })
        })
        .await
    }

    /// Pause every unfinished worker of your run after its current turn (you are not paused). Root only.
    #[tool(annotations(
        title = "Pause all workers",
        read_only_hint = false,
        destructive_hint = false,
        idempotent_hint = true,
        open_world_hint = false
    ))]
    async fn run_pause_all(
        &self,
        Parameters(args): Parameters<CapabilityArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<Json<RunHoldsOut>, ToolError> {
        let args = args?;
        self.prove(&ctx, &args.capability, "run_pause_all").await?;
        self.run_holds(args.capability, protocol::operator::Action::PauseAll).await
    }

    /// Resume every paused or stalled worker of your run (not those waiting on a person or dependency). Root only.
    #[tool(annotations(
        title = "Resume all workers",
        read_only_hint = false,
        destructive_hint = false,
        idempotent_hint = true,
        open_world_hint = false
    ))]
    async fn run_resume_all(
        &self,
        Parameters(args): Parameters<CapabilityArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<Json<RunHoldsOut>, ToolError> {
        let args = args?;
        self.prove(&ctx, &args.capability, "run_resume_all").await?;
        self.run_holds(args.capability, protocol::operator::Action::ResumeAll).await
    }
}

impl Tools {
    /// A run-level control as root: the operator surfaces' own rule.
    async fn run_holds(
        &self,
        capability: String,
        action: protocol::operator::Action,
    ) -> Result<Json<RunHoldsOut>, ToolError> {
        let plane = self.plane.clone();
        on_blocking_pool(move || -> Result<_, Error> {
            let root = root_only(&plane, &capability)?;
            let changed = control::operator::run_control(&plane, &root.run_id, &root.id, action)?;
            let run = plane.run(&root.run_id).ok_or_else(|| Error::from(Refusal::NoRun(root.run_id.clone())))?;
            Ok(RunHoldsOut { changed, cursor: run.cursor })
        })
        .await
    }
}

/// `run_pause_all` and `run_resume_all` output.
#[derive(Debug, Serialize, JsonSchema)]
pub struct RunHoldsOut {
    /// How many workers changed (the others were already so).
    pub changed: u32,
    /// The run's cursor after the change.
    pub cursor: u64,
}

/// `run_continuation_set_default` output.
#[derive(Debug, Serialize, JsonSchema)]
pub struct RunDefaultOut {
    /// The run's cursor after the change.
    pub cursor: u64,
}
