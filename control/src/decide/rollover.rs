//! Worker rollover (see `crate::rollover` for when): a worker's own
//! checkpoint, root's request, and the rollover itself: the old
//! conversation retired, the capsule composed from the state (the log's
//! fold, never chat text), the fresh conversation's create queued under a
//! key of its epoch.

use protocol::rollover::{CHECKPOINT_MAX, Capsule, Done, LINEAGE_KEPT, ROLLOVERS_MAX, RolloverReason};

use super::*;

/// The rollover commands (routed here by [`super::decide`]).
pub(super) fn decide(state: &State, command: &Request) -> Result<Vec<EventBody>, Refusal> {
    match command {
        Request::Checkpoint { actor, note } => {
            let (run, worker) = acting(state, actor)?;
            require_open(run)?;
            require_working(worker)?;
            check_text("note", note, CHECKPOINT_MAX)?;
            Ok(vec![EventBody::WorkerCheckpointed { worker_id: actor.clone(), note: note.clone() }])
        }
        Request::AskRollover { actor, target, command_id } => {
            let (run, _) = root_actor(state, actor)?;
            require_open(run)?;
            let worker = match actor == target {
                // A managed root rolls itself over; a root that keeps its own
                // conversation has nothing of ours to roll.
                true => state.worker(actor).filter(|w| w.is_managed_root()).ok_or(Refusal::RootAsTarget)?,
                false => child_of_run(state, run, target)?,
            };
            rollable(state, worker)?;
            // Asked already, or rolling now (its fresh conversation's create
            // is open): once. A rolling worker whose create failed is asked
            // again: that is the retry.
            let creating = worker.rolling()
                && state
                    .open_commands
                    .iter()
                    .filter_map(|id| state.commands.get(id))
                    .any(|c| c.worker_id == worker.id && c.intent == CommandIntent::Create);
            if worker.rollover.is_some() || creating {
                return Ok(vec![]);
            }
            Ok(asked(state, worker, RolloverReason::Requested, command_id))
        }
        Request::Rollover { rolls, asks } => {
            let mut events = Vec::new();
            for (worker_id, reason, command_id) in asks {
                let worker = state.worker(worker_id).ok_or_else(|| Refusal::NoWorker(worker_id.clone()))?;
                rollable(state, worker)?;
                events.extend(asked(state, worker, *reason, command_id));
            }
            for (worker_id, reason, command_id) in rolls {
                let worker = state.worker(worker_id).ok_or_else(|| Refusal::NoWorker(worker_id.clone()))?;
                events.extend(rolled(state, worker, *reason, command_id)?);
            }
            Ok(events)
        }
        _ => unreachable!("decide routes only this family's commands here"),
    }
}

/// Whether `worker` can roll over: working, bound (or left unbound by a
/// rollover whose create failed), on an executor that rolls, not fenced,
/// below the bound.
fn rollable(state: &State, worker: &Worker) -> Result<(), Refusal> {
    require_working(worker)?;
    if worker.conversation.is_none() && !worker.rolling() {
        return Err(Refusal::NoConversation(worker.id.clone()));
    }
    if worker.epoch >= ROLLOVERS_MAX {
        return Err(Refusal::RolloversExhausted(worker.epoch));
    }
    if worker.fenced || !worker.executor_id.as_ref().is_some_and(|e| state.rolling_executors.contains(e)) {
        return Err(Refusal::NoRolloverCarrier(worker.id.clone()));
    }
    Ok(())
}

/// The request, and the prompt asking for a checkpoint unless the page
/// takes no more turns.
fn asked(state: &State, worker: &Worker, reason: RolloverReason, command_id: &CommandId) -> Vec<EventBody> {
    let mut events = vec![EventBody::WorkerRolloverRequested { worker_id: worker.id.clone(), reason }];
    let open = state.open_commands.iter().filter_map(|id| state.commands.get(id)).any(|c| {
        c.worker_id == worker.id && c.intent == CommandIntent::Send { prompt: PromptRef::Rollover, steer: false }
    });
    if !crate::rollover::full(worker) && !open && worker.conversation.is_some() {
        events.push(EventBody::CommandQueued {
            command_id: command_id.clone(),
            worker_id: worker.id.clone(),
            intent: CommandIntent::Send { prompt: PromptRef::Rollover, steer: false },
            idempotency_key: format!("rollover-ask:{}:{}", worker.id, worker.epoch + 1),
            not_before_ms: None,
        });
    }
    events
}

