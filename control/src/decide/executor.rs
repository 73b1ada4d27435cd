//! Executors: connections, dispatch rounds, inspects (`crate::schedule`), and
//! what an executor reports about its commands and conversations.

use super::*;

/// The executor commands (routed here by [`super::decide`]).
pub(super) fn decide(state: &State, command: &Request) -> Result<Vec<EventBody>, Refusal> {
    match command {
        Request::ExecutorConnected { executor_id, executor_instance_id, executor_kind, capabilities, host } => {
            Ok(vec![EventBody::ExecutorConnected {
                executor_id: executor_id.clone(),
                executor_instance_id: executor_instance_id.clone(),
                executor_kind: *executor_kind,
                capabilities: capabilities.clone(),
                host: host.clone(),
            }])
        }
        Request::ExecutorDisconnected { executor_id, executor_instance_id, reason } => {
            Ok(vec![EventBody::ExecutorDisconnected {
                executor_id: executor_id.clone(),
                executor_instance_id: executor_instance_id.clone(),
                reason: reason.clone(),
            }])
        }
        Request::Dispatch { command_id, executor_id } => Ok(vec![dispatched(state, command_id, executor_id)?]),
        Request::Recheck { inspections } => inspects(state, inspections),
        Request::Tabs { parks, opens } => tabs(state, parks, opens),
        Request::Relaunch { relaunches } => relaunched(state, relaunches),
        Request::Round { dispatches } => dispatched_all(state, dispatches),
        Request::ExecutorReport { executor_id, frame } => report(state, executor_id, frame),
        Request::HostState { worker_id, code, detail } => {
            let worker = state.worker(worker_id).ok_or_else(|| Refusal::NoWorker(worker_id.clone()))?;
            if !code.is_host_state() {
                return Err(Refusal::NotAHostState(*code));
            }
            Ok(if worker.last_error == Some(*code) {
                vec![]
            } else {
                vec![EventBody::ConversationError { worker_id: worker_id.clone(), code: *code, detail: detail.clone() }]
            })
        }
        _ => unreachable!("decide routes only this family's commands here"),
    }
}

/// A create queued again for each spawned worker that waits for its
/// browser, under a key of its own (the refused one opened nothing).
fn relaunched(state: &State, relaunches: &[(WorkerId, CommandId)]) -> Result<Vec<EventBody>, Refusal> {
    relaunches
        .iter()
        .map(|(worker_id, command_id)| {
            let worker = state.worker(worker_id).ok_or_else(|| Refusal::NoWorker(worker_id.clone()))?;
            let placed = worker.conversation.is_some() || worker.executor_id.is_some();
            if !matches!(worker.state, WorkerState::LaunchRequested | WorkerState::Launching) || placed {
                return Err(Refusal::WorkerIs(worker.state));
            }
            let attempt = crate::schedule::creates_of(state, worker_id) + 1;
            Ok(EventBody::CommandQueued {
                command_id: command_id.clone(),
                worker_id: worker_id.clone(),
                intent: CommandIntent::Create,
                idempotency_key: format!("create:{worker_id}:attempt{attempt}"),
                not_before_ms: None,
            })
        })
        .collect()
}

/// The inspects of a recheck: one command per worker with a conversation.
fn inspects(state: &State, inspections: &[(WorkerId, CommandId)]) -> Result<Vec<EventBody>, Refusal> {
    inspections
        .iter()
        .map(|(worker_id, command_id)| {
            let worker = state.worker(worker_id).ok_or_else(|| Refusal::NoWorker(worker_id.clone()))?;
            if worker.conversation.is_none() {
                return Err(Refusal::NoConversation(worker_id.clone()));
            }
            Ok(EventBody::CommandQueued {
                command_id: command_id.clone(),
                worker_id: worker_id.clone(),
                intent: CommandIntent::Inspect,
                idempotency_key: format!("inspect:{command_id}"),
                not_before_ms: None,
            })
        })
        .collect()
}

