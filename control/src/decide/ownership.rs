//! Worktree ownership changes (see `crate::ownership`): claim (or resume),
//! heartbeat, handoff and its acceptance, reclaim from a holder proven
//! dead, release, work-in-progress, submit, land and removal. A holder's
//! conversation is never an argument: it is the one its executor bound.
//! Repeating a change that already happened records nothing.

use protocol::ownership::{OwnershipState, REASON_MAX, Record, valid_commit, valid_ref};
use protocol::{ConversationId, OwnershipId};

use crate::ownership::{Key, Op, readable, stale};

use super::*;

/// The ownership commands (routed here by [`super::decide`]).
pub(super) fn decide(state: &State, command: &Request) -> Result<Vec<EventBody>, Refusal> {
    let Request::Ownership { actor, op, now_ms } = command else {
        unreachable!("decide routes only this family's commands here")
    };
    let (run, worker) = acting(state, actor)?;
    let ledger = &state.ownership;
    if let Op::Claim { id, worktree, session, labels, projected } = op {
        worktree.check().and_then(|()| session.check()).and_then(|()| labels.check()).map_err(Refusal::BadOwnership)?;
        require_open(run)?;
        if worker.state.is_terminal() {
            return Err(Refusal::WorkerIs(worker.state));
        }
        if let Some(live) = ledger.live(&worktree.path) {
            if !readable(state, live, &run.id) {
                return Err(Refusal::WorktreeHeldElsewhere(worktree.path.clone()));
            }
            if live.holder().worker_id != *actor || live.state == OwnershipState::HandingOff {
                return Err(Refusal::WorktreeHeld {
                    worktree: worktree.path.clone(),
                    held_by: live.id.clone(),
                    holder: live.holder().worker_id.clone(),
                });
            }
            // Its own worktree: the same session is a repeat, a new one a resume.
            return Ok(vec![match live.holder().sessions.last().is_some_and(|s| s.id == session.id) {
                true => EventBody::OwnershipHeartbeat { ownership_id: live.id.clone(), holder: actor.clone() },
                false => EventBody::OwnershipResumed {
                    ownership_id: live.id.clone(),
                    holder: actor.clone(),
                    session: session.clone(),
                },
            }]);
        }
        // Git names a live owner: one of ours that is over is only a stale
        // projection; anything else is another orchestrator's, or made up.
        let ours_and_over = |p: &String| {
            p.parse::<OwnershipId>().ok().and_then(|p| ledger.records.get(&p)).is_some_and(|r| !r.state.is_live())
        };
        if let Some(projected) = projected.as_ref().filter(|p| !ours_and_over(p)) {
            return Err(Refusal::ForeignProjection(projected.chars().take(64).collect()));
        }
        if ledger.records.contains_key(id) {
            return Err(Refusal::IdTaken("ownership"));
        }
        let previous = ledger.lookup(&Key::Worktree(worktree.path.clone())).last().map(|r| r.id.clone());
        return Ok(vec![EventBody::OwnershipClaimed {
            ownership_id: id.clone(),
            holder: actor.clone(),
            run_id: run.id.clone(),
            session: session.clone(),
            worktree: worktree.clone(),
            conversation: conversation_of(worker),
            unmanaged: unmanaged(worker),
            labels: labels.clone(),
            previous,
        }]);
    }
    // Another open run's record is not there for this run: not even its
    // existence. An ended run's live record is left for anyone to reclaim.
    let record = ledger
        .records
        .get(op.id())
        .filter(|r| r.holder().run_id == run.id || (matches!(op, Op::Reclaim { .. }) && readable(state, r, &run.id)))
        .ok_or_else(|| Refusal::NoOwnership(op.id().clone()))?;
    let ownership_id = record.id.clone();
    let holder = record.holder().worker_id.clone();
    let live = || match record.state.is_live() {
        true => Ok(()),
        false => Err(Refusal::OwnershipIs(ownership_id.clone(), record.state)),
    };
    match op {
        Op::Claim { .. } => unreachable!("handled above"),
        Op::Heartbeat { .. } => {
            holding(record, actor)?;
            live()?;
            Ok(vec![EventBody::OwnershipHeartbeat { ownership_id, holder }])
        }
        Op::Handoff { to, .. } => {
            steering(state, record, actor)?;
            live()?;
            if record.state == OwnershipState::Submitted {
                return Err(Refusal::OwnershipIs(ownership_id, record.state));
            }
            let target = state.worker(to).ok_or_else(|| Refusal::NoWorker(to.clone()))?;
            if target.state.is_terminal() {
                return Err(Refusal::WorkerIs(target.state));
            }
            if *to == holder {
                return Err(Refusal::BadOwnership("a worktree is handed to another worker".into()));
            }
            if target.run_id != record.holder().run_id {
                return Err(Refusal::BadOwnership(
                    "a worktree is handed on only within its run: release it, and the other run claims it".into(),
                ));
            }
            if record.handoff_to.as_ref() == Some(to) {
                return Ok(vec![]);
            }
            Ok(vec![EventBody::OwnershipHandoffStarted { ownership_id, holder, to: to.clone() }])
        }
        Op::Accept { session, .. } => {
            taking(run, worker, session)?;
            if holder == *actor && record.holder().sessions.iter().any(|s| s.id == session.id) {
                return Ok(vec![]);
            }
            if record.handoff_to.as_ref() != Some(actor) {
                return Err(Refusal::NotHolder(ownership_id));
            }
            taking_over(record)?;
            Ok(vec![EventBody::OwnershipHandoffCompleted {
                ownership_id,
                holder: actor.clone(),
                run_id: run.id.clone(),
                session: session.clone(),
                conversation: conversation_of(worker),
                unmanaged: unmanaged(worker),
            }])
        }
        Op::Reclaim { session, wip, .. } => {
            taking(run, worker, session)?;
            live()?;
            if holder == *actor {
                return Err(Refusal::BadOwnership("you hold it: claim it again to resume it in a new session".into()));
            }
            let Some(why) = stale(state, record, *now_ms) else {
                return Err(Refusal::HolderLive(ownership_id, now_ms.saturating_sub(record.last_seen_ms)));
            };
            taking_over(record)?;
            let mut events = preserved(record, actor, wip)?;
            events.push(EventBody::OwnershipReclaimed {
                ownership_id,
                holder: actor.clone(),
                run_id: run.id.clone(),
                session: session.clone(),
                conversation: conversation_of(worker),
                unmanaged: unmanaged(worker),
                from: holder,
                stale: why,
            });
            Ok(events)
        }
        Op::Release { reason, wip, .. } => {
            steering(state, record, actor)?;
            if record.state == OwnershipState::Released {
                return Ok(vec![]);
            }
            live()?;
            if let Some(reason) = reason {
                check_text("reason", reason, REASON_MAX)?;
                if reason.chars().any(char::is_control) {
                    return Err(Refusal::BadOwnership("reason must not hold control characters".into()));
                }
            }
            let mut events = preserved(record, actor, wip)?;
            events.push(EventBody::OwnershipReleased { ownership_id, holder, reason: reason.clone() });
            Ok(events)
        }
        Op::Wip { ref_name, commit, .. } => {
            holding(record, actor)?;
            live()?;
            preserved(record, actor, &Some((ref_name.clone(), commit.clone())))
        }
        Op::Submit { branch, head, session, .. } => {
            holding(record, actor)?;
            live()?;
            if !valid_ref(branch) || !valid_commit(head) || !protocol::ownership::valid_session_id(session) {
                return Err(Refusal::BadOwnership(
                    "a submit needs a branch, its full head commit and a session".into(),
                ));
            }
            if record.state == OwnershipState::HandingOff {
                return Err(Refusal::OwnershipIs(ownership_id, record.state));
            }
            if record.submitted.as_ref().is_some_and(|s| s.head == *head && s.branch == *branch) {
                return Ok(vec![]);
            }
            Ok(vec![EventBody::OwnershipSubmitted {
                ownership_id,
                holder,
                session: session.clone(),
                branch: branch.clone(),
                head: head.clone(),
            }])
        }
        Op::Land { into, commit, .. } => {
            steering(state, record, actor)?;
            if !valid_ref(into) || !valid_commit(commit) {
                return Err(Refusal::BadOwnership("a landing needs the target branch and its full commit id".into()));
            }
            if let Some(landed) = &record.landed {
                return match landed.commit == *commit && landed.into == *into {
                    true => Ok(vec![]),
                    false => Err(Refusal::OwnershipIs(ownership_id, record.state)),
                };
            }
            let (OwnershipState::Submitted, Some(submitted)) = (record.state, &record.submitted) else {
                return Err(Refusal::OwnershipIs(ownership_id, record.state));
            };
            Ok(vec![EventBody::OwnershipLanded {
                ownership_id,
                holder,
                by: actor.clone(),
                into: into.clone(),
                commit: commit.clone(),
                source_head: submitted.head.clone(),
            }])
        }
        Op::Removed { .. } => {
            steering(state, record, actor)?;
            if record.state == OwnershipState::Removed {
                return Ok(vec![]);
            }
            Ok(vec![EventBody::OwnershipRemoved { ownership_id, holder }])
        }
    }
}

