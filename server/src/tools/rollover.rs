//! Worker rollover as tools: a worker's own checkpoint
//! (`worker_checkpoint`), and root's request that a worker (or a managed
//! root, itself) move to a fresh conversation (`worker_rollover`). When a
//! rollover happens is `control::rollover`'s; what the fresh conversation
//! is told comes back from `worker_attach` as its `continuation`.

use protocol::rollover::RolloverReason;

use super::*;

/// `worker_checkpoint` arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CheckpointArgs {
    /// Your capability.
    pub capability: String,
    /// What is done and next (≤ 8192 bytes).
    pub note: String,
}

/// `worker_rollover` arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RolloverArgs {
    /// Root's capability.
    pub capability: String,
    /// The worker (a managed root: its own id).
    #[schemars(with = "WorkerId")]
    pub worker_id: String,
}

/// A worker's conversation lifecycle, after a rollover tool.
#[derive(Debug, Serialize, JsonSchema)]
pub struct RolloverOut {
    /// The worker.
    pub worker_id: WorkerId,
    /// Rollovers so far.
    pub epoch: u32,
    /// A rollover asked for, not yet made.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rollover_pending: Option<RolloverReason>,
    /// The run's cursor after the change.
    pub cursor: u64,
}

impl Tools {
    fn rollover_out(&self, target: &WorkerId) -> Result<RolloverOut, Error> {
        let w = self.plane.worker(target).ok_or_else(|| Error::from(Refusal::NoWorker(target.clone())))?;
        Ok(RolloverOut {
            worker_id: w.id.clone(),
            epoch: w.epoch,
            rollover_pending: w.rollover.map(|(reason, _)| reason),
            cursor: self.plane.run(&w.run_id).map_or(0, |r| r.cursor),
        })
    }
}

#[tool_router(router = rollover_tools, vis = "pub(super)")]
impl Tools {
    /// Record what is done and what is next; a fresh conversation of yours reads it after a rollover.
    #[tool(annotations(
        title = "Checkpoint",
        read_only_hint = false,
        destructive_hint = false,
        idempotent_hint = true,
        open_world_hint = false
    ))]
    async fn worker_checkpoint(
        &self,
        Parameters(args): Parameters<CheckpointArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<Json<RolloverOut>, ToolError> {
        let args = args?;
        self.prove(&ctx, &args.capability, "worker_checkpoint").await?;
        let tools = self.clone();
        on_blocking_pool(move || {
            // Again, just before the change: the conversation may have been
            // retired while the call waited for attribution.
            let me = tools.plane.authenticate(&args.capability)?;
            tools.plane.execute(Request::Checkpoint { actor: me.id.clone(), note: args.note })?;
            tools.rollover_out(&me.id)
        })
        .await
    }

    /// Move a worker to a fresh conversation (it checkpoints first; the old one is retired). Root only.
    #[tool(annotations(
        title = "Roll over worker",
        read_only_hint = false,
        destructive_hint = false,
        idempotent_hint = true,
        open_world_hint = false
    ))]
    async fn worker_rollover(
        &self,
        Parameters(args): Parameters<RolloverArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<Json<RolloverOut>, ToolError> {
        let args = args?;
        self.prove(&ctx, &args.capability, "worker_rollover").await?;
        let tools = self.clone();
        on_blocking_pool(move || {
            let root = root_only(&tools.plane, &args.capability)?;
            let target: WorkerId = parse(&args.worker_id)?;
            tools.plane.ask_rollover(&root.id, &target)?;
            tools.rollover_out(&target)
        })
        .await
    }
}