/// The parks and reopens of tab capacity: a park only of a placed, bound,
/// unparked worker, a reopen only of a parked one.
fn tabs(
    state: &State,
    parks: &[(WorkerId, CommandId)],
    opens: &[(WorkerId, CommandId)],
) -> Result<Vec<EventBody>, Refusal> {
    let each = |(worker_id, command_id): &(WorkerId, CommandId), intent: CommandIntent| {
        let worker = state.worker(worker_id).ok_or_else(|| Refusal::NoWorker(worker_id.clone()))?;
        if worker.conversation.is_none() || worker.executor_id.is_none() {
            return Err(Refusal::NoConversation(worker_id.clone()));
        }
        if worker.parked != (intent == CommandIntent::Open) {
            return Err(Refusal::WorkerIs(worker.state));
        }
        let verb = if intent == CommandIntent::Open { "reopen" } else { "park" };
        Ok(EventBody::CommandQueued {
            command_id: command_id.clone(),
            worker_id: worker_id.clone(),
            intent,
            idempotency_key: format!("{verb}:{command_id}"),
            not_before_ms: None,
        })
    };
    let parks = parks.iter().map(|p| each(p, CommandIntent::Park));
    parks.chain(opens.iter().map(|o| each(o, CommandIntent::Open))).collect()
}

/// The dispatches of a round, each as [`dispatched`].
fn dispatched_all(state: &State, dispatches: &[(CommandId, String)]) -> Result<Vec<EventBody>, Refusal> {
    dispatches.iter().map(|(command_id, executor_id)| dispatched(state, command_id, executor_id)).collect()
}

/// The dispatch of one queued command to an executor, which must be the one
/// holding the worker, if any holds it.
fn dispatched(state: &State, command_id: &CommandId, executor_id: &str) -> Result<EventBody, Refusal> {
    let command = known_command(state, command_id)?;
    let worker = state.worker(&command.worker_id).ok_or_else(|| Refusal::NoWorker(command.worker_id.clone()))?;
    if let Some(bound) = &worker.executor_id
        && bound != executor_id
    {
        return Err(Refusal::BoundElsewhere(worker.id.clone()));
    }
    match command.phase {
        CommandPhase::Queued => Ok(EventBody::CommandDispatched {
            command_id: command_id.clone(),
            worker_id: command.worker_id.clone(),
            executor_id: executor_id.to_owned(),
        }),
        CommandPhase::Dispatched | CommandPhase::Acked | CommandPhase::Completed | CommandPhase::Cancelled => {
            Err(Refusal::NotQueued(command_id.clone()))
        }
    }
}

