//! Runs: creating one with its root, cancelling one with its workers.

use super::*;

/// The run commands (routed here by [`super::decide`]).
pub(super) fn decide(state: &State, command: &Request) -> Result<Vec<EventBody>, Refusal> {
    match command {
        Request::CreateRun { run_id, root_id, title, managed, attribution } => {
            check_text("title", title, TITLE_MAX)?;
            if state.runs.contains_key(run_id) || state.workers.contains_key(root_id) {
                return Err(Refusal::IdTaken("run or root id"));
            }
            if let Some(managed) = managed {
                check_assignment(&managed.assignment)?;
            }
            let mut events = vec![
                EventBody::RunCreated { title: title.clone(), root_worker_id: root_id.clone() },
                EventBody::WorkerCreated {
                    worker_id: root_id.clone(),
                    path: "/root".into(),
                    parent_id: None,
                    assignment: managed.as_ref().map(|m| m.assignment.clone()),
                },
            ];
            if *attribution != protocol::Attribution::default() {
                events.push(EventBody::RunAttributionSet { policy: *attribution });
            }
            match managed {
                // The caller is root: working from the start, in its own conversation.
                None => events.push(state_change(root_id, WorkerState::Created, WorkerState::Running, None)),
                // Launched like a worker: it attaches from its own conversation.
                Some(managed) => events.extend([
                    state_change(root_id, WorkerState::Created, WorkerState::LaunchRequested, None),
                    EventBody::CommandQueued {
                        command_id: managed.create_command.clone(),
                        worker_id: root_id.clone(),
                        intent: CommandIntent::Create,
                        idempotency_key: format!("create:{root_id}"),
                        not_before_ms: None,
                    },
                ]),
            }
            Ok(events)
        }
        Request::CancelRun { actor, reason } => {
            let (run, root) = root_actor(state, actor)?;
            if run.state.is_terminal() {
                return Err(Refusal::RunNotActive(run.state));
            }
            check_text("reason", reason, TEXT_MAX)?;
            let mut events = cancel_children(state, run, actor, "run cancelled");
            events.extend(cancel_queued(state, unfinished_children(state, run, actor).map(|w| &w.id)));
            if !root.state.is_terminal() {
                events.push(state_change(actor, root.state, WorkerState::Cancelled, Some("run cancelled")));
            }
            events.push(EventBody::RunStateChanged {
                from: run.state,
                to: RunState::Cancelled,
                reason: Some(reason.clone()),
            });
            Ok(events)
        }
        _ => unreachable!("decide routes only this family's commands here"),
    }
}

#[cfg(test)]
mod tests {
    use super::super::table::{Given, check};
    use super::*;

    fn cancel(actor: &WorkerId) -> Request {
        Request::CancelRun { actor: actor.clone(), reason: "stop".into() }
    }

    #[test]
    fn run_commands_by_state() {
        let mut rows = Vec::new();

        let mut g = Given::run();
        g.attached("a");
        let c = cancel(&g.root);
        rows.push((
            "root cancels: the worker ends, its queued create is dropped, then root and the run",
            g,
            c,
            Ok(&["worker.state_changed", "executor.command_cancelled", "worker.state_changed", "run.state_changed"][..]),
        ));

        let mut g = Given::run();
        let a = g.attached("a");
        rows.push(("a worker cannot cancel the run", g, cancel(&a), Err(ErrorCode::Forbidden)));

        let mut g = Given::run();
        let root = g.root.clone();
        g.apply(cancel(&root));
        rows.push(("a cancelled run is not cancelled again", g, cancel(&root), Err(ErrorCode::RunNotActive)));

        let g = Given::run();
        let c = Request::CreateRun {
            run_id: g.run.clone(),
            root_id: WorkerId::from_uuid_bytes([9; 16]),
            title: "again".into(),
            managed: None,
            attribution: protocol::Attribution::Required,
        };
        rows.push(("a run id is created once", g, c, Err(ErrorCode::InvalidArgument)));

        let g = Given::run();
        let managed = |objective: &str| ManagedRoot {
            assignment: Assignment::from_objective(objective),
            create_command: CommandId::from_uuid_bytes([8; 16]),
        };
        let c = Request::CreateRun {
            run_id: RunId::from_uuid_bytes([7; 16]),
            root_id: WorkerId::from_uuid_bytes([6; 16]),
            title: "managed".into(),
            managed: Some(managed("coordinate the goal")),
            attribution: protocol::Attribution::Required,
        };
        rows.push((
            "a managed root is launched like a worker: its create is queued",
            g,
            c,
            Ok(&["run.created", "worker.created", "worker.state_changed", "executor.command_queued"][..]),
        ));

        let g = Given::run();
        let c = Request::CreateRun {
            run_id: RunId::from_uuid_bytes([7; 16]),
            root_id: WorkerId::from_uuid_bytes([6; 16]),
            title: "managed".into(),
            managed: Some(managed(" ")),
            attribution: protocol::Attribution::Required,
        };
        rows.push(("a managed root needs an objective", g, c, Err(ErrorCode::InvalidArgument)));

        check(rows);
    }
}