/// The rollover: queued commands dropped, the conversation retired with
/// the capsule, the fresh conversation's create queued.
fn rolled(
    state: &State,
    worker: &Worker,
    reason: RolloverReason,
    command_id: &CommandId,
) -> Result<Vec<EventBody>, Refusal> {
    rollable(state, worker)?;
    let open = state.open_commands.iter().filter_map(|id| state.commands.get(id)).filter(|c| c.worker_id == worker.id);
    if open.clone().any(|c| c.in_flight()) {
        return Err(Refusal::RolloverBusy(worker.id.clone()));
    }
    let mut events = cancel_queued(state, [&worker.id]);
    let run = state.runs.get(&worker.run_id).ok_or_else(|| Refusal::NoRun(worker.run_id.clone()))?;
    let capsule = capsule(worker, reason, run.cursor);
    events.push(EventBody::WorkerRolledOver {
        worker_id: worker.id.clone(),
        retired: worker.conversation.as_ref().map(|(id, _)| id.clone()),
        capsule: capsule.clone(),
    });
    events.push(EventBody::CommandQueued {
        command_id: command_id.clone(),
        worker_id: worker.id.clone(),
        intent: CommandIntent::Create,
        idempotency_key: format!("rollover:{}:{}", worker.id, capsule.epoch),
        not_before_ms: None,
    });
    Ok(events)
}

/// What the worker's fresh conversation is told: its lineage, its own
/// note, its last progress, what it finished, what is open, its wait, and
/// where the run's log stood. Cut to its bound.
pub(crate) fn capsule(worker: &Worker, reason: RolloverReason, cursor: u64) -> Capsule {
    let mut lineage = worker.retired.clone();
    lineage.extend(worker.conversation.as_ref().map(|(id, _)| id.clone()));
    lineage.drain(..lineage.len().saturating_sub(LINEAGE_KEPT));
    let newest = worker.followups.len() as u32;
    let finished = worker.completions.iter().any(|(n, _)| *n == newest);
    let waiting = match worker.continuity.hold {
        Some(protocol::continuity::Hold::AwaitingHuman | protocol::continuity::Hold::AwaitingDependency) => {
            worker.continuity.hold_reason.clone()
        }
        _ => None,
    };
    Capsule {
        epoch: worker.epoch + 1,
        reason,
        lineage,
        checkpoint: worker.checkpoint.as_ref().map(|(note, _)| note.clone()),
        last_progress: worker.last_progress.clone(),
        done: worker.completions.iter().map(|(n, summary)| Done { followup: *n, summary: summary.clone() }).collect(),
        open: if finished { vec![] } else { vec![newest] },
        waiting,
        cursor,
    }
    .fit()
}

#[cfg(test)]
mod tests {
    use protocol::executor::{CommandOutcome, ExecutorFrame, ExecutorKind};

    use super::super::table::{Given, check};
    use super::*;
    use crate::rollover::{RolloverPolicy, due};

    /// A run whose executor "ext" declares `capabilities`, with a running worker `a` on it.
    fn given(capabilities: &[&str]) -> (Given, WorkerId) {
        let mut g = Given::run();
        g.apply(Request::ExecutorConnected {
            executor_id: "ext".into(),
            executor_instance_id: "i1".into(),
            executor_kind: ExecutorKind::Fake,
            capabilities: capabilities.iter().map(|c| c.to_string()).collect(),
            host: Default::default(),
        });
        let a = g.created("a", "ext");
        g.apply(Request::Attach { worker_id: a.clone() });
        (g, a)
    }

    fn rolling() -> (Given, WorkerId) {
        given(&[protocol::executor::ROLLOVER])
    }