/// Applies what an executor reported. Duplicates (a second ack, a result
/// delivered twice, the same binding again) record nothing; anything about a
/// command or worker held by another executor is refused. What a page says
/// of a worker between its rollover and its fresh conversation's binding
/// comes from its retired tab, or a new chat not yet bound: nothing.
fn report(state: &State, executor_id: &str, frame: &ExecutorFrame) -> Result<Vec<EventBody>, Refusal> {
    if let ExecutorFrame::ConversationState { worker_id, .. }
    | ExecutorFrame::ConversationProgress { worker_id }
    | ExecutorFrame::ConversationError { worker_id, .. }
    | ExecutorFrame::ConversationClosed { worker_id } = frame
        && held_worker(state, executor_id, worker_id)?.rolling()
    {
        return Ok(vec![]);
    }
    match frame {
        ExecutorFrame::Hello { .. } | ExecutorFrame::Heartbeat { .. } => Err(Refusal::SessionFrame),
        ExecutorFrame::Ack { command_id } => {
            let command = held_command(state, executor_id, command_id)?;
            match command.phase {
                CommandPhase::Dispatched => {
                    let mut events = vec![EventBody::CommandAcked {
                        command_id: command_id.clone(),
                        worker_id: command.worker_id.clone(),
                    }];
                    let worker = state.worker(&command.worker_id).expect("commands name known workers");
                    if command.intent == CommandIntent::Create && worker.state == WorkerState::LaunchRequested {
                        events.push(state_change(
                            &worker.id,
                            WorkerState::LaunchRequested,
                            WorkerState::Launching,
                            Some("executor acknowledged"),
                        ));
                    }
                    Ok(events)
                }
                CommandPhase::Acked | CommandPhase::Completed => Ok(vec![]),
                CommandPhase::Queued | CommandPhase::Cancelled => Err(Refusal::NeverDispatched(command_id.clone())),
            }
        }
        ExecutorFrame::Result { command_id, outcome } => {
            let command = held_command(state, executor_id, command_id)?;
            match command.phase {
                CommandPhase::Dispatched | CommandPhase::Acked => {}
                CommandPhase::Completed => return Ok(vec![]),
                CommandPhase::Queued | CommandPhase::Cancelled => {
                    return Err(Refusal::NeverDispatched(command_id.clone()));
                }
            }
            let worker = state.worker(&command.worker_id).expect("commands name known workers");
            let mut events = vec![EventBody::CommandCompleted {
                command_id: command_id.clone(),
                worker_id: worker.id.clone(),
                outcome: outcome.clone(),
            }];
            if let CommandOutcome::Error { code, detail } = outcome {
                let continuation = worker.continuity.in_flight.as_ref() == Some(command_id);
                events.extend(continuity_effects(worker, *code, detail, Seen::Result { continuation }));
            }
            match (outcome, &command.intent) {
                (CommandOutcome::Ok { conversation_id: Some(id) }, CommandIntent::Create)
                    if worker.conversation.is_none() && !worker.retired.contains(id) =>
                {
                    events.push(bind(state, worker, id, &format!("https://chatgpt.com/c/{id}"), executor_id));
                }
                (CommandOutcome::Ok { .. }, _) => {}
                // A rollover's create refused: the worker waits, unbound, for
                // a person or root to look (worker_rollover tries again).
                (CommandOutcome::Error { code, detail }, CommandIntent::Create)
                    if !code.outcome_uncertain() && worker.rolling() =>
                {
                    events.push(EventBody::ConversationError {
                        worker_id: worker.id.clone(),
                        code: *code,
                        detail: detail.clone(),
                    });
                    if worker.continuity.hold.is_none() {
                        events.push(EventBody::WorkerHoldChanged {
                            worker_id: worker.id.clone(),
                            hold: Some(protocol::continuity::Hold::Paused),
                            reason: Some(format!(
                                "{code}: the fresh conversation of its rollover was not created; \
                                 worker_rollover tries again, worker_resume then releases this pause"
                            )),
                            ask: None,
                        });
                    }
                }
                // Nothing went in: the executor did not act (it never starts
                // past the deadline, e.g. the page stayed generating), a
                // person's draft stood in the composer, or the executor could
                // not reach the browser (asleep, stopped, not authorized). The
                // page is then recorded as waiting for the person or the
                // browser: the queue holds sends, and the recheck inspects it,
                // until it is not. The wake goes out again as a new command, up
                // to SEND_ATTEMPTS_MAX attempts (the last refusal stays in the
                // log for root to see).
                (
                    CommandOutcome::Error {
                        code:
                            code @ (ErrorCode::DeadlineExceeded
                            | ErrorCode::ComposerHasDraft
                            | ErrorCode::BrowserControlUnavailable
                            | ErrorCode::BrowserAuthorizationRequired
                            | ErrorCode::NotFound),
                        detail,
                    },
                    CommandIntent::Send { prompt, .. },
                ) if !matches!(worker.state, WorkerState::Failed | WorkerState::Cancelled)
                    && !wake_outdated(worker, prompt) =>
                {
                    if crate::schedule::waits_for_browser(*code) {
                        events.push(EventBody::ConversationError {
                            worker_id: worker.id.clone(),
                            code: *code,
                            detail: detail.clone(),
                        });
                    }
                    // The executor holds no tab for it (lost before the daemon
                    // heard, e.g. the browser restarted meanwhile): as a closed
                    // tab, its conversation is opened again before the send.
                    if *code == ErrorCode::NotFound {
                        if !worker.parked {
                            events.push(EventBody::ConversationClosed { worker_id: worker.id.clone() });
                        }
                    } else if *code != ErrorCode::DeadlineExceeded {
                        events.push(EventBody::ConversationStateChanged {
                            worker_id: worker.id.clone(),
                            state: ConversationState::Error,
                            error: Some(*code),
                        });
                    }
                    let attempts = state
                        .commands
                        .values()
                        .filter(|c| c.worker_id == worker.id && c.intent == command.intent)
                        .count();
                    if attempts < SEND_ATTEMPTS_MAX {
                        let first_key = command.idempotency_key.split(":attempt").next().unwrap_or_default();
                        events.push(EventBody::CommandQueued {
                            command_id: retry_id(command_id),
                            worker_id: worker.id.clone(),
                            intent: command.intent.clone(),
                            idempotency_key: format!("{first_key}:attempt{}", attempts + 1),
                            not_before_ms: None,
                        });
                    }
                }
                // A host or setup state (the app not bound, signed out…) is not a
                // worker's failure: it is recorded where runtime_status reads its
                // readiness reasons; runtime_recover retries a pool create. A
                // spawned worker's create is queued again only when it waits for
                // the browser (`crate::schedule`); otherwise its launch fails, with the code.
                (CommandOutcome::Error { code, detail }, intent)
                    if code.is_host_state()
                        && (*intent != CommandIntent::Create
                            || state.runtime.by_worker(&worker.id).is_some()
                            || crate::schedule::waits_for_browser(*code)) =>
                {
                    events.push(EventBody::ConversationError {
                        worker_id: worker.id.clone(),
                        code: *code,
                        detail: detail.clone(),
                    });
                    // A send that could not reach the page (one no longer due,
                    // so not queued again) still marks the page unreachable:
                    // nothing more is sent into it until it answers.
                    if matches!(intent, CommandIntent::Send { .. }) && crate::schedule::waits_for_browser(*code) {
                        events.push(EventBody::ConversationStateChanged {
                            worker_id: worker.id.clone(),
                            state: ConversationState::Error,
                            error: Some(*code),
                        });
                    }
                }
                (CommandOutcome::Error { code, .. }, CommandIntent::Create) if !code.outcome_uncertain() => {
                    if matches!(worker.state, WorkerState::LaunchRequested | WorkerState::Launching) {
                        events.push(state_change(
                            &worker.id,
                            worker.state,
                            WorkerState::LaunchFailed,
                            Some(code.as_str()),
                        ));
                        events.extend(cancel_queued(state, [&worker.id]));
                    }
                }
                // The pinned model is gone from the picker: recorded where the
                // operator reads it (the pause comes with the continuity effects).
                (CommandOutcome::Error { code: ErrorCode::ModelUnavailable, detail }, CommandIntent::Send { .. }) => {
                    events.push(EventBody::ConversationError {
                        worker_id: worker.id.clone(),
                        code: ErrorCode::ModelUnavailable,
                        detail: detail.clone(),
                    });
                }
                // An uncertain outcome retries nothing: the command stays
                // completed-with-error for exact readback and reconciliation.
                (CommandOutcome::Error { .. }, _) => {}
            }
            Ok(events)
        }
        ExecutorFrame::ConversationCreated { command_id, worker_id } => {
            let command = held_command(state, executor_id, command_id)?;
            if &command.worker_id != worker_id {
                return Err(Refusal::CreatedForAnother);
            }
            let worker = held_worker(state, executor_id, worker_id)?;
            Ok(if worker.conversation_created {
                vec![]
            } else {
                vec![EventBody::ConversationCreated { worker_id: worker_id.clone(), command_id: command_id.clone() }]
            })
        }
        ExecutorFrame::ConversationBound { worker_id, conversation_id, url } => {
            let worker = held_worker(state, executor_id, worker_id)?;
            match &worker.conversation {
                // A late word from a conversation it rolled over from.
                _ if worker.retired.contains(conversation_id) => Ok(vec![]),
                None => Ok(vec![bind(state, worker, conversation_id, url, executor_id)]),
                Some((bound, _)) if bound == conversation_id => Ok(vec![]),
                Some((bound, _)) => Ok(vec![EventBody::ConversationError {
                    worker_id: worker_id.clone(),
                    code: ErrorCode::ConversationIdentityDrift,
                    detail: format!("executor reported {conversation_id}, bound to {bound}"),
                }]),
            }
        }
        // One meaning for "closed": `conversationState{closed}` is the managed
        // tab gone, exactly as `conversationClosed` (the slot is lost either way).
        ExecutorFrame::ConversationState { worker_id, state: ConversationState::Closed, .. } => {
            let worker = held_worker(state, executor_id, worker_id)?;
            Ok(if already_closed(worker) {
                vec![]
            } else {
                vec![EventBody::ConversationClosed { worker_id: worker_id.clone() }]
            })
        }
        ExecutorFrame::ConversationState { worker_id, state: observed, error } => {
            let worker = held_worker(state, executor_id, worker_id)?;
            if worker.conversation_state == Some(*observed) && *observed != ConversationState::Error {
                return Ok(vec![]);
            }
            let mut events = vec![EventBody::ConversationStateChanged {
                worker_id: worker_id.clone(),
                state: *observed,
                error: *error,
            }];
            if let Some(code) = error {
                events.extend(continuity_effects(worker, *code, "", Seen::Page));
            }
            Ok(events)
        }
        // Recorded only for a turn the daemon sees running: anything else is
        // a report from before the page settled, and says nothing new.
        ExecutorFrame::ConversationProgress { worker_id } => {
            let worker = held_worker(state, executor_id, worker_id)?;
            Ok(if worker.conversation_state == Some(ConversationState::Generating) {
                vec![EventBody::ConversationProgressed { worker_id: worker_id.clone() }]
            } else {
                vec![]
            })
        }
        ExecutorFrame::ConversationError { worker_id, code, detail } => {
            let worker = held_worker(state, executor_id, worker_id)?;
            let mut events = vec![EventBody::ConversationError {
                worker_id: worker_id.clone(),
                code: *code,
                detail: detail.clone(),
            }];
            events.extend(continuity_effects(worker, *code, detail, Seen::Page));
            Ok(events)
        }
        ExecutorFrame::ConversationClosed { worker_id } => {
            let worker = held_worker(state, executor_id, worker_id)?;
            Ok(if already_closed(worker) {
                vec![]
            } else {
                vec![EventBody::ConversationClosed { worker_id: worker_id.clone() }]
            })
        }
        // A person at the browser blocked or unblocked the chat.
        ExecutorFrame::ConversationBlock { worker_id, blocked } => {
            let worker = held_worker(state, executor_id, worker_id)?;
            Ok(super::attribution::block_changed(worker, *blocked, protocol::BlockedBy::Person, None))
        }
        // Sightings are the bridge's to match with calls, not the log's.
        ExecutorFrame::CallerSeen { .. } | ExecutorFrame::OperatorAct { .. } | ExecutorFrame::PageInspected { .. } => {
            Err(Refusal::SessionFrame)
        }
    }
}