/// The record of a work-in-progress snapshot the adapter took for `actor`
/// (none if it is the newest already).
fn preserved(record: &Record, actor: &WorkerId, wip: &Option<(String, String)>) -> Result<Vec<EventBody>, Refusal> {
    let Some((ref_name, commit)) = wip else { return Ok(vec![]) };
    if !valid_ref(ref_name) || !valid_commit(commit) {
        return Err(Refusal::BadOwnership("a WIP ref needs a ref name and a full commit id".into()));
    }
    if record.wip.last().is_some_and(|w| w.commit == *commit) {
        return Ok(vec![]);
    }
    Ok(vec![EventBody::OwnershipWipPreserved {
        ownership_id: record.id.clone(),
        holder: record.holder().worker_id.clone(),
        by: actor.clone(),
        ref_name: ref_name.clone(),
        commit: commit.clone(),
    }])
}

/// The conversation a worker's executor bound, if any: the only source of
/// a holder's conversation.
fn conversation_of(worker: &Worker) -> Option<ConversationId> {
    worker.conversation.as_ref().map(|(id, _)| id.clone())
}

/// Whether a worker has no managed conversation to be bound (a root that
/// keeps its own chat): its records are active without one.
fn unmanaged(worker: &Worker) -> bool {
    worker.is_root() && !worker.is_managed_root()
}

