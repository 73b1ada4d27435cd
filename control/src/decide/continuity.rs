//! Execution Continuity's commands: policies, holds, "continue now", and
//! what the scheduler found due ([`crate::continuity::due`]). Root steers
//! its run's workers; a worker may declare its own wait for a person or a
//! dependency; only the stall guard pauses for a stall.

use protocol::continuity::{Hold, StallLevel, Wake};
use protocol::executor::ConversationState;
use protocol::limits::TEXT_MAX;
use protocol::{CommandId, CommandIntent, EventBody, PromptRef, WorkerId};

use super::{Refusal, Request, acting, check_text, require_open, root_actor};
use crate::continuity::Action;
use crate::model::{Run, State, Worker};

pub(super) fn decide(state: &State, command: &Request) -> Result<Vec<EventBody>, Refusal> {
    match command {
        Request::SetContinuation { actor, target, policy } => {
            let (run, _) = root_actor(state, actor)?;
            require_open(run)?;
            policy.check().map_err(|e| Refusal::BadPolicy(e.to_string()))?;
            let current = match target {
                None => run.continuation_default,
                Some(target) => unfinished_in_run(state, run, target)?.continuity.policy,
            };
            Ok(if current == *policy {
                vec![]
            } else {
                vec![EventBody::ContinuationPolicyChanged { worker_id: target.clone(), policy: *policy }]
            })
        }
        Request::SetHold { actor, target, hold, reason, ask } => {
            let (run, acting_worker) = acting(state, actor)?;
            require_open(run)?;
            check_text("reason", reason, TEXT_MAX)?;
            if let Some(ask) = ask {
                if *hold != Hold::AwaitingHuman {
                    return Err(Refusal::BadAsk("choices and context go with a question to a person".into()));
                }
                ask.check().map_err(Refusal::BadAsk)?;
            }
            let own_wait = actor == target && matches!(hold, Hold::AwaitingHuman | Hold::AwaitingDependency);
            if !own_wait && !acting_worker.is_root() {
                return Err(Refusal::RootOnly);
            }
            if *hold == Hold::Stalled {
                return Err(Refusal::StallIsTheGuards);
            }
            let worker = unfinished_in_run(state, run, target)?;
            Ok(if worker.continuity.hold == Some(*hold) {
                vec![]
            } else {
                vec![EventBody::WorkerHoldChanged {
                    worker_id: target.clone(),
                    hold: Some(*hold),
                    reason: Some(reason.clone()),
                    ask: ask.clone().filter(|a| *a != protocol::operator::Ask::default()),
                }]
            })
        }
        Request::ReleaseHold { actor, target } => {
            let (run, acting_worker) = acting(state, actor)?;
            require_open(run)?;
            if actor != target && !acting_worker.is_root() {
                return Err(Refusal::RootOnly);
            }
            let worker = unfinished_in_run(state, run, target)?;
            Ok(release(worker).into_iter().collect())
        }
        Request::ContinueNow { actor, target } => {
            let (run, _) = root_actor(state, actor)?;
            require_open(run)?;
            let worker = unfinished_in_run(state, run, target)?;
            if let Some(hold @ (Hold::AwaitingHuman | Hold::AwaitingDependency)) = worker.continuity.hold {
                return Err(Refusal::Held(hold));
            }
            let mut events: Vec<EventBody> = release(worker).into_iter().collect();
            let pending = worker.continuity.in_flight.is_some()
                || crate::continuity::workers_with_open_commands(state).contains(target)
                || worker.continuity.intent.as_ref().is_some_and(|i| i.wakes.contains(&Wake::Operator));
            if !pending {
                events.push(EventBody::ContinuationRequested { worker_id: target.clone(), wake: Wake::Operator });
            }
            Ok(events)
        }
        Request::ContinuityDue { actions } => actions.iter().try_fold(Vec::new(), |mut events, action| {
            events.extend(due(state, action)?);
            Ok(events)
        }),
        _ => unreachable!("decide routes only this family's commands here"),
    }
}

