//! Caller attribution and blocked chats: a request id attributes one call
//! only (a replay is refused, durably), and root blocks or unblocks a chat.

use super::*;

/// The attribution commands (routed here by [`super::decide`]).
pub(super) fn decide(state: &State, command: &Request) -> Result<Vec<EventBody>, Refusal> {
    match command {
        Request::Block { actor, worker_id, blocked, reason } => {
            let (run, _) = root_actor(state, actor)?;
            let worker = child_of_run(state, run, worker_id)?;
            if let Some(reason) = reason {
                check_text("reason", reason, TEXT_MAX)?;
            }
            // A person's stop is theirs to lift (from the popup), not a model's.
            if !blocked && worker.blocked == Some(protocol::BlockedBy::Person) {
                return Err(Refusal::BlockedByPerson);
            }
            Ok(block_changed(worker, *blocked, protocol::BlockedBy::Root, reason.clone()))
        }
        Request::Attributed { worker_id, request_id, tool } => {
            state.worker(worker_id).ok_or_else(|| Refusal::NoWorker(worker_id.clone()))?;
            if !protocol::executor::valid_request_id(request_id) || !protocol::executor::valid_tool_name(tool) {
                return Err(Refusal::BadAttribution);
            }
            if state.attributed_requests.contains(request_id) {
                return Err(Refusal::RequestReplayed(request_id.clone()));
            }
            Ok(vec![EventBody::CallerAttributed {
                worker_id: worker_id.clone(),
                request_id: request_id.clone(),
                tool: tool.clone(),
            }])
        }
        _ => unreachable!("decide routes only this family's commands here"),
    }
}

/// The event blocking or unblocking `worker`'s chat, unless it already is so.
pub(super) fn block_changed(
    worker: &Worker,
    blocked: bool,
    by: protocol::BlockedBy,
    reason: Option<String>,
) -> Vec<EventBody> {
    if worker.blocked.is_some() == blocked {
        return vec![];
    }
    vec![EventBody::WorkerBlockChanged { worker_id: worker.id.clone(), blocked, by, reason }]
}