/// The caller must hold the record.
fn holding(record: &Record, actor: &WorkerId) -> Result<(), Refusal> {
    match record.holder().worker_id == *actor {
        true => Ok(()),
        false => Err(Refusal::NotHolder(record.id.clone())),
    }
}

/// The caller must hold the record, or be its holder's run's root (who
/// hands worktrees on, lands them and cleans up).
fn steering(state: &State, record: &Record, actor: &WorkerId) -> Result<(), Refusal> {
    let root_of_holder = state.runs.get(&record.holder().run_id).is_some_and(|run| run.root == *actor);
    match root_of_holder {
        true => Ok(()),
        false => holding(record, actor),
    }
}

/// A worker taking a worktree over (accept, reclaim) is alive, in an open
/// run, in a session of a valid form.
fn taking(run: &Run, worker: &Worker, session: &protocol::ownership::Session) -> Result<(), Refusal> {
    session.check().map_err(Refusal::BadOwnership)?;
    require_open(run)?;
    match worker.state.is_terminal() {
        true => Err(Refusal::WorkerIs(worker.state)),
        false => Ok(()),
    }
}

/// A record may gain another holder only up to its bound.
fn taking_over(record: &Record) -> Result<(), Refusal> {
    match record.holders.len() < protocol::ownership::HOLDERS_MAX {
        true => Ok(()),
        false => Err(Refusal::HoldersExhausted(record.id.clone())),
    }
}

