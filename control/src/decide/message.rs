//! Messages between workers of a run, and root's broadcasts.

use super::*;

/// The message commands (routed here by [`super::decide`]).
pub(super) fn decide(state: &State, command: &Request) -> Result<Vec<EventBody>, Refusal> {
    match command {
        Request::Send { actor, message_id, to, kind, body, in_reply_to, replied } => {
            let (run, sender) = acting(state, actor)?;
            require_open(run)?;
            require_working(sender)?;
            check_text("body", body, TEXT_MAX)?;
            let recipient =
                state.worker(to).filter(|w| w.run_id == run.id).ok_or_else(|| Refusal::NoWorkerInRun(to.clone()))?;
            if recipient.id == sender.id {
                return Err(Refusal::MessageToSelf);
            }
            if !sender.is_root() && !recipient.is_root() && Some(&recipient.id) != sender.parent.as_ref() {
                return Err(Refusal::MessageRecipient);
            }
            if let Some(reply_to) = in_reply_to {
                match replied.as_ref().filter(|(r, _)| *r == run.id).map(|(_, to)| to) {
                    Some(addressee) if addressee == actor => {}
                    Some(_) => {
                        return Err(Refusal::ReplyToOthers);
                    }
                    None => return Err(Refusal::NoMessageInRun(reply_to.clone())),
                }
            }
            let mut events = vec![EventBody::WorkerMessage {
                message_id: message_id.clone(),
                from: actor.clone(),
                to: to.clone(),
                kind: *kind,
                body: body.clone(),
                in_reply_to: in_reply_to.clone(),
            }];
            events.extend(message_state_changes(sender, recipient, *kind));
            Ok(events)
        }
        Request::Answer { actor, message_id, to, body } => {
            let (run, root) = root_actor(state, actor)?;
            require_open(run)?;
            check_text("body", body, TEXT_MAX)?;
            let worker =
                state.worker(to).filter(|w| w.run_id == run.id).ok_or_else(|| Refusal::NoWorkerInRun(to.clone()))?;
            if worker.id == root.id {
                return Err(Refusal::MessageToSelf);
            }
            // Its own question to a person, or one it asked root: checked
            // here, in the commit that answers it, never before it.
            let asked = worker.continuity.hold == Some(protocol::continuity::Hold::AwaitingHuman);
            if !asked && worker.state != WorkerState::Waiting {
                return Err(Refusal::NothingAsked(to.clone()));
            }
            let mut events = vec![EventBody::WorkerMessage {
                message_id: message_id.clone(),
                from: actor.clone(),
                to: to.clone(),
                kind: MessageKind::Answer,
                body: body.clone(),
                in_reply_to: None,
            }];
            events.extend(message_state_changes(root, worker, MessageKind::Answer));
            if asked {
                events.push(EventBody::WorkerHoldChanged {
                    worker_id: to.clone(),
                    hold: None,
                    reason: None,
                    ask: None,
                });
            }
            Ok(events)
        }
        Request::Broadcast { actor, message_ids, kind, body } => {
            let (run, root) = root_actor(state, actor)?;
            require_open(run)?;
            check_text("body", body, TEXT_MAX)?;
            let recipients = broadcast_recipients(state, run);
            if message_ids.len() < recipients.len() {
                return Err(Refusal::TooFewMessageIds);
            }
            let mut events = Vec::new();
            for (recipient, message_id) in recipients.into_iter().zip(message_ids) {
                events.push(EventBody::WorkerMessage {
                    message_id: message_id.clone(),
                    from: actor.clone(),
                    to: recipient.id.clone(),
                    kind: *kind,
                    body: body.clone(),
                    in_reply_to: None,
                });
                events.extend(message_state_changes(root, recipient, *kind));
            }
            Ok(events)
        }
        _ => unreachable!("decide routes only this family's commands here"),
    }
}

/// Who a broadcast in `run` reaches, in order: every unfinished non-root worker.
pub fn broadcast_recipients<'a>(state: &'a State, run: &Run) -> Vec<&'a Worker> {
    run.workers.iter().filter_map(|id| state.worker(id)).filter(|w| !w.is_root() && !w.state.is_terminal()).collect()
}