    fn page(g: &mut Given, a: &WorkerId, error: Option<ErrorCode>) {
        let state = if error.is_some() { ConversationState::Error } else { ConversationState::Idle };
        let frame = ExecutorFrame::ConversationState { worker_id: a.clone(), state, error };
        g.apply(Request::ExecutorReport { executor_id: "ext".into(), frame });
    }

    fn roll(g: &mut Given, a: &WorkerId, reason: RolloverReason) -> Request {
        Request::Rollover { rolls: vec![(a.clone(), reason, CommandId::from_uuid_bytes(g.id()))], asks: vec![] }
    }

    fn ask(g: &mut Given, a: &WorkerId) -> Request {
        Request::AskRollover {
            actor: g.root.clone(),
            target: a.clone(),
            command_id: CommandId::from_uuid_bytes(g.id()),
        }
    }

    #[test]
    fn rollover_commands_by_state() {
        let mut rows = Vec::new();

        let (mut g, a) = rolling();
        let c = roll(&mut g, &a, RolloverReason::TooLong);
        rows.push((
            "a bound, idle worker rolls: retired, its fresh create queued",
            g,
            c,
            Ok(&["worker.rolled_over", "executor.command_queued"][..]),
        ));

        let (mut g, a) = rolling();
        let f = Request::Followup {
            actor: g.root.clone(),
            target: a.clone(),
            instructions: "more".into(),
            send_command: CommandId::from_uuid_bytes(g.id()),
        };
        g.apply(f);
        let c = roll(&mut g, &a, RolloverReason::TooLong);
        rows.push((
            "its queued wake is dropped: the fresh attach carries the follow-up",
            g,
            c,
            Ok(&["executor.command_cancelled", "worker.rolled_over", "executor.command_queued"][..]),
        ));

        let (mut g, a) = rolling();
        let f = Request::Followup {
            actor: g.root.clone(),
            target: a.clone(),
            instructions: "more".into(),
            send_command: CommandId::from_uuid_bytes(g.id()),
        };
        g.apply(f);
        let wake = g.open_command(&a);
        g.apply(Request::Dispatch { command_id: wake, executor_id: "ext".into() });
        let c = roll(&mut g, &a, RolloverReason::TooLong);
        rows.push(("not while a command is in flight", g, c, Err(ErrorCode::InvalidTransition)));

        let (mut g, a) = given(&[]);
        let c = roll(&mut g, &a, RolloverReason::TooLong);
        rows.push(("not on an executor that declared no rollover", g, c, Err(ErrorCode::InvalidTransition)));

        let (mut g, a) = rolling();
        g.apply(Request::Complete { actor: a.clone(), summary: "done".into(), artifacts: vec![] });
        let c = roll(&mut g, &a, RolloverReason::Requested);
        rows.push(("not a finished worker", g, c, Err(ErrorCode::InvalidTransition)));

        let (mut g, a) = rolling();
        let c = ask(&mut g, &a);
        rows.push((
            "root's request prompts for a checkpoint",
            g,
            c,
            Ok(&["worker.rollover_requested", "executor.command_queued"][..]),
        ));

        let (mut g, a) = rolling();
        page(&mut g, &a, Some(ErrorCode::ConversationTooLong));
        let c = ask(&mut g, &a);
        rows.push(("nothing is typed into a full conversation", g, c, Ok(&["worker.rollover_requested"][..])));

        let (mut g, a) = rolling();
        let first = ask(&mut g, &a);
        g.apply(first);
        let c = ask(&mut g, &a);
        rows.push(("asked twice: once", g, c, Ok(&[][..])));

        let (mut g, a) = rolling();
        let c = Request::AskRollover {
            actor: a.clone(),
            target: a.clone(),
            command_id: CommandId::from_uuid_bytes(g.id()),
        };
        rows.push(("a worker does not ask", g, c, Err(ErrorCode::Forbidden)));

        let (g, _) = rolling();
        let root = g.root.clone();
        let c =
            Request::AskRollover { actor: root.clone(), target: root, command_id: CommandId::from_uuid_bytes([9; 16]) };
        rows.push(("a root keeping its own conversation has nothing to roll", g, c, Err(ErrorCode::InvalidArgument)));

        let (g, a) = rolling();
        let c = Request::Checkpoint { actor: a, note: "done: x; next: y".into() };
        rows.push(("a worker writes its checkpoint", g, c, Ok(&["worker.checkpointed"][..])));

        let (g, a) = rolling();
        let c = Request::Checkpoint { actor: a, note: "x".repeat(protocol::rollover::CHECKPOINT_MAX + 1) };
        rows.push(("a checkpoint over its bound", g, c, Err(ErrorCode::TooLarge)));

        check(rows);
    }