/// The records `events` bind a conversation for: each live record held by
/// a worker whose conversation is bound now, unless it has it already.
pub(super) fn converge(state: &State, events: &[EventBody]) -> Vec<EventBody> {
    let mut bound = Vec::new();
    for event in events {
        let EventBody::ConversationBound { worker_id, conversation_id, .. } = event else { continue };
        for record in state.ownership.lookup(&Key::Worker(worker_id.clone())) {
            let holder = record.holder();
            if record.state.is_live()
                && holder.worker_id == *worker_id
                && holder.conversations.last() != Some(conversation_id)
            {
                bound.push(EventBody::OwnershipConversationBound {
                    ownership_id: record.id.clone(),
                    holder: worker_id.clone(),
                    conversation_id: conversation_id.clone(),
                });
            }
        }
    }
    bound
}

#[cfg(test)]
mod tests {
    use protocol::executor::ExecutorFrame;
    use protocol::ownership::{LEASE_MS, Labels, Session, Worktree};

    use super::super::table::{Given, check};
    use super::*;

    const NOW: u64 = 10_000;

    fn worktree(path: &str) -> Worktree {
        Worktree {
            repo: "/repos/app/.git".into(),
            path: path.into(),
            branch: Some(format!("work/{}", path.rsplit('/').next().unwrap())),
            head: Some("a".repeat(40)),
        }
    }

    fn session(id: &str) -> Session {
        Session { id: id.into(), parent: None }
    }

    fn claim(g: &mut Given, actor: &WorkerId, path: &str, s: &str) -> Request {
        let op = Op::Claim {
            id: OwnershipId::from_uuid_bytes(g.id()),
            worktree: worktree(path),
            session: session(s),
            labels: Labels::default(),
            projected: None,
        };
        Request::Ownership { actor: actor.clone(), op, now_ms: NOW }
    }

    fn on(actor: &WorkerId, op: Op) -> Request {
        Request::Ownership { actor: actor.clone(), op, now_ms: NOW }
    }

    /// A run with bound workers `a` and `b`; `a` holds `/wt/a`.
    fn held() -> (Given, WorkerId, WorkerId, OwnershipId) {
        let mut g = Given::run();
        let a = g.created("a", "ext");
        let b = g.created("b", "ext");
        let c = claim(&mut g, &a, "/wt/a", "s1");
        g.apply(c);
        let id = g.state.ownership.live("/wt/a").expect("claimed").id.clone();
        (g, a, b, id)
    }

    fn submitted() -> (Given, WorkerId, OwnershipId) {
        let (mut g, a, _, id) = held();
        let submit = Op::Submit { id: id.clone(), branch: "work/a".into(), head: "b".repeat(40), session: "s1".into() };
        g.apply(on(&a, submit));
        (g, a, id)
    }

    fn land(id: &OwnershipId, commit: char) -> Op {
        Op::Land { id: id.clone(), into: "main".into(), commit: commit.to_string().repeat(40) }
    }