/// The events of one due action, checked against the state it was found in.
fn due(state: &State, action: &Action) -> Result<Vec<EventBody>, Refusal> {
    Ok(match action {
        Action::Schedule { worker, attempt, reason, wakes, checkpoint } => {
            let w = state.worker(worker).ok_or_else(|| Refusal::NoWorker(worker.clone()))?;
            if *attempt != w.continuity.attempts + 1 || w.state.is_terminal() {
                return Err(Refusal::AttemptOutOfSequence { attempt: *attempt, latest: w.continuity.attempts });
            }
            let command_id = attempt_command(worker, *attempt);
            let prompt = if *checkpoint {
                PromptRef::Checkpoint { attempt: *attempt }
            } else {
                PromptRef::Resume { attempt: *attempt }
            };
            // Seed §12.2: a checkpoint due mid-turn goes through the
            // executor's steering seam when it declared one; otherwise it
            // stays queued (durable) until the turn ends.
            let steer = *checkpoint
                && w.conversation_state == Some(ConversationState::Generating)
                && w.executor_id.as_ref().is_some_and(|e| state.steering_executors.contains(e));
            vec![
                EventBody::ExecutionScheduled {
                    worker_id: worker.clone(),
                    attempt: *attempt,
                    reason: *reason,
                    wakes: wakes.clone(),
                    command_id: command_id.clone(),
                },
                EventBody::CommandQueued {
                    command_id,
                    worker_id: worker.clone(),
                    intent: CommandIntent::Send { prompt, steer },
                    idempotency_key: format!("resume:{worker}:{attempt}"),
                    not_before_ms: None,
                },
            ]
        }
        Action::TurnStalled { worker, stall, for_ms } => {
            state.worker(worker).ok_or_else(|| Refusal::NoWorker(worker.clone()))?;
            vec![EventBody::ContinuationTurnStalled { worker_id: worker.clone(), stall: *stall, for_ms: *for_ms }]
        }
        Action::Stalled { worker, level, attempts_without_progress, quiet_ms } => {
            state.worker(worker).ok_or_else(|| Refusal::NoWorker(worker.clone()))?;
            let mut events = vec![EventBody::ContinuationStalled {
                worker_id: worker.clone(),
                level: *level,
                attempts_without_progress: *attempts_without_progress,
                quiet_ms: *quiet_ms,
            }];
            if *level == StallLevel::Paused {
                events.push(EventBody::WorkerHoldChanged {
                    worker_id: worker.clone(),
                    hold: Some(Hold::Stalled),
                    reason: Some(format!(
                        "no progress in {attempts_without_progress} attempts and {} minutes; worker_resume to go on",
                        quiet_ms / 60_000
                    )),
                    ask: None,
                });
            }
            events
        }
    })
}

/// The command of `worker`'s attempt `attempt`: derived from both, so a
/// replayed decision queues the same command and the executor's journal
/// key is stable across restarts.
fn attempt_command(worker: &WorkerId, attempt: u32) -> CommandId {
    use sha2::{Digest, Sha256};
    let digest = Sha256::digest(format!("attempt:{worker}:{attempt}").as_bytes());
    CommandId::from_uuid_bytes(digest[..16].try_into().expect("a SHA-256 has 16 bytes to spare"))
}

/// A worker of `run` (root included) that has not ended.
fn unfinished_in_run<'a>(state: &'a State, run: &Run, id: &WorkerId) -> Result<&'a Worker, Refusal> {
    let worker = state.worker(id).filter(|w| w.run_id == run.id).ok_or_else(|| Refusal::NoWorkerInRun(id.clone()))?;
    if worker.state.is_terminal() {
        return Err(Refusal::AlreadyEnded(worker.state));
    }
    Ok(worker)
}

/// The release of the worker's hold, if it has one.
fn release(worker: &Worker) -> Option<EventBody> {
    worker.continuity.hold.map(|_| EventBody::WorkerHoldChanged {
        worker_id: worker.id.clone(),
        hold: None,
        reason: None,
        ask: None,
    })
}

#[cfg(test)]
mod tests {
    use protocol::ErrorCode;
    use protocol::continuity::{AttemptReason, ContinuationMode, ContinuationPolicy};

    use super::super::table::{Given, check};
    use super::*;

    fn auto() -> ContinuationPolicy {
        ContinuationPolicy { mode: ContinuationMode::Auto, ..ContinuationPolicy::default() }
    }

    /// The scheduler found attempt `attempt` of `worker` due on an idle wake.
    fn due_attempt(worker: WorkerId, attempt: u32) -> Request {
        let reason = AttemptReason::AutoResume;
        let action = Action::Schedule { worker, attempt, reason, wakes: vec![Wake::Idle], checkpoint: false };
        Request::ContinuityDue { actions: vec![action] }
    }

    /// A worker whose create completed and which attached: no command open.
    fn working(g: &mut Given, name: &str) -> WorkerId {
        let worker = g.created(name, "ext");
        g.apply(Request::Attach { worker_id: worker.clone() });
        worker
    }

    fn hold(actor: &WorkerId, target: &WorkerId, hold: Hold) -> Request {
        Request::SetHold { actor: actor.clone(), target: target.clone(), hold, reason: "why".into(), ask: None }
    }