    #[test]
    fn a_rollover_retires_the_conversation_and_the_fresh_one_binds_at_the_next_epoch() {
        let (mut g, a) = rolling();
        g.apply(Request::Checkpoint { actor: a.clone(), note: "half done".into() });
        g.apply(Request::Progress { actor: a.clone(), summary: "step 1".into(), percent: Some(50) });
        let old = g.state.workers[&a].conversation.clone().unwrap().0;
        let r = roll(&mut g, &a, RolloverReason::TooLong);
        g.apply(r);
        let w = &g.state.workers[&a];
        assert_eq!((w.epoch, w.retired.clone(), w.conversation.clone()), (1, vec![old.clone()], None));
        let capsule = w.capsule.clone().unwrap();
        assert_eq!(capsule.lineage, vec![old.clone()]);
        assert_eq!(capsule.checkpoint.as_deref(), Some("half done"));
        assert_eq!((capsule.last_progress.as_deref(), capsule.open.clone()), (Some("step 1"), vec![0]));
        assert!(w.rolling() && w.state == WorkerState::Running);
        // A late report of the retired conversation binds nothing.
        let late = ExecutorFrame::ConversationBound {
            worker_id: a.clone(),
            conversation_id: old.clone(),
            url: format!("https://chatgpt.com/c/{old}"),
        };
        assert_eq!(
            super::super::decide(&g.state, &Request::ExecutorReport { executor_id: "ext".into(), frame: late }),
            Ok(vec![])
        );
        // The fresh one binds through the create path.
        let create = g.open_command(&a);
        let key = g.state.commands[&create].idempotency_key.clone();
        assert_eq!(key, format!("rollover:{a}:1"));
        g.apply(Request::Dispatch { command_id: create.clone(), executor_id: "ext".into() });
        let fresh: protocol::ConversationId = "0196b2c4-8e1f-7a3b-9c2d-00000000ffff".parse().unwrap();
        let outcome = CommandOutcome::Ok { conversation_id: Some(fresh.clone()) };
        g.apply(Request::ExecutorReport {
            executor_id: "ext".into(),
            frame: ExecutorFrame::Result { command_id: create, outcome },
        });
        let w = &g.state.workers[&a];
        assert_eq!(w.conversation.as_ref().map(|c| &c.0), Some(&fresh));
        assert!(!w.rolling());
    }

    #[test]
    fn what_falls_due_by_the_page_the_request_and_the_meter() {
        let policy = RolloverPolicy { at_bytes: Some(10_000), checkpoint_wait_ms: 60_000 };
        let (mut g, a) = rolling();
        assert!(due(&g.state, policy, 5_000).is_empty());
        page(&mut g, &a, Some(ErrorCode::ConversationTooLong));
        assert_eq!(due(&g.state, policy, 5_000).rolls, vec![(a.clone(), RolloverReason::TooLong)]);

        // The meter asks; the request waits for the checkpoint, or its wait.
        let (mut g, a) = rolling();
        g.apply(Request::Progress { actor: a.clone(), summary: "x".repeat(10_000), percent: None });
        let found = due(&g.state, policy, 5_000);
        assert_eq!((found.asks.clone(), found.rolls.len()), (vec![(a.clone(), RolloverReason::ContextMeter)], 0));
        let c = CommandId::from_uuid_bytes(g.id());
        g.apply(Request::Rollover { rolls: vec![], asks: vec![(a.clone(), RolloverReason::ContextMeter, c)] });
        assert!(due(&g.state, policy, 5_000).is_empty(), "waits for the checkpoint");
        let since = g.state.workers[&a].rollover.unwrap().1;
        assert_eq!(crate::rollover::next_due_at(&g.state, policy, 5_000), Some(since + 60_000));
        assert_eq!(due(&g.state, policy, since + 60_000).rolls, vec![(a.clone(), RolloverReason::ContextMeter)]);
        g.apply(Request::Checkpoint { actor: a.clone(), note: "n".into() });
        assert_eq!(due(&g.state, policy, 5_000).rolls, vec![(a, RolloverReason::ContextMeter)]);

        // Without the capability nothing is due, whatever the page says.
        let (mut g, a) = given(&[]);
        page(&mut g, &a, Some(ErrorCode::ConversationTooLong));
        assert!(due(&g.state, policy, 5_000).is_empty());
    }