    #[test]
    fn ownership_commands_by_state() {
        let mut rows = Vec::new();

        let mut g = Given::run();
        let a = g.created("a", "ext");
        let c = claim(&mut g, &a, "/wt/a", "s1");
        rows.push(("a bound worker claims a free worktree", g, c, Ok(&["ownership.claimed"][..])));

        let (mut g, _, b, _) = held();
        let c = claim(&mut g, &b, "/wt/a", "s2");
        rows.push(("another worker claims a held worktree", g, c, Err(ErrorCode::OwnershipConflict)));

        let (mut g, a, _, _) = held();
        let c = claim(&mut g, &a, "/wt/a", "s1");
        rows.push((
            "its holder claims it again in the same session: a heartbeat",
            g,
            c,
            Ok(&["ownership.heartbeat"][..]),
        ));

        let (mut g, a, _, _) = held();
        let c = claim(&mut g, &a, "/wt/a", "s2");
        rows.push(("its holder claims it in a new session: resumed", g, c, Ok(&["ownership.resumed"][..])));

        let (mut g, _, b, _) = held();
        let mut c = claim(&mut g, &b, "/wt/b", "s2");
        if let Request::Ownership { op: Op::Claim { projected, .. }, .. } = &mut c {
            *projected = Some("own_ffffffffffffffffffffffffffffffff".into());
        }
        rows.push(("Git names a live owner this daemon never knew", g, c, Err(ErrorCode::OwnershipConflict)));

        let (mut g, _, b, _) = held();
        let mut c = claim(&mut g, &b, "/wt/b", "s2");
        if let Request::Ownership { op: Op::Claim { worktree, .. }, .. } = &mut c {
            worktree.path = "wt/../b".into();
        }
        rows.push(("a path that is not normalised", g, c, Err(ErrorCode::InvalidArgument)));

        let (g, _, b, id) = held();
        rows.push((
            "a heartbeat from another worker",
            g,
            on(&b, Op::Heartbeat { id }),
            Err(ErrorCode::OwnershipNotHolder),
        ));

        let (g, a, b, id) = held();
        let h = Op::Handoff { id, to: b };
        rows.push(("its holder hands it to another worker", g, on(&a, h), Ok(&["ownership.handoff_started"][..])));

        let (mut g, a, b, id) = held();
        g.apply(on(&a, Op::Handoff { id: id.clone(), to: b.clone() }));
        let accept = Op::Accept { id, session: session("s9") };
        rows.push(("the worker offered it accepts", g, on(&b, accept), Ok(&["ownership.handoff_completed"][..])));

        let (mut g, a, b, id) = held();
        g.apply(on(&a, Op::Handoff { id: id.clone(), to: b.clone() }));
        let c = g.created("c", "ext");
        let accept = Op::Accept { id, session: session("s9") };
        rows.push(("a worker not offered it accepts", g, on(&c, accept), Err(ErrorCode::OwnershipNotHolder)));

        let (g, _, b, id) = held();
        let reclaim = Op::Reclaim { id, session: session("s9"), wip: None };
        rows.push(("a reclaim while its holder is live", g, on(&b, reclaim), Err(ErrorCode::OwnershipHolderLive)));

        let (g, _, b, id) = held();
        let reclaim = Request::Ownership {
            actor: b,
            op: Op::Reclaim { id, session: session("s9"), wip: None },
            now_ms: NOW + LEASE_MS,
        };
        rows.push(("a reclaim once its lease lapsed", g, reclaim, Ok(&["ownership.reclaimed"][..])));

        let (g, _, b, id) = held();
        let wip = Some(("refs/orchestrator/wip/x/1".to_owned(), "e".repeat(40)));
        let reclaim = Request::Ownership {
            actor: b,
            op: Op::Reclaim { id, session: session("s9"), wip },
            now_ms: NOW + LEASE_MS,
        };
        rows.push((
            "a lapsed holder's work in progress is kept in the reclaim's own commit",
            g,
            reclaim,
            Ok(&["ownership.wip_preserved", "ownership.reclaimed"][..]),
        ));

        let (mut g, a, b, id) = held();
        g.apply(Request::Attach { worker_id: a.clone() });
        g.apply(Request::Fail { actor: a, reason: "gone".into() });
        let reclaim = Op::Reclaim { id, session: session("s9"), wip: None };
        rows.push(("a reclaim from a holder that failed", g, on(&b, reclaim), Ok(&["ownership.reclaimed"][..])));

        let (g, a, id) = submitted();
        rows.push((
            "a second submit of the same head records nothing",
            g,
            on(&a, Op::Submit { id, branch: "work/a".into(), head: "b".repeat(40), session: "s1".into() }),
            Ok(&[][..]),
        ));

        let (g, _, id) = submitted();
        let root = g.root.clone();
        rows.push(("root lands a submitted worktree", g, on(&root, land(&id, 'c')), Ok(&["ownership.landed"][..])));

        let (g, _, b, id) = held();
        rows.push(("a landing before a submit", g, on(&b, land(&id, 'c')), Err(ErrorCode::OwnershipNotHolder)));

        let (g, a, _, id) = held();
        rows.push(("its holder lands before submitting", g, on(&a, land(&id, 'c')), Err(ErrorCode::InvalidTransition)));

        let (mut g, a, id) = submitted();
        g.apply(on(&a, land(&id, 'c')));
        rows.push(("the same landing again records nothing", g, on(&a, land(&id, 'c')), Ok(&[][..])));

        let (mut g, a, id) = submitted();
        g.apply(on(&a, land(&id, 'c')));
        rows.push(("a landing at another commit", g, on(&a, land(&id, 'd')), Err(ErrorCode::InvalidTransition)));

        let (mut g, a, id) = submitted();
        g.apply(on(&a, land(&id, 'c')));
        rows.push(("the landed worktree is removed", g, on(&a, Op::Removed { id }), Ok(&["ownership.removed"][..])));

        let (mut g, a, _, id) = held();
        g.apply(on(&a, Op::Release { id, reason: Some("done".into()), wip: None }));
        let b = g.created("b2", "ext");
        let c = claim(&mut g, &b, "/wt/a", "s5");
        rows.push(("a released worktree is claimed afresh", g, c, Ok(&["ownership.claimed"][..])));

        let (g, a, _, id) = held();
        let wip = Op::Wip { id, ref_name: "refs/orchestrator/wip/x/1".into(), commit: "e".repeat(40) };
        rows.push(("its holder preserves its work in progress", g, on(&a, wip), Ok(&["ownership.wip_preserved"][..])));

        check(rows);
    }

