//! Workers: spawn, attach, progress, completion and failure (fenced by the
//! follow-up they answer), interruption, follow-ups.

use super::*;

/// The worker commands (routed here by [`super::decide`]).
pub(super) fn decide(state: &State, command: &Request) -> Result<Vec<EventBody>, Refusal> {
    match command {
        Request::Spawn { actor, worker_id, name, assignment, create_command, model, effort } => {
            let (run, root) = root_actor(state, actor)?;
            require_active(run)?;
            check_name(name)?;
            check_assignment(assignment)?;
            let path = format!("{}/{name}", root.path);
            if run.paths.contains(&path) {
                return Err(Refusal::NameTaken(path.to_string()));
            }
            if run.workers.len() >= WORKERS_PER_RUN_MAX {
                return Err(Refusal::RunFull(WORKERS_PER_RUN_MAX));
            }
            if state.workers.contains_key(worker_id) {
                return Err(Refusal::IdTaken("worker id"));
            }
            if model.as_deref().is_some_and(|m| !protocol::limits::valid_model_label(m))
                || effort.as_deref().is_some_and(|e| !protocol::limits::valid_model_label(e))
                || (effort.is_some() && model.is_none())
            {
                return Err(Refusal::BadModel);
            }
            let pinned = model.iter().map(|model| EventBody::WorkerModelPinned {
                worker_id: worker_id.clone(),
                model: model.clone(),
                effort: effort.clone(),
            });
            let created = EventBody::WorkerCreated {
                worker_id: worker_id.clone(),
                path,
                parent_id: Some(actor.clone()),
                assignment: Some(assignment.clone()),
            };
            Ok([created]
                .into_iter()
                .chain(pinned)
                .chain([
                    state_change(worker_id, WorkerState::Created, WorkerState::LaunchRequested, None),
                    EventBody::CommandQueued {
                        command_id: create_command.clone(),
                        worker_id: worker_id.clone(),
                        intent: CommandIntent::Create,
                        idempotency_key: format!("create:{worker_id}"),
                        not_before_ms: None,
                    },
                ])
                .collect())
        }
        Request::Attach { worker_id } => {
            let (run, worker) = acting(state, worker_id)?;
            if worker.is_root() && !worker.is_managed_root() {
                return Err(Refusal::RootDoesNotAttach);
            }
            if state.runtime.by_worker(worker_id).is_some() {
                return Err(Refusal::PoolWorkerAttach);
            }
            if worker.state == WorkerState::Cancelled
                || worker.state == WorkerState::LaunchFailed
                || run.state.is_terminal()
            {
                return Err(Refusal::CannotAttach(worker.state));
            }
            let mut events =
                vec![EventBody::WorkerAttached { worker_id: worker_id.clone(), attach_count: worker.attach_count + 1 }];
            match worker.state {
                WorkerState::Created | WorkerState::LaunchRequested | WorkerState::Launching => {
                    events.push(state_change(worker_id, worker.state, WorkerState::Running, Some("attached")));
                }
                WorkerState::Running
                | WorkerState::Waiting
                | WorkerState::Completed
                | WorkerState::Failed
                | WorkerState::Cancelled
                | WorkerState::LaunchFailed => {}
            }
            Ok(events)
        }
        Request::Progress { actor, summary, percent } => {
            let (run, worker) = acting(state, actor)?;
            require_open(run)?;
            require_working(worker)?;
            check_text("summary", summary, TEXT_MAX)?;
            if percent.is_some_and(|p| p > 100) {
                return Err(Refusal::BadPercent);
            }
            let mut events = vec![EventBody::WorkerProgress {
                worker_id: actor.clone(),
                summary: summary.clone(),
                percent: *percent,
            }];
            if worker.state == WorkerState::Waiting {
                events.push(state_change(actor, WorkerState::Waiting, WorkerState::Running, Some("progress")));
            }
            Ok(events)
        }
        Request::Complete { actor, summary, artifacts } => {
            let (run, worker) = acting(state, actor)?;
            require_open(run)?;
            require_working(worker)?;
            check_text("summary", summary, TEXT_MAX)?;
            check_list("artifacts", artifacts)?;
            let mut events = vec![
                EventBody::WorkerCompleted {
                    worker_id: actor.clone(),
                    summary: summary.clone(),
                    artifacts: artifacts.clone(),
                    followup: None,
                },
                state_change(actor, worker.state, WorkerState::Completed, None),
            ];
            if worker.is_root() {
                let children_open = unfinished_children(state, run, actor).next().is_some();
                let to = if children_open { RunState::Completing } else { RunState::Completed };
                events.push(EventBody::RunStateChanged { from: run.state, to, reason: Some("root completed".into()) });
            } else {
                events.extend(close_if_last(state, run, actor));
            }
            Ok(events)
        }
        Request::Answering { followup, report } => {
            let actor = match report.as_ref() {
                Request::Progress { actor, .. } | Request::Complete { actor, .. } | Request::Fail { actor, .. } => {
                    actor
                }
                _ => {
                    return Err(Refusal::WorkNotNamed);
                }
            };
            let (_, worker) = acting(state, actor)?;
            let newest = worker.followups.len() as u32;
            let followup = match (followup, worker.turn_followups) {
                (Some(named), _) => *named,
                // Unnamed: the work of the turn it came from, when attribution
                // knows the turn; otherwise the newest work.
                (None, Some(turn)) => turn,
                (None, None) => return super::decide(state, report),
            };
            if followup < newest {
                return Err(Refusal::Superseded { followup, newest });
            }
            if followup > newest {
                return Err(Refusal::NoSuchFollowup { followup, newest });
            }
            // The outcome says which work it finishes, so root reads it from the event.
            let mut events = super::decide(state, report)?;
            for event in &mut events {
                if let EventBody::WorkerCompleted { followup: named, .. }
                | EventBody::WorkerFailed { followup: named, .. } = event
                {
                    *named = Some(followup);
                }
            }
            Ok(events)
        }
        Request::Fail { actor, reason } => {
            let (run, worker) = acting(state, actor)?;
            require_open(run)?;
            require_working(worker)?;
            check_text("reason", reason, TEXT_MAX)?;
            let mut events = vec![
                EventBody::WorkerFailed { worker_id: actor.clone(), reason: reason.clone(), followup: None },
                state_change(actor, worker.state, WorkerState::Failed, None),
            ];
            if worker.is_root() {
                events.extend(cancel_children(state, run, actor, "run failed"));
                events.extend(cancel_queued(state, unfinished_children(state, run, actor).map(|w| &w.id)));
                events.push(EventBody::RunStateChanged {
                    from: run.state,
                    to: RunState::Failed,
                    reason: Some(reason.clone()),
                });
            } else {
                events.extend(close_if_last(state, run, actor));
            }
            Ok(events)
        }
        Request::Interrupt { actor, target, reason } => {
            let (run, _) = root_actor(state, actor)?;
            require_open(run)?;
            check_text("reason", reason, TEXT_MAX)?;
            let worker = child_of_run(state, run, target)?;
            if worker.state.is_terminal() {
                return Err(Refusal::AlreadyEnded(worker.state));
            }
            let mut events = vec![
                EventBody::WorkerInterrupted { worker_id: target.clone(), reason: reason.clone() },
                state_change(target, worker.state, WorkerState::Cancelled, Some("interrupted")),
            ];
            events.extend(cancel_queued(state, [target]));
            events.extend(close_if_last(state, run, target));
            Ok(events)
        }
        Request::Followup { actor, target, instructions, send_command } => {
            let (run, _) = root_actor(state, actor)?;
            require_active(run)?;
            check_text("instructions", instructions, TEXT_MAX)?;
            let worker = child_of_run(state, run, target)?;
            match worker.state {
                WorkerState::Running | WorkerState::Waiting | WorkerState::Completed | WorkerState::Failed => {}
                WorkerState::Created
                | WorkerState::LaunchRequested
                | WorkerState::Launching
                | WorkerState::Cancelled
                | WorkerState::LaunchFailed => {
                    return Err(Refusal::NoFollowupFor(worker.state));
                }
            }
            let seq = worker.followups.len() as u32 + 1;
            let mut events =
                vec![EventBody::WorkerFollowup { worker_id: target.clone(), seq, instructions: instructions.clone() }];
            if worker.state != WorkerState::Running {
                events.push(state_change(target, worker.state, WorkerState::Running, Some("follow-up")));
            }
            events.push(EventBody::CommandQueued {
                command_id: send_command.clone(),
                worker_id: target.clone(),
                intent: CommandIntent::Send { prompt: PromptRef::Followup { seq }, steer: false },
                idempotency_key: format!("followup:{target}:{seq}"),
                not_before_ms: None,
            });
            Ok(events)
        }
        _ => unreachable!("decide routes only this family's commands here"),
    }
}