/// Whether a closed report says nothing new: the worker already reads
/// closed and (if bound) is parked, so its next prompt reopens it.
fn already_closed(worker: &crate::model::Worker) -> bool {
    worker.conversation_state == Some(ConversationState::Closed) && (worker.parked || worker.conversation.is_none())
}

/// Binds a worker's first observed conversation, unless another worker already
/// holds that conversation: then it is identity drift, recorded and fenced,
/// never a second mapping of one conversation.
fn bind(
    state: &State,
    worker: &Worker,
    conversation: &protocol::ConversationId,
    url: &str,
    executor_id: &str,
) -> EventBody {
    let taken = state
        .workers
        .values()
        .any(|w| w.id != worker.id && w.conversation.as_ref().is_some_and(|(c, _)| c == conversation));
    if taken {
        return EventBody::ConversationError {
            worker_id: worker.id.clone(),
            code: ErrorCode::ConversationIdentityDrift,
            detail: format!("conversation {conversation} already belongs to another worker"),
        };
    }
    EventBody::ConversationBound {
        worker_id: worker.id.clone(),
        conversation_id: conversation.clone(),
        url: url.to_owned(),
        executor_id: executor_id.to_owned(),
    }
}

/// Whether a wake no longer needs to go out: a newer follow-up's wake
/// follows (and carries this one), or the worker already finished it. A
/// resume or checkpoint is never sent again as it was: the continuity
/// rules decide afresh whether a new attempt is due.
fn wake_outdated(worker: &Worker, prompt: &PromptRef) -> bool {
    match prompt {
        PromptRef::Followup { seq } => {
            (*seq as usize) < worker.followups.len() || worker.completions.iter().any(|(n, _)| n == seq)
        }
        PromptRef::Bootstrap => worker.attach_count > 0,
        PromptRef::Resume { .. } | PromptRef::Checkpoint { .. } | PromptRef::Rollover => true,
    }
}