    /// `held()`, and a bound worker `x` of a second, open run.
    fn held_across_runs() -> (Given, WorkerId, WorkerId, OwnershipId) {
        let (mut g, a, _, id) = held();
        g.another_run();
        let x = g.created("x", "ext");
        (g, a, x, id)
    }

    #[test]
    fn a_run_sees_and_changes_only_its_own_records() {
        let mut rows = Vec::new();

        let (mut g, _, x, _) = held_across_runs();
        let c = claim(&mut g, &x, "/wt/a", "s2");
        let refusal = decide(&g.state, &c).expect_err("held in another run").to_string();
        assert!(!refusal.contains("own_") && !refusal.contains("wrk_"), "names nothing of the other run: {refusal}");
        rows.push(("another run's worker claims a held worktree", g, c, Err(ErrorCode::OwnershipConflict)));

        type Change = fn(OwnershipId) -> Op;
        let ops: [(&str, Change); 3] = [
            ("another run's worker heartbeats a record", |id| Op::Heartbeat { id }),
            ("another run's worker releases a record", |id| Op::Release { id, reason: None, wip: None }),
            ("another run's worker lands a record", |id| land(&id, 'c')),
        ];
        for (name, op) in ops {
            let (g, _, x, id) = held_across_runs();
            rows.push((name, g, on(&x, op(id)), Err(ErrorCode::NotFound)));
        }

        let (g, _, _, id) = held_across_runs();
        let root = g.root.clone();
        rows.push(("another run's root lands it", g, on(&root, land(&id, 'c')), Err(ErrorCode::NotFound)));

        let (g, _, x2, id) = held_across_runs();
        let reclaim = Request::Ownership {
            actor: x2,
            op: Op::Reclaim { id, session: session("s9"), wip: None },
            now_ms: NOW + LEASE_MS,
        };
        rows.push(("another open run's lapsed record is not reclaimed", g, reclaim, Err(ErrorCode::NotFound)));

        let (g, a, x, id) = held_across_runs();
        rows.push((
            "a worktree is not handed to another run's worker",
            g,
            on(&a, Op::Handoff { id, to: x }),
            Err(ErrorCode::InvalidArgument),
        ));

        let mut g = Given::run();
        let a = g.created("a", "ext");
        let c = claim(&mut g, &a, "/wt/a", "s1");
        g.apply(c);
        let id = g.state.ownership.live("/wt/a").expect("claimed").id.clone();
        let root_a = g.root.clone();
        g.apply(Request::CancelRun { actor: root_a, reason: "over".into() });
        g.another_run();
        let x = g.created("x", "ext");
        let reclaim = Op::Reclaim { id, session: session("s9"), wip: None };
        rows.push((
            "an ended run's record is reclaimed by another run",
            g,
            on(&x, reclaim),
            Ok(&["ownership.reclaimed"][..]),
        ));

        check(rows);
    }

