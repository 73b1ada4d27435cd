//! Who is calling. A capability (or an attach identity) says which worker a
//! caller claims to be; for a run that requires attribution (the default),
//! every changing call made as a managed conversation (a worker, or a
//! managed root) must also be proven to come from that very conversation:
//! the call's `x-request-id` must be seen by the executor holding it, in
//! its page, as the page's newest (see the `attribution` crate). Otherwise
//! the call is refused with `UNIDENTIFIED_CALLER` and changes nothing.
//! ChatGPT gives all calls of a turn one request id: the first attributed
//! call of each turn records it (`caller.attributed`, durable), and an
//! earlier turn's id is refused from then on (a replay). A worker's call of
//! a root-only tool is refused before any of this, so it records nothing.
//! Reading tools identify by capability alone.
//!
//! A blocked chat (`worker_block`, or a person in the extension's popup)
//! gets `CHAT_BLOCKED` on every call made as it, telling the model to stop.

use attribution::{Expected, Unidentified};
use carrier_webext::bridge::Lookup;
use protocol::{Attribution, ConversationId};

use super::*;

/// What a blocked chat is told, on every call.
const BLOCKED: &str = "This chat is blocked by the orchestrator's operator: stop calling the orchestrator's tools \
and answer the user in plain text.";

/// The tools only root may call. A worker calling one is refused before its
/// call is attributed: a refused call leaves no `caller.attributed` behind
/// (each tool still checks for itself, with `root_only`).
const ROOT_ONLY: [&str; 21] = [
    "run_cancel",
    "run_continuation_set_default",
    "worker_spawn",
    "worker_list",
    "worker_stop",
    "worker_followup",
    "worker_rollover",
    "worker_block",
    "worker_unblock",
    "worker_pause",
    "worker_continue_now",
    "worker_continuation_get",
    "worker_continuation_set",
    "message_broadcast",
    "runtime_status",
    "runtime_ensure",
    "runtime_scale",
    "runtime_recover",
    "runtime_stop",
    "task_dispatch",
    "task_collect",
];

/// The default bound on waiting for an executor to see a call's request id:
/// the page may show it seconds after the call starts, and a host's tool
/// timeout must still leave time for the answer.
pub const ATTRIBUTION_WAIT: Duration = Duration::from_secs(30);

fn unidentified(why: Unidentified) -> ToolError {
    ToolError::new(ErrorCode::UnidentifiedCaller, why.to_string())
}

impl Tools {
    /// The worker `capability` names, once proven to be calling from its
    /// own conversation (when its run requires it) and not blocked.
    pub(super) async fn prove(
        &self,
        ctx: &RequestContext<RoleServer>,
        capability: &str,
        tool: &str,
    ) -> Result<Worker, ToolError> {
        let me = self.plane.authenticate(capability).map_err(ToolError::from)?;
        self.prove_worker(ctx, &me, tool).await?;
        Ok(me)
    }

    /// A reading tool's check: the capability's worker, refused while blocked.
    pub(super) fn not_blocked(&self, capability: &str) -> Result<(), ToolError> {
        match self.plane.authenticate(capability) {
            Ok(me) if me.blocked.is_some() => Err(ToolError::new(ErrorCode::ChatBlocked, BLOCKED)),
            // Every other refusal is the tool's own to give.
            _ => Ok(()),
        }
    }

    /// Proves `me` is calling from its own conversation, if its run asks;
    /// returns that conversation when the call was attributed.
    pub(super) async fn prove_worker(
        &self,
        ctx: &RequestContext<RoleServer>,
        me: &Worker,
        tool: &str,
    ) -> Result<Option<ConversationId>, ToolError> {
        if me.blocked.is_some() {
            return Err(ToolError::new(ErrorCode::ChatBlocked, BLOCKED));
        }
        if !me.is_root() && ROOT_ONLY.contains(&tool) {
            return Err(Error::from(Refusal::RootOnly).into());
        }
        let policy = self.plane.run(&me.run_id).map_or(Attribution::Required, |r| r.attribution);
        // Root in the caller's own conversation, which no executor manages,
        // is identified by its capability (SPEC: caller attribution).
        if policy == Attribution::CapabilityOnly || (me.is_root() && !me.is_managed_root()) {
            return Ok(None);
        }
        let headers = ctx.extensions.get::<axum::http::request::Parts>().map(|p| &p.headers);
        let values = headers.into_iter().flat_map(|h| h.get_all("x-request-id").iter().map(|v| v.as_bytes()));
        let request_id = attribution::request_id(values).map_err(|why| self.refused(me, tool, why, None))?;
        if !self.plane.with_state(|s| s.request_usable(&request_id, &me.id)) {
            return Err(unidentified(Unidentified::EarlierTurn));
        }
        let Some(bridge) = &self.executors else { return Err(unidentified(Unidentified::NotBound)) };
        let started = tokio::time::Instant::now();
        let deadline = started + self.attribution_wait;
        let lookup = self.bound(me, deadline).await?;
        let (seen, newest) = bridge
            .await_caller(&request_id, &lookup, deadline.saturating_duration_since(tokio::time::Instant::now()))
            .await
            .map_err(unidentified)?
            .ok_or(Unidentified::NotSeen { waited_ms: started.elapsed().as_millis() as u64 })
            .map_err(|why| self.refused(me, tool, why, Some(&lookup.conversation_id)))?;
        let expected =
            Expected { worker_id: &me.id, executor_id: &lookup.executor_id, conversation_id: &lookup.conversation_id };
        attribution::judge(&expected, &seen, newest).map_err(unidentified)?;
        // Blocked while the call waited: refused all the same.
        if self.plane.worker(&me.id).is_some_and(|w| w.blocked.is_some()) {
            return Err(ToolError::new(ErrorCode::ChatBlocked, BLOCKED));
        }
        let (plane, worker_id, tool) = (self.plane.clone(), me.id.clone(), tool.to_owned());
        let recorded = on_blocking_pool(move || -> Result<_, Error> {
            plane.execute(Request::Attributed { worker_id, request_id, tool })?;
            Ok(())
        });
        recorded.await?;
        Ok(Some(lookup.conversation_id))
    }