fn check_name(name: &str) -> Result<(), Refusal> {
    check_text("name", name, NAME_MAX)?;
    let ok = !name.is_empty()
        && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_');
    if !ok {
        return Err(Refusal::BadName);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::table::{Given, check};
    use super::*;

    fn complete(actor: &WorkerId) -> Request {
        Request::Complete { actor: actor.clone(), summary: "done".into(), artifacts: vec![] }
    }

    fn followup(g: &mut Given, target: &WorkerId) -> Request {
        let send_command = CommandId::from_uuid_bytes(g.id());
        Request::Followup { actor: g.root.clone(), target: target.clone(), instructions: "more".into(), send_command }
    }

    #[test]
    fn worker_commands_by_state() {
        let mut rows = Vec::new();

        let mut g = Given::run();
        let spawn = |g: &mut Given, actor: WorkerId, name: &str, objective: String| {
            let assignment = Assignment::from_objective(objective);
            let (worker_id, create_command) = (WorkerId::from_uuid_bytes(g.id()), CommandId::from_uuid_bytes(g.id()));
            Request::Spawn {
                actor,
                worker_id,
                name: name.into(),
                assignment,
                create_command,
                model: None,
                effort: None,
            }
        };
        let root = g.root.clone();
        let c = spawn(&mut g, root, "a", "task".into());
        rows.push((
            "root spawns: created, launch requested, its create queued",
            g,
            c,
            Ok(&["worker.created", "worker.state_changed", "executor.command_queued"][..]),
        ));

        let mut g = Given::run();
        let root = g.root.clone();
        let mut c = spawn(&mut g, root, "a", "task".into());
        if let Request::Spawn { model, .. } = &mut c {
            *model = Some("GPT-5.5".into());
        }
        rows.push((
            "a pinned worker is pinned before its create",
            g,
            c,
            Ok(&["worker.created", "worker.model_pinned", "worker.state_changed", "executor.command_queued"][..]),
        ));

        let mut g = Given::run();
        let root = g.root.clone();
        let mut c = spawn(&mut g, root, "a", "task".into());
        if let Request::Spawn { model, .. } = &mut c {
            *model = Some("x".repeat(65));
        }
        rows.push(("a model label over its bound", g, c, Err(ErrorCode::InvalidArgument)));

        let mut g = Given::run();
        let a = g.attached("a");
        let c = spawn(&mut g, a, "b", "task".into());
        rows.push(("a worker cannot spawn", g, c, Err(ErrorCode::Forbidden)));

        let mut g = Given::run();
        g.spawned("a");
        let root = g.root.clone();
        let c = spawn(&mut g, root, "a", "task".into());
        rows.push(("a name is taken once per run", g, c, Err(ErrorCode::InvalidArgument)));

        let mut g = Given::run();
        let root = g.root.clone();
        let c = spawn(&mut g, root, "a", "x".repeat(TEXT_MAX + 1));
        rows.push(("an objective over its bound", g, c, Err(ErrorCode::TooLarge)));

        let mut g = Given::run();
        let a = g.spawned("a");
        rows.push((
            "the first attach runs the worker",
            g,
            Request::Attach { worker_id: a },
            Ok(&["worker.attached", "worker.state_changed"][..]),
        ));

        let g = Given::run();
        let root = g.root.clone();
        rows.push(("root does not attach", g, Request::Attach { worker_id: root }, Err(ErrorCode::Forbidden)));

        let mut g = Given::run();
        let a = g.attached("a");
        let c = Request::Progress { actor: a, summary: "half".into(), percent: Some(50) };
        rows.push(("progress is recorded", g, c, Ok(&["worker.progress"][..])));

        let mut g = Given::run();
        let a = g.attached("a");
        rows.push(("completion", g, complete(&a), Ok(&["worker.completed", "worker.state_changed"][..])));

        let mut g = Given::run();
        let a = g.attached("a");
        let f = followup(&mut g, &a);
        g.apply(f);
        let c = Request::Answering { followup: Some(0), report: Box::new(complete(&a)) };
        rows.push(("a report on work a follow-up superseded", g, c, Err(ErrorCode::Conflict)));

        let mut g = Given::run();
        let a = g.attached("a");
        let c = Request::Answering { followup: Some(1), report: Box::new(complete(&a)) };
        rows.push(("a report on a follow-up that does not exist", g, c, Err(ErrorCode::InvalidArgument)));

        let mut g = Given::run();
        let a = g.attached("a");
        let f = followup(&mut g, &a);
        g.apply(f);
        let c = Request::Answering { followup: Some(1), report: Box::new(complete(&a)) };
        rows.push(("a report on the newest follow-up", g, c, Ok(&["worker.completed", "worker.state_changed"][..])));

        // The completion names the follow-up it finishes.
        let mut g = Given::run();
        let a = g.attached("a");
        let f = followup(&mut g, &a);
        g.apply(f);
        let events = g.apply(Request::Answering { followup: Some(1), report: Box::new(complete(&a)) });
        assert!(matches!(events[0], EventBody::WorkerCompleted { followup: Some(1), .. }), "{events:?}");

        let mut g = Given::run();
        let a = g.attached("a");
        g.apply(complete(&a));
        let c = followup(&mut g, &a);
        rows.push((
            "a follow-up wakes a completed worker",
            g,
            c,
            Ok(&["worker.followup", "worker.state_changed", "executor.command_queued"][..]),
        ));

        let mut g = Given::run();
        let a = g.attached("a");
        let c = Request::Interrupt { actor: g.root.clone(), target: a, reason: "not needed".into() };
        rows.push((
            "an interrupt ends the worker and cancels what it had queued",
            g,
            c,
            Ok(&["worker.interrupted", "worker.state_changed", "executor.command_cancelled"][..]),
        ));

        check(rows);
    }
}