/// Where a code was seen.
#[derive(Debug, Clone, Copy)]
enum Seen {
    /// A command's result; `continuation` when it was the worker's continuation.
    Result { continuation: bool },
    /// A report of the page (which may be a passing misreading).
    Page,
}

/// What a code seen for `worker` asks of the continuity rules. "Too many
/// requests" makes every automatic attempt wait (recorded, never clicked
/// through); a command refused because the adapter did not recognise the
/// page (`HOST_UI_CHANGED`), or a continuation that may have gone in (an
/// uncertain outcome), pauses this worker until root or the operator
/// resumes it. A page report alone never pauses: one reading taken during
/// a re-render must not stop an unattended worker. A hold already set (a
/// wait for a person, say) is kept.
fn continuity_effects(worker: &Worker, code: ErrorCode, detail: &str, seen: Seen) -> Vec<EventBody> {
    if matches!(worker.state, WorkerState::Completed | WorkerState::Failed | WorkerState::Cancelled) {
        return vec![];
    }
    if code == ErrorCode::RateLimited {
        return vec![EventBody::ContinuationRateLimited { worker_id: worker.id.clone(), detail: detail.to_owned() }];
    }
    // A recovery the page would not take, the last one allowed in a row:
    // a person looks at the tab (seed §16.4), rather than waiting silently.
    let undeliverable = matches!(seen, Seen::Result { continuation: true })
        && !code.outcome_uncertain()
        && worker.continuity.recovery_exhausted();
    let pauses = match seen {
        Seen::Result { continuation } => {
            matches!(code, ErrorCode::HostUiChanged | ErrorCode::ModelUnavailable)
                || (continuation && code.outcome_uncertain())
                || undeliverable
        }
        Seen::Page => false,
    };
    if !pauses || worker.continuity.hold.is_some() {
        return vec![];
    }
    let reason = match undeliverable {
        true => format!(
            "{code}: the page still shows its incident and took none of {} fresh messages ({}); look at \
             the tab, then worker_continue_now (ChatGPT's Retry is never clicked)",
            crate::continuity::RECOVERY_ATTEMPTS_MAX,
            detail.chars().take(200).collect::<String>()
        ),
        false => format!("{code}: {}", code.caller_action()),
    };
    vec![EventBody::WorkerHoldChanged {
        worker_id: worker.id.clone(),
        hold: Some(protocol::continuity::Hold::Paused),
        reason: Some(reason),
        ask: None,
    }]
}