    #[test]
    fn a_provisional_claim_converges_when_the_conversation_is_bound() {
        let mut g = Given::run();
        let a = g.spawned("a");
        let command_id = g.open_command(&a);
        g.apply(Request::Dispatch { command_id: command_id.clone(), executor_id: "ext".into() });
        g.apply(Request::ExecutorReport { executor_id: "ext".into(), frame: ExecutorFrame::Ack { command_id } });
        let c = claim(&mut g, &a, "/wt/a", "s1");
        g.apply(c);
        let record = g.state.ownership.live("/wt/a").unwrap().clone();
        assert_eq!(record.state, OwnershipState::Provisional, "no conversation is bound yet");

        let conversation: ConversationId = "0196b2c4-8e1f-7a3b-9c2d-000000000077".parse().unwrap();
        let events = g.apply(Request::ExecutorReport {
            executor_id: "ext".into(),
            frame: ExecutorFrame::ConversationBound {
                worker_id: a.clone(),
                conversation_id: conversation.clone(),
                url: format!("https://chatgpt.com/c/{conversation}"),
            },
        });
        let kinds: Vec<&str> = events.iter().map(EventBody::kind).collect();
        assert!(kinds.contains(&"ownership.conversation_bound"), "{kinds:?}");
        let after = g.state.ownership.live("/wt/a").unwrap();
        assert_eq!((after.id.clone(), after.state), (record.id, OwnershipState::Active), "the same record, active");
        assert_eq!(after.holder().conversations, vec![conversation.clone()]);
        assert_eq!(g.state.ownership.lookup(&Key::Conversation(conversation)).len(), 1);
        assert_eq!(g.state.ownership.records.len(), 1, "never a second record");
    }

    #[test]
    fn a_root_that_keeps_its_own_chat_holds_an_active_record_without_a_conversation() {
        let mut g = Given::run();
        let root = g.root.clone();
        let c = claim(&mut g, &root, "/wt/r", "root-session");
        g.apply(c);
        let record = g.state.ownership.live("/wt/r").unwrap();
        assert_eq!(record.state, OwnershipState::Active);
        assert!(record.holder().conversations.is_empty(), "unknown, never guessed");
    }

    #[test]
    fn handoff_and_landing_keep_the_chain_and_the_indexes() {
        let (mut g, a, b, id) = held();
        g.apply(on(&a, Op::Handoff { id: id.clone(), to: b.clone() }));
        g.apply(on(&b, Op::Accept { id: id.clone(), session: session("s2") }));
        g.apply(on(
            &b,
            Op::Submit { id: id.clone(), branch: "work/a".into(), head: "b".repeat(40), session: "s2".into() },
        ));
        let root = g.root.clone();
        g.apply(on(&root, land(&id, 'c')));
        g.apply(on(&root, Op::Removed { id: id.clone() }));
        let ledger = &g.state.ownership;
        let record = &ledger.records[&id];
        assert_eq!(record.state, OwnershipState::Removed);
        let holders: Vec<&WorkerId> = record.holders.iter().map(|h| &h.worker_id).collect();
        assert_eq!(holders, [&a, &b], "the chain is kept");
        for key in [
            Key::Worktree("/wt/a".into()),
            Key::Branch { repo: Some("/repos/app/.git".into()), branch: "work/a".into() },
            Key::Branch { repo: None, branch: "work/a".into() },
            Key::Commit("b".repeat(40)),
            Key::Commit("c".repeat(40)),
            Key::Session("s1".into()),
            Key::Session("s2".into()),
            Key::Worker(a.clone()),
            Key::Worker(b.clone()),
        ] {
            assert_eq!(ledger.lookup(&key).iter().map(|r| &r.id).collect::<Vec<_>>(), [&id], "{key:?}");
        }
        assert!(ledger.live("/wt/a").is_none(), "a removed worktree is free");
        assert_eq!(record.landed.as_ref().unwrap().by, root);
    }
}
