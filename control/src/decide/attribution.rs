//! Caller attribution and blocked chats: a request id (one per ChatGPT
//! turn) attributes one worker's calls until that worker's next turn's id
//! is attributed, and never again after (a replay is refused, durably);
//! root blocks or unblocks a chat.

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
            if !state.request_usable(request_id, worker_id) {
                return Err(Refusal::RequestReplayed(request_id.clone()));
            }
            // Another call of the same turn: nothing new to record.
            if state.attributed_requests.contains_key(request_id) {
                return Ok(vec![]);
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

#[cfg(test)]
mod tests {
    use super::super::table::{Given, check};
    use super::*;

    fn attributed(worker: &WorkerId, request_id: &str) -> Request {
        Request::Attributed { worker_id: worker.clone(), request_id: request_id.into(), tool: "worker_progress".into() }
    }

    #[test]
    fn a_request_id_attributes_its_turn_and_never_an_earlier_one() {
        let mut rows = Vec::new();

        let mut g = Given::run();
        let a = g.created("a", "ext");
        rows.push(("a turn's first call records its id", g, attributed(&a, "wfr_x"), Ok(&["caller.attributed"][..])));

        let mut g = Given::run();
        let a = g.created("a", "ext");
        g.apply(attributed(&a, "wfr_x"));
        rows.push(("another call of the same turn records nothing", g, attributed(&a, "wfr_x"), Ok(&[][..])));

        let mut g = Given::run();
        let a = g.created("a", "ext");
        g.apply(attributed(&a, "wfr_x"));
        g.apply(attributed(&a, "wfr_y"));
        rows.push(("an earlier turn's id is a replay", g, attributed(&a, "wfr_x"), Err(ErrorCode::UnidentifiedCaller)));

        let mut g = Given::run();
        let (a, b) = (g.created("a", "ext"), g.created("b", "ext"));
        g.apply(attributed(&a, "wfr_x"));
        rows.push(("another worker's id is never its", g, attributed(&b, "wfr_x"), Err(ErrorCode::UnidentifiedCaller)));

        let mut g = Given::run();
        let a = g.created("a", "ext");
        rows.push(("a malformed id is refused", g, attributed(&a, "wfr x"), Err(ErrorCode::InvalidArgument)));

        check(rows);
    }
}