    /// Main (a managed root) rolls over like a worker: its own request, or
    /// its full page; its workers keep addressing it by id.
    #[test]
    fn a_managed_root_rolls_itself_over_and_its_workers_still_reach_it() {
        let mut g = Given::run();
        g.apply(Request::ExecutorConnected {
            executor_id: "ext".into(),
            executor_instance_id: "i1".into(),
            executor_kind: ExecutorKind::Fake,
            capabilities: vec![protocol::executor::ROLLOVER.into()],
            host: Default::default(),
        });
        // A second run whose root the daemon launched into a conversation of its own.
        let (run_id, root) = (protocol::RunId::from_uuid_bytes([0xB0; 16]), WorkerId::from_uuid_bytes([0xB1; 16]));
        let managed = ManagedRoot {
            assignment: Assignment::from_objective("coordinate"),
            create_command: CommandId::from_uuid_bytes([0xB2; 16]),
        };
        g.run = run_id.clone();
        g.root = root.clone();
        g.apply(Request::CreateRun {
            run_id,
            root_id: root.clone(),
            title: "main".into(),
            managed: Some(managed),
            attribution: protocol::Attribution::Required,
        });
        let create = g.open_command(&root);
        g.apply(Request::Dispatch { command_id: create.clone(), executor_id: "ext".into() });
        let conversation: protocol::ConversationId = "0196b2c4-8e1f-7a3b-9c2d-0000000000b3".parse().unwrap();
        let outcome = CommandOutcome::Ok { conversation_id: Some(conversation.clone()) };
        g.apply(Request::ExecutorReport {
            executor_id: "ext".into(),
            frame: ExecutorFrame::Result { command_id: create, outcome },
        });
        g.apply(Request::Attach { worker_id: root.clone() });
        let a = g.attached("a");
        let asked = Request::AskRollover {
            actor: root.clone(),
            target: root.clone(),
            command_id: CommandId::from_uuid_bytes(g.id()),
        };
        assert_eq!(kinds(&g.apply(asked)), ["worker.rollover_requested", "executor.command_queued"]);
        page(&mut g, &root, Some(ErrorCode::ConversationTooLong));
        let found = due(&g.state, RolloverPolicy::default(), 5_000);
        assert_eq!(found.rolls, vec![(root.clone(), RolloverReason::TooLong)], "a full page rolls at once");
        let r = roll(&mut g, &root, RolloverReason::TooLong);
        g.apply(r);
        let main = &g.state.workers[&root];
        assert!(
            main.rolling() && main.retired == vec![conversation] && main.capsule.as_ref().is_some_and(|c| c.epoch == 1)
        );
        let message = Request::Send {
            actor: a,
            message_id: protocol::MessageId::from_uuid_bytes(g.id()),
            to: root,
            kind: protocol::MessageKind::Question,
            body: "still there?".into(),
            in_reply_to: None,
            replied: None,
        };
        assert_eq!(kinds(&g.apply(message))[0], "worker.message");
    }