    /// The refusal of `me`'s call of `tool` for `why`; kept by the bridge
    /// when it says attribution cannot work on this path at all (the
    /// canary and `doctor` read it), judged against what the pages of
    /// `conversation` showed lately.
    fn refused(&self, me: &Worker, tool: &str, why: Unidentified, conversation: Option<&ConversationId>) -> ToolError {
        if let Some(bridge) = &self.executors {
            let shown = conversation.is_some_and(|c| bridge.pages_show_ids(c));
            if let Some(cause) = why.unavailable(shown) {
                bridge.unattributable(carrier_webext::bridge::Unattributable {
                    at_ms: 0,
                    run_id: me.run_id.to_string(),
                    worker_id: me.id.to_string(),
                    tool: tool.to_owned(),
                    cause,
                });
            }
        }
        unidentified(why)
    }

    /// Where `me`'s conversation is: bound now, or (while its create is
    /// open, as for a model following its bootstrap prompt) once bound,
    /// until `deadline`.
    async fn bound(&self, me: &Worker, deadline: tokio::time::Instant) -> Result<Lookup, ToolError> {
        let mut changes = self.plane.subscribe_changes();
        loop {
            changes.borrow_and_update();
            let worker = self.plane.worker(&me.id).ok_or_else(|| ToolError::from(Error::Unauthorized))?;
            if let (Some(executor_id), Some((conversation_id, _))) = (worker.executor_id, worker.conversation) {
                return Ok(Lookup { executor_id, worker_id: me.id.clone(), conversation_id });
            }
            if !create_open(&self.plane, &me.id)
                || !matches!(tokio::time::timeout_at(deadline, changes.changed()).await, Ok(Ok(())))
            {
                return Err(unidentified(Unidentified::NotBound));
            }
        }
    }
}

/// `worker_block` and `worker_unblock` arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BlockArgs {
    /// Root's capability.
    pub capability: String,
    /// The worker whose chat it is.
    #[schemars(with = "WorkerId")]
    pub worker_id: String,
    /// Why (shown in its event).
    #[serde(default)]
    pub reason: Option<String>,
}

/// A chat's block, after the call.
#[derive(Debug, Serialize, JsonSchema)]
pub struct BlockOut {
    /// The worker.
    pub worker_id: WorkerId,
    /// Whether its chat is blocked now.
    pub blocked: bool,
}

#[tool_router(router = caller_tools, vis = "pub(super)")]
impl Tools {
    /// Block a worker's chat: each tool call it makes is refused CHAT_BLOCKED (stop and answer). Not a stop. Root only.
    #[tool(annotations(
        title = "Block chat",
        read_only_hint = false,
        destructive_hint = false,
        idempotent_hint = true,
        open_world_hint = false
    ))]
    async fn worker_block(
        &self,
        Parameters(args): Parameters<BlockArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<Json<BlockOut>, ToolError> {
        let args = args?;
        self.prove(&ctx, &args.capability, "worker_block").await?;
        self.set_block(args, true).await
    }

    /// Unblock a chat blocked with worker_block or from the browser. Root only.
    #[tool(annotations(
        title = "Unblock chat",
        read_only_hint = false,
        destructive_hint = false,
        idempotent_hint = true,
        open_world_hint = false
    ))]
    async fn worker_unblock(
        &self,
        Parameters(args): Parameters<BlockArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<Json<BlockOut>, ToolError> {
        let args = args?;
        self.prove(&ctx, &args.capability, "worker_unblock").await?;
        self.set_block(args, false).await
    }
}

impl Tools {
    async fn set_block(&self, args: BlockArgs, blocked: bool) -> Result<Json<BlockOut>, ToolError> {
        let plane = self.plane.clone();
        on_blocking_pool(move || -> Result<_, Error> {
            let root = root_only(&plane, &args.capability)?;
            let worker_id: WorkerId = parse(&args.worker_id)?;
            plane.execute(Request::block(root.id, worker_id.clone(), blocked, args.reason))?;
            Ok(BlockOut { worker_id, blocked })
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The list names real tools, and every tool whose arguments ask for
    /// root's capability is on it: a new root tool is not attributed for a
    /// worker that calls it.
    #[test]
    fn the_root_only_list_covers_every_root_tool() {
        let tools = Tools::router().list_all();
        let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
        for name in ROOT_ONLY {
            assert!(names.contains(&name), "{name} is no tool");
        }
        for tool in &tools {
            let capability = tool.input_schema.get("properties").and_then(|p| p.get("capability"));
            let described = capability.and_then(|c| c.get("description")).and_then(|d| d.as_str());
            if described == Some("Root's capability.") {
                assert!(ROOT_ONLY.contains(&tool.name.as_ref()), "{} takes root's capability only", tool.name);
            }
        }
    }
}