/// Attempts of one wake (a `conversation_send` answered `DEADLINE_EXCEEDED`
/// is queued again until this many were made).
pub const SEND_ATTEMPTS_MAX: usize = 5;

/// The id of the command that retries `previous`: derived from it, so
/// `decide` stays a function of its inputs (and a replayed report decides
/// the same id).
fn retry_id(previous: &CommandId) -> CommandId {
    use sha2::{Digest, Sha256};
    let digest = Sha256::digest(format!("retry:{previous}").as_bytes());
    CommandId::from_uuid_bytes(digest[..16].try_into().expect("a SHA-256 has 16 bytes to spare"))
}

fn known_command<'a>(state: &'a State, id: &CommandId) -> Result<&'a QueuedCommand, Refusal> {
    state.commands.get(id).ok_or_else(|| Refusal::NoCommand(id.clone()))
}

/// A command dispatched to `executor_id`.
fn held_command<'a>(state: &'a State, executor_id: &str, id: &CommandId) -> Result<&'a QueuedCommand, Refusal> {
    let command = known_command(state, id)?;
    if command.executor_id.as_deref() != Some(executor_id) {
        return Err(Refusal::CommandNotHeld(id.clone()));
    }
    Ok(command)
}

/// A worker whose conversation `executor_id` holds.
fn held_worker<'a>(state: &'a State, executor_id: &str, id: &WorkerId) -> Result<&'a Worker, Refusal> {
    let worker = state.worker(id).ok_or_else(|| Refusal::NoWorker(id.clone()))?;
    if worker.executor_id.as_deref() != Some(executor_id) {
        return Err(Refusal::WorkerNotHeld(id.clone()));
    }
    Ok(worker)
}

