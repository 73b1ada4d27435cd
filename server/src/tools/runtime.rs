//! The runtime pool: `runtime_status`, `runtime_ensure`, `runtime_scale`,
//! `runtime_recover`, `runtime_stop`, and targeted tasks (`task_dispatch`,
//! `task_collect`).

use super::*;

/// `runtime_status` output: the pool's readiness and the tool catalog.
#[derive(Debug, Serialize, JsonSchema)]
pub struct StatusOut {
    /// The pool.
    #[serde(flatten)]
    pub status: pool::Status,
    /// The tool catalog this daemon serves.
    pub catalog: Catalog,
    /// Which build answers, and which start of it.
    pub deployment: crate::deployment::Identity,
}

/// `runtime_ensure` and `runtime_scale` arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DesiredArgs {
    /// Root's capability.
    pub capability: String,
    /// How many parked workers the pool should hold (at most the configured maximum, default 16).
    pub desired_workers: u32,
    /// Model to pin new workers to, as the picker labels it.
    #[serde(default)]
    pub model: Option<String>,
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

impl Tools {
    async fn pool_call(
        &self,
        capability: String,
        act: impl FnOnce(&pool::Pool, &Worker) -> Result<pool::Outcome, pool::Error> + Send + 'static,
    ) -> Result<Json<PoolOut>, ToolError> {
        let connected = self.connected().await;
        let alive = self.peers.alive().await;
        let (plane, pool) = (self.plane.clone(), self.pool.clone());
        on_blocking_pool(move || -> Result<_, ToolError> {
            let root = root_only(&plane, &capability)?;
            let outcome = act(&pool, &root)?;
            Ok(PoolOut { outcome, status: pool.status(&root.run_id, &connected, &|p| alive.contains(p)) })
        })
        .await
    }
}

#[tool_router(router = runtime_tools, vis = "pub(super)")]
impl Tools {
    /// The pool's readiness and every slot. Root only; read-only and bounded.
    #[tool(annotations(
        title = "Runtime status",
        read_only_hint = true,
        destructive_hint = false,
        idempotent_hint = true,
        open_world_hint = false
    ))]
    async fn runtime_status(&self, Parameters(args): Parameters<CapabilityArgs>) -> Result<Json<StatusOut>, ToolError> {
        let args = args?;
        self.not_blocked(&args.capability)?;
        let connected = self.connected().await;
        let alive = self.peers.alive().await;
        let (plane, pool) = (self.plane.clone(), self.pool.clone());
        on_blocking_pool(move || -> Result<_, Error> {
            let root = root_only(&plane, &args.capability)?;
            let status = pool.status(&root.run_id, &connected, &|p| alive.contains(p));
            Ok(StatusOut { status, catalog: catalog().clone(), deployment: crate::deployment::identity() })
        })
        .await
    }

    /// Ensure the pool holds desired_workers parked workers: lost slots reopened exactly, only missing ones created (idempotent).
    #[tool(annotations(
        title = "Ensure runtime",
        read_only_hint = false,
        destructive_hint = false,
        idempotent_hint = true,
        open_world_hint = true
    ))]
    async fn runtime_ensure(
        &self,
        Parameters(args): Parameters<DesiredArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<Json<PoolOut>, ToolError> {
        let args = args?;
        self.prove(&ctx, &args.capability, "runtime_ensure").await?;
        self.pool_call(args.capability, move |pool, root| {
            pool.ensure_pinned(root, args.desired_workers, args.model.as_deref())
        })
        .await
    }

    /// Scale the pool to desired_workers: add missing workers or retire idle ones (never busy, targeted or uncertain).
    #[tool(annotations(
        title = "Scale runtime",
        read_only_hint = false,
        destructive_hint = true,
        idempotent_hint = true,
        open_world_hint = true
    ))]
    async fn runtime_scale(
        &self,
        Parameters(args): Parameters<DesiredArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<Json<PoolOut>, ToolError> {
        let args = args?;
        self.prove(&ctx, &args.capability, "runtime_scale").await?;
        self.pool_call(args.capability, move |pool, root| {
            pool.scale_pinned(root, args.desired_workers, args.model.as_deref())
        })
        .await
    }

    /// Reopen every lost worker conversation exactly; create again those refused for a setup state once it is fixed.
    #[tool(annotations(
        title = "Recover runtime",
        read_only_hint = false,
        destructive_hint = false,
        idempotent_hint = true,
        open_world_hint = true
    ))]
    async fn runtime_recover(
        &self,
        Parameters(args): Parameters<CapabilityArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<Json<PoolOut>, ToolError> {
        let args = args?;
        self.prove(&ctx, &args.capability, "runtime_recover").await?;
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
    async fn runtime_stop(
        &self,
        Parameters(args): Parameters<CapabilityArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<Json<PoolOut>, ToolError> {
        let args = args?;
        self.prove(&ctx, &args.capability, "runtime_stop").await?;
        self.pool_call(args.capability, |pool, root| pool.scale(root, 0)).await
    }

    /// Give one parked pool worker a task (recorded first, then an exact wake). Root only.
    #[tool(annotations(
        title = "Dispatch task",
        read_only_hint = false,
        destructive_hint = false,
        idempotent_hint = false,
        open_world_hint = true
    ))]
    async fn task_dispatch(
        &self,
        Parameters(args): Parameters<TaskDispatchArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<Json<pool::Task>, ToolError> {
        let args = args?;
        self.prove(&ctx, &args.capability, "task_dispatch").await?;
        let alive = self.peers.alive().await;
        let (plane, pool) = (self.plane.clone(), self.pool.clone());
        on_blocking_pool(move || {
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
    ) -> Result<Json<pool::TaskStatus>, ToolError> {
        let args = args?;
        self.not_blocked(&args.capability)?;
        let (plane, pool) = (self.plane.clone(), self.pool.clone());
        on_blocking_pool(move || {
            let root = root_only(&plane, &args.capability)?;
            pool.collect(&root, &args.task_id)
        })
        .await
    }
}
