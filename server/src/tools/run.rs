//! Run tools: `run_create`, `run_get`, `run_cancel`.

use super::*;

/// `run_create` arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RunCreateArgs {
    /// Short human title of the run's goal.
    pub title: String,
    /// Launch root in a conversation of its own with this objective (Auto Resume resumes it); omit to be root yourself.
    #[serde(default)]
    pub root_objective: Option<String>,
    /// capability_only: workers' calls are not proven to come from their own conversation (for a client no browser sees).
    #[serde(default)]
    pub attribution: protocol::Attribution,
    /// Replayed with the same title: the same run, never the capability again.
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

#[tool_router(router = run_tools, vis = "pub(super)")]
impl Tools {
    /// Create a run for one large goal. Returns the run and root's capability.
    #[tool(annotations(
        title = "Create run",
        read_only_hint = false,
        destructive_hint = false,
        idempotent_hint = false,
        open_world_hint = false
    ))]
    async fn run_create(&self, Parameters(args): Parameters<RunCreateArgs>) -> Result<Json<RunCreateOut>, ToolError> {
        let args = args?;
        let plane = self.plane.clone();
        on_blocking_pool(move || -> Result<_, Error> {
            let idem = args.idempotency_key.as_deref();
            let objective = args.root_objective.as_deref().map(Assignment::from_objective);
            let (run_id, root, created) =
                plane.create_run_with(&args.title, objective.as_ref(), args.attribution, idem)?;
            let run = plane.run(&run_id).ok_or_else(|| Error::from(Refusal::NoRun(run_id.clone())))?;
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
    async fn run_get(&self, Parameters(args): Parameters<CapabilityArgs>) -> Result<Json<RunGetOut>, ToolError> {
        let args = args?;
        self.not_blocked(&args.capability)?;
        let plane = self.plane.clone();
        let live = self.connected().await;
        on_blocking_pool(move || -> Result<_, Error> {
            let me = plane.authenticate(&args.capability)?;
            let run = plane.run(&me.run_id).ok_or_else(|| Error::from(Refusal::NoRun(me.run_id.clone())))?;
            let workers = if me.is_root() { plane.workers_of(&run.id) } else { vec![me] };
            let workers = workers.iter().map(|w| WorkerView::in_list_waiting(&plane, w, &live)).collect();
            Ok(RunGetOut { run: RunView::from(&run), workers })
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
    async fn run_cancel(
        &self,
        Parameters(args): Parameters<RunCancelArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<Json<RunGetOut>, ToolError> {
        let args = args?;
        self.prove(&ctx, &args.capability, "run_cancel").await?;
        let plane = self.plane.clone();
        on_blocking_pool(move || -> Result<_, Error> {
            let root = root_only(&plane, &args.capability)?;
            plane.execute(Request::CancelRun { actor: root.id.clone(), reason: args.reason })?;
            let run = plane.run(&root.run_id).ok_or_else(|| Error::from(Refusal::NoRun(root.run_id.clone())))?;
            Ok(RunGetOut {
                run: RunView::from(&run),
                workers: plane.workers_of(&run.id).iter().map(WorkerView::in_list).collect(),
            })
        })
        .await
    }
}