    fn kinds(events: &[EventBody]) -> Vec<&'static str> {
        events.iter().map(EventBody::kind).collect()
    }

    /// The review's cases: a second request while the fresh conversation's
    /// create is open is nothing; the retired tab's reports say nothing; a
    /// refused rollover create pauses the worker, keeps its executor, and a
    /// second request rolls it again; a large assignment does not roll a
    /// fresh conversation over by the meter.
    #[test]
    fn a_rolling_worker_is_asked_once_hears_nothing_from_its_old_tab_and_retries_a_refused_create() {
        let (mut g, a) = rolling();
        let r = roll(&mut g, &a, RolloverReason::TooLong);
        g.apply(r);
        let again = ask(&mut g, &a);
        assert_eq!(super::super::decide(&g.state, &again), Ok(vec![]), "its create is open");
        let old_tab = ExecutorFrame::ConversationState {
            worker_id: a.clone(),
            state: ConversationState::Error,
            error: Some(ErrorCode::ConversationTooLong),
        };
        let report = Request::ExecutorReport { executor_id: "ext".into(), frame: old_tab };
        assert_eq!(super::super::decide(&g.state, &report), Ok(vec![]), "the retired tab's report");
        // The create is refused for a setup state: paused, still held by ext.
        let create = g.open_command(&a);
        g.apply(Request::Dispatch { command_id: create.clone(), executor_id: "ext".into() });
        let outcome = CommandOutcome::Error { code: ErrorCode::ChatgptSignedOut, detail: "signed out".into() };
        let events = g.apply(Request::ExecutorReport {
            executor_id: "ext".into(),
            frame: ExecutorFrame::Result { command_id: create, outcome },
        });
        let kinds: Vec<_> = events.iter().map(EventBody::kind).collect();
        assert_eq!(kinds, ["executor.command_completed", "conversation.error", "worker.hold_changed"]);
        let w = &g.state.workers[&a];
        assert!(w.rolling() && w.executor_id.as_deref() == Some("ext"));
        // Asked again: the retry, at the next epoch.
        let again = ask(&mut g, &a);
        g.apply(again);
        let found = due(&g.state, RolloverPolicy::default(), 5_000);
        assert_eq!(found.rolls, vec![(a.clone(), RolloverReason::Requested)]);
        let r = Request::Rollover {
            rolls: vec![(a.clone(), RolloverReason::Requested, CommandId::from_uuid_bytes(g.id()))],
            asks: vec![],
        };
        g.apply(r);
        assert_eq!(g.state.workers[&a].epoch, 2);
    }

    #[test]
    fn the_meter_counts_from_the_conversations_first_attach() {
        let policy = RolloverPolicy { at_bytes: Some(10_000), checkpoint_wait_ms: 60_000 };
        let mut g = Given::run();
        g.apply(Request::ExecutorConnected {
            executor_id: "ext".into(),
            executor_instance_id: "i1".into(),
            executor_kind: ExecutorKind::Fake,
            capabilities: vec![protocol::executor::ROLLOVER.into()],
            host: Default::default(),
        });
        let big = Assignment::from_objective("x".repeat(20_000));
        let (a, create_command) = (WorkerId::from_uuid_bytes(g.id()), CommandId::from_uuid_bytes(g.id()));
        let actor = g.root.clone();
        g.apply(Request::Spawn {
            actor,
            worker_id: a.clone(),
            name: "big".into(),
            assignment: big,
            create_command: create_command.clone(),
            model: None,
            effort: None,
        });
        g.apply(Request::Dispatch { command_id: create_command.clone(), executor_id: "ext".into() });
        let conversation: protocol::ConversationId = "0196b2c4-8e1f-7a3b-9c2d-00000000beef".parse().unwrap();
        let outcome = CommandOutcome::Ok { conversation_id: Some(conversation) };
        g.apply(Request::ExecutorReport {
            executor_id: "ext".into(),
            frame: ExecutorFrame::Result { command_id: create_command, outcome },
        });
        g.apply(Request::Attach { worker_id: a.clone() });
        assert!(g.state.workers[&a].context_bytes > 20_000);
        assert!(due(&g.state, policy, 5_000).is_empty(), "its assignment alone asks for nothing");
        g.apply(Request::Progress { actor: a.clone(), summary: "y".repeat(10_000), percent: None });
        assert_eq!(due(&g.state, policy, 5_000).asks, vec![(a, RolloverReason::ContextMeter)]);
    }
}