/// A question or blocker makes the sender wait; an answer or correction
/// releases a waiting recipient.
fn message_state_changes(sender: &Worker, recipient: &Worker, kind: MessageKind) -> Vec<EventBody> {
    let mut events = Vec::new();
    if kind.makes_sender_wait() && sender.state == WorkerState::Running && !sender.is_root() {
        events.push(state_change(&sender.id, WorkerState::Running, WorkerState::Waiting, Some("awaiting reply")));
    }
    if kind.releases_recipient() && recipient.state == WorkerState::Waiting {
        events.push(state_change(&recipient.id, WorkerState::Waiting, WorkerState::Running, Some("reply received")));
    }
    events
}

#[cfg(test)]
mod tests {
    use super::super::table::{Given, check};
    use super::*;

    fn send(g: &mut Given, from: &WorkerId, to: &WorkerId, kind: MessageKind, body: &str) -> Request {
        let message_id = MessageId::from_uuid_bytes(g.id());
        Request::Send {
            actor: from.clone(),
            message_id,
            to: to.clone(),
            kind,
            body: body.into(),
            in_reply_to: None,
            replied: None,
        }
    }

    #[test]
    fn message_commands_by_state() {
        let mut rows = Vec::new();

        let mut g = Given::run();
        let a = g.attached("a");
        let root = g.root.clone();
        let c = send(&mut g, &a, &root, MessageKind::Information, "fyi");
        rows.push(("information to root", g, c, Ok(&["worker.message"][..])));

        let mut g = Given::run();
        let a = g.attached("a");
        let root = g.root.clone();
        let c = send(&mut g, &a, &root, MessageKind::Question, "which?");
        rows.push(("a question makes the asker wait", g, c, Ok(&["worker.message", "worker.state_changed"][..])));

        let mut g = Given::run();
        let a = g.attached("a");
        let root = g.root.clone();
        let c = send(&mut g, &a, &root, MessageKind::Information, &"x".repeat(TEXT_MAX + 1));
        rows.push(("a body over its bound", g, c, Err(ErrorCode::TooLarge)));

        let answer = |g: &mut Given, to: &WorkerId| Request::Answer {
            actor: g.root.clone(),
            message_id: MessageId::from_uuid_bytes(g.id()),
            to: to.clone(),
            body: "postgres".into(),
        };
        let mut g = Given::run();
        let a = g.attached("a");
        g.apply(Request::SetHold {
            actor: a.clone(),
            target: a.clone(),
            hold: protocol::continuity::Hold::AwaitingHuman,
            reason: "which db?".into(),
            ask: None,
        });
        let c = answer(&mut g, &a);
        rows.push((
            "a person's answer goes in with its wait released",
            g,
            c,
            Ok(&["worker.message", "worker.hold_changed"][..]),
        ));

        let mut g = Given::run();
        let a = g.attached("a");
        let root = g.root.clone();
        let asked = send(&mut g, &a, &root, MessageKind::Question, "which?");
        g.apply(asked);
        let c = answer(&mut g, &a);
        rows.push(("a person answers a question to root", g, c, Ok(&["worker.message", "worker.state_changed"][..])));

        let mut g = Given::run();
        let a = g.attached("a");
        let c = answer(&mut g, &a);
        rows.push((
            "an answer to a worker that asks nothing (answered already)",
            g,
            c,
            Err(ErrorCode::InvalidTransition),
        ));

        let mut g = Given::run();
        g.attached("a");
        g.attached("b");
        let ids = vec![MessageId::from_uuid_bytes(g.id()), MessageId::from_uuid_bytes(g.id())];
        let c = Request::Broadcast {
            actor: g.root.clone(),
            message_ids: ids,
            kind: MessageKind::Information,
            body: "all".into(),
        };
        rows.push(("root broadcasts to every running worker", g, c, Ok(&["worker.message", "worker.message"][..])));

        let mut g = Given::run();
        let a = g.attached("a");
        let ids = vec![MessageId::from_uuid_bytes(g.id())];
        let c = Request::Broadcast { actor: a, message_ids: ids, kind: MessageKind::Information, body: "all".into() };
        rows.push(("a worker cannot broadcast", g, c, Err(ErrorCode::Forbidden)));

        check(rows);
    }
}