#[cfg(test)]
mod tests {
    use super::super::table::{Given, check};
    use super::*;

    fn report(executor: &str, frame: ExecutorFrame) -> Request {
        Request::ExecutorReport { executor_id: executor.into(), frame }
    }

    #[test]
    fn executor_commands_by_state() {
        let mut rows = Vec::new();

        let g = Given::run();
        let c = Request::ExecutorConnected {
            executor_id: "ext".into(),
            executor_instance_id: "i1".into(),
            executor_kind: ExecutorKind::Fake,
            capabilities: vec![],
            host: MachineFacts::default(),
        };
        rows.push(("a connection goes to the system stream", g, c, Ok(&["executor.connected"][..])));

        let mut g = Given::run();
        let a = g.spawned("a");
        let command_id = g.open_command(&a);
        let c = Request::Dispatch { command_id, executor_id: "ext".into() };
        rows.push(("a queued create is dispatched", g, c, Ok(&["executor.command_dispatched"][..])));

        let mut g = Given::run();
        let a = g.spawned("a");
        let command_id = g.open_command(&a);
        g.apply(Request::Dispatch { command_id: command_id.clone(), executor_id: "ext".into() });
        let c = Request::Dispatch { command_id, executor_id: "ext".into() };
        rows.push(("a dispatched command is not dispatched again", g, c, Err(ErrorCode::InvalidTransition)));

        let mut g = Given::run();
        let a = g.spawned("a");
        let command_id = g.open_command(&a);
        g.apply(Request::Dispatch { command_id: command_id.clone(), executor_id: "ext".into() });
        let c = report("other", ExecutorFrame::Ack { command_id });
        rows.push(("another executor's command is not reported on", g, c, Err(ErrorCode::Forbidden)));

        let mut g = Given::run();
        let a = g.spawned("a");
        let c = Request::Recheck { inspections: vec![(a, CommandId::from_uuid_bytes(g.id()))] };
        rows.push(("no inspect without a conversation", g, c, Err(ErrorCode::InvalidTransition)));

        let mut g = Given::run();
        let a = g.created("a", "ext");
        let c = Request::Recheck { inspections: vec![(a, CommandId::from_uuid_bytes(g.id()))] };
        rows.push(("an inspect of a bound conversation is queued", g, c, Ok(&["executor.command_queued"][..])));

        let mut g = Given::run();
        let a = g.created("a", "ext");
        let c = report(
            "ext",
            ExecutorFrame::ConversationState { worker_id: a, state: ConversationState::Closed, error: None },
        );
        rows.push(("closed as a state is the tab gone", g, c, Ok(&["conversation.closed"][..])));

        let mut g = Given::run();
        let a = g.created("a", "ext");
        let other: protocol::ConversationId = "0196b2c4-8e1f-7a3b-9c2d-ffffffffffff".parse().unwrap();
        let c = report(
            "ext",
            ExecutorFrame::ConversationBound {
                worker_id: a,
                conversation_id: other,
                url: "https://chatgpt.com/c/0196b2c4-8e1f-7a3b-9c2d-ffffffffffff".into(),
            },
        );
        rows.push(("another conversation for a bound worker is drift", g, c, Ok(&["conversation.error"][..])));

        let mut g = Given::run();
        let a = g.created("a", "ext");
        g.apply(Request::Attach { worker_id: a.clone() });
        let send_command = CommandId::from_uuid_bytes(g.id());
        let root = g.root.clone();
        g.apply(Request::Followup {
            actor: root,
            target: a.clone(),
            instructions: "more".into(),
            send_command: send_command.clone(),
        });
        g.apply(Request::Dispatch { command_id: send_command.clone(), executor_id: "ext".into() });
        let outcome = CommandOutcome::Error { code: ErrorCode::DeadlineExceeded, detail: "busy".into() };
        let c = report("ext", ExecutorFrame::Result { command_id: send_command, outcome });
        rows.push((
            "a wake past its deadline is queued again",
            g,
            c,
            Ok(&["executor.command_completed", "executor.command_queued"][..]),
        ));

        let mut g = Given::run();
        let a = g.created("a", "ext");
        g.apply(Request::Attach { worker_id: a.clone() });
        let send_command = CommandId::from_uuid_bytes(g.id());
        let root = g.root.clone();
        g.apply(Request::Followup {
            actor: root,
            target: a,
            instructions: "more".into(),
            send_command: send_command.clone(),
        });
        g.apply(Request::Dispatch { command_id: send_command.clone(), executor_id: "ext".into() });
        let outcome = CommandOutcome::Error { code: ErrorCode::ComposerHasDraft, detail: "attachment".into() };
        let c = report("ext", ExecutorFrame::Result { command_id: send_command, outcome });
        rows.push((
            "a wake refused beside a person's draft waits for them and is queued again",
            g,
            c,
            Ok(&["executor.command_completed", "conversation.state_changed", "executor.command_queued"][..]),
        ));

        let mut g = Given::run();
        let a = g.created("a", "ext");
        g.apply(Request::Attach { worker_id: a.clone() });
        let (first, second) = (CommandId::from_uuid_bytes(g.id()), CommandId::from_uuid_bytes(g.id()));
        let root = g.root.clone();
        g.apply(Request::Followup {
            actor: root.clone(),
            target: a.clone(),
            instructions: "one".into(),
            send_command: first.clone(),
        });
        g.apply(Request::Dispatch { command_id: first.clone(), executor_id: "ext".into() });
        g.apply(Request::Followup { actor: root, target: a, instructions: "two".into(), send_command: second });
        let outcome = CommandOutcome::Error { code: ErrorCode::DeadlineExceeded, detail: "busy".into() };
        let c = report("ext", ExecutorFrame::Result { command_id: first, outcome });
        rows.push((
            "a missed wake for work a newer follow-up supersedes is not sent again",
            g,
            c,
            Ok(&["executor.command_completed"][..]),
        ));

        check(rows);
    }
}