    #[test]
    fn continuity_commands_by_state() {
        let mut rows = Vec::new();

        let mut g = Given::run();
        let a = g.attached("a");
        let c = Request::SetContinuation { actor: g.root.clone(), target: Some(a), policy: auto() };
        rows.push(("root sets a worker's policy", g, c, Ok(&["continuation.policy_changed"][..])));

        let mut g = Given::run();
        let a = g.attached("a");
        let (root, target) = (g.root.clone(), a.clone());
        g.apply(Request::SetContinuation { actor: root.clone(), target: Some(target), policy: auto() });
        let c = Request::SetContinuation { actor: root, target: Some(a), policy: auto() };
        rows.push(("the same policy again changes nothing", g, c, Ok(&[][..])));

        let mut g = Given::run();
        let a = g.attached("a");
        let c = Request::SetContinuation {
            actor: g.root.clone(),
            target: Some(a),
            policy: ContinuationPolicy { min_continuation_spacing_ms: 0, ..auto() },
        };
        rows.push(("a policy out of bounds is refused", g, c, Err(ErrorCode::InvalidArgument)));

        let mut g = Given::run();
        let a = g.attached("a");
        let c = Request::SetContinuation { actor: a, target: None, policy: auto() };
        rows.push(("a worker does not set the run's default", g, c, Err(ErrorCode::Forbidden)));

        let g = Given::run();
        let c = Request::SetContinuation { actor: g.root.clone(), target: None, policy: auto() };
        rows.push(("root sets the run's default", g, c, Ok(&["continuation.policy_changed"][..])));

        let mut g = Given::run();
        let a = g.attached("a");
        let c = hold(&a, &a, Hold::AwaitingHuman);
        rows.push(("a worker declares its own wait for a person", g, c, Ok(&["worker.hold_changed"][..])));

        let mut g = Given::run();
        let a = g.attached("a");
        let c = hold(&a, &a, Hold::Paused);
        rows.push(("a worker does not pause itself", g, c, Err(ErrorCode::Forbidden)));

        let mut g = Given::run();
        let a = g.attached("a");
        let b = g.attached("b");
        let c = hold(&a, &b, Hold::AwaitingDependency);
        rows.push(("nor holds another worker", g, c, Err(ErrorCode::Forbidden)));

        let mut g = Given::run();
        let a = g.attached("a");
        let c = hold(&g.root.clone(), &a, Hold::Stalled);
        rows.push(("only the guard pauses for a stall", g, c, Err(ErrorCode::InvalidArgument)));

        let mut g = Given::run();
        let a = g.attached("a");
        let root = g.root.clone();
        g.apply(hold(&a, &a, Hold::AwaitingHuman));
        let c = Request::ContinueNow { actor: root, target: a };
        rows.push(("continue now does not override a wait for a person", g, c, Err(ErrorCode::InvalidTransition)));

        let mut g = Given::run();
        let a = working(&mut g, "a");
        let root = g.root.clone();
        g.apply(hold(&root, &a, Hold::Paused));
        let c = Request::ContinueNow { actor: root, target: a };
        rows.push((
            "continue now clears a pause and asks for one turn",
            g,
            c,
            Ok(&["worker.hold_changed", "continuation.requested"][..]),
        ));

        let mut g = Given::run();
        let a = g.attached("a");
        let c = Request::ContinueNow { actor: g.root.clone(), target: a };
        rows.push(("continue now while the bootstrap's create is open asks for nothing more", g, c, Ok(&[][..])));

        let mut g = Given::run();
        let a = working(&mut g, "a");
        let root = g.root.clone();
        g.apply(Request::ContinueNow { actor: root.clone(), target: a.clone() });
        let c = Request::ContinueNow { actor: root, target: a };
        rows.push(("twice is once", g, c, Ok(&[][..])));

        let mut g = Given::run();
        let a = g.attached("a");
        let c = due_attempt(a, 1);
        rows.push((
            "a due attempt is scheduled with its command",
            g,
            c,
            Ok(&["execution.scheduled", "executor.command_queued"][..]),
        ));

        let mut g = Given::run();
        let a = g.attached("a");
        let c = due_attempt(a, 2);
        rows.push(("an attempt out of sequence is refused", g, c, Err(ErrorCode::InvalidTransition)));

        let mut g = Given::run();
        let a = g.attached("a");
        let c = Request::ContinuityDue {
            actions: vec![Action::Stalled {
                worker: a,
                level: StallLevel::Paused,
                attempts_without_progress: 20,
                quiet_ms: 0,
            }],
        };
        rows.push(("a stall pause holds the worker", g, c, Ok(&["continuation.stalled", "worker.hold_changed"][..])));

        check(rows);
    }

    #[test]
    fn an_attempts_command_is_the_same_on_every_replay() {
        let w = WorkerId::from_uuid_bytes([7; 16]);
        assert_eq!(attempt_command(&w, 3), attempt_command(&w, 3));
        assert_ne!(attempt_command(&w, 3), attempt_command(&w, 4));
    }
}
