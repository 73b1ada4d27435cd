//! Worktree ownership, folded from the ownership stream (`RunId::ownership`):
//! the records and their indexes (ownership id, worktree path, repository
//! and branch, session, worker, conversation, source and landed commit), and
//! when a holder is proven dead. Changes are decided in
//! `decide/ownership.rs`; Git is the `worktrees` crate's, in the shell.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use protocol::ownership::{
    HOLDERS_MAX, Holding, KEPT, LEASE_MS, Labels, OwnershipState, Record, Session, StaleReason, Via, Wip, Worktree,
};
use protocol::{ConversationId, Event, EventBody, OwnershipId, RunId, RunState, WorkerId, WorkerState};

use crate::model::{FoldError, State};

/// A change to worktree ownership, as the shell hands it to `decide` (Git
/// facts already read by the adapter).
#[derive(Debug, Clone, PartialEq)]
pub enum Op {
    /// Claim a worktree (or, for its holder, resume it in a new session).
    Claim {
        /// The new record's id (unused on a resume).
        id: OwnershipId,
        /// The worktree as Git shows it.
        worktree: Worktree,
        /// The caller's execution session.
        session: Session,
        /// What the work is for.
        labels: Labels,
        /// The live owner the worktree's Git projection names, if any.
        projected: Option<String>,
    },
    /// The holder is alive.
    Heartbeat {
        /// The record.
        id: OwnershipId,
    },
    /// The holder offers the worktree to `to`.
    Handoff {
        /// The record.
        id: OwnershipId,
        /// The worker offered it.
        to: WorkerId,
    },
    /// The worker offered the worktree takes it.
    Accept {
        /// The record.
        id: OwnershipId,
        /// Its execution session.
        session: Session,
    },
    /// A worker takes over the worktree of a holder proven dead.
    Reclaim {
        /// The record.
        id: OwnershipId,
        /// Its execution session.
        session: Session,
        /// The work in progress the adapter preserved first (ref, commit).
        wip: Option<(String, String)>,
    },
    /// The holder gives the worktree up.
    Release {
        /// The record.
        id: OwnershipId,
        /// Why.
        reason: Option<String>,
        /// The work in progress the adapter preserved first (ref, commit).
        wip: Option<(String, String)>,
    },
    /// The worktree's work in progress was preserved (by the adapter).
    Wip {
        /// The record.
        id: OwnershipId,
        /// The ref.
        ref_name: String,
        /// The snapshot commit.
        commit: String,
    },
    /// The holder submits the worktree's branch at `head`.
    Submit {
        /// The record.
        id: OwnershipId,
        /// The branch.
        branch: String,
        /// Its head.
        head: String,
        /// The submitting session.
        session: String,
    },
    /// The submitted head reached `into` at `commit` (checked by the adapter).
    Land {
        /// The record.
        id: OwnershipId,
        /// The target branch.
        into: String,
        /// Its commit containing the submitted head.
        commit: String,
    },
    /// The worktree is gone (checked by the adapter).
    Removed {
        /// The record.
        id: OwnershipId,
    },
}

impl Op {
    /// The record the change is about.
    pub fn id(&self) -> &OwnershipId {
        match self {
            Op::Claim { id, .. }
            | Op::Heartbeat { id }
            | Op::Handoff { id, .. }
            | Op::Accept { id, .. }
            | Op::Reclaim { id, .. }
            | Op::Release { id, .. }
            | Op::Wip { id, .. }
            | Op::Submit { id, .. }
            | Op::Land { id, .. }
            | Op::Removed { id } => id,
        }
    }
}

/// What to look records up by.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Key {
    /// The record.
    Id(OwnershipId),
    /// A worktree's normalised path.
    Worktree(String),
    /// A branch, of one repository (its common Git directory) or of any.
    Branch {
        /// The repository; `None`: every repository.
        repo: Option<String>,
        /// The branch.
        branch: String,
    },
    /// A submitted or landed commit.
    Commit(String),
    /// An execution session.
    Session(String),
    /// A worker.
    Worker(WorkerId),
    /// A conversation.
    Conversation(ConversationId),
}

/// The records and their indexes. Each index lists record ids oldest
/// first; nothing is ever dropped from it (a removed worktree keeps its
/// history).
#[derive(Debug, Default, Clone, PartialEq, Serialize, Deserialize)]
pub struct Ledger {
    /// Cursor of the ownership stream.
    pub cursor: u64,
    /// Records by id.
    pub records: HashMap<OwnershipId, Record>,
    by_worktree: HashMap<String, Vec<OwnershipId>>,
    /// Repository → branch → records.
    by_branch: HashMap<String, HashMap<String, Vec<OwnershipId>>>,
    by_session: HashMap<String, Vec<OwnershipId>>,
    by_worker: HashMap<WorkerId, Vec<OwnershipId>>,
    by_conversation: HashMap<ConversationId, Vec<OwnershipId>>,
    by_commit: HashMap<String, Vec<OwnershipId>>,
}

fn index<K: std::hash::Hash + Eq>(map: &mut HashMap<K, Vec<OwnershipId>>, key: K, id: &OwnershipId) {
    let ids = map.entry(key).or_default();
    if !ids.contains(id) {
        ids.push(id.clone());
    }
}

fn keep_newest<T>(items: &mut Vec<T>) {
    items.drain(..items.len().saturating_sub(KEPT));
}

impl Ledger {
    /// The records `key` names, oldest first.
    pub fn lookup(&self, key: &Key) -> Vec<&Record> {
        let ids: Option<&Vec<OwnershipId>> = match key {
            Key::Id(id) => return self.records.get(id).into_iter().collect(),
            Key::Worktree(path) => self.by_worktree.get(path),
            Key::Branch { repo: None, branch } => {
                let mut records: Vec<&Record> = self
                    .by_branch
                    .values()
                    .filter_map(|b| b.get(branch))
                    .flatten()
                    .filter_map(|id| self.records.get(id))
                    .collect();
                records.sort_by(|a, b| (a.claimed_at_ms, &a.id).cmp(&(b.claimed_at_ms, &b.id)));
                return records;
            }
            Key::Branch { repo: Some(repo), branch } => self.by_branch.get(repo).and_then(|b| b.get(branch)),
            Key::Commit(commit) => self.by_commit.get(commit),
            Key::Session(session) => self.by_session.get(session),
            Key::Worker(worker) => self.by_worker.get(worker),
            Key::Conversation(conversation) => self.by_conversation.get(conversation),
        };
        ids.into_iter().flatten().filter_map(|id| self.records.get(id)).collect()
    }

    /// The worktree's live record, if it is held.
    pub fn live(&self, path: &str) -> Option<&Record> {
        self.lookup(&Key::Worktree(path.to_owned())).into_iter().rev().find(|r| r.state.is_live())
    }

    /// Every record, of `repo` if given, oldest claim first.
    pub fn list(&self, repo: Option<&str>) -> Vec<&Record> {
        let mut records: Vec<&Record> =
            self.records.values().filter(|r| repo.is_none_or(|repo| r.worktree.repo == repo)).collect();
        records.sort_by(|a, b| (a.claimed_at_ms, &a.id).cmp(&(b.claimed_at_ms, &b.id)));
        records
    }

    /// Folds one event of the ownership stream in. It reads nothing else
    /// of the state: a pruned run's workers leave their records as they were.
    pub(crate) fn apply(&mut self, event: &Event) -> Result<(), FoldError> {
        let fail =
            |reason: &str| FoldError { run: event.run_id.to_string(), cursor: event.cursor, reason: reason.to_owned() };
        if event.cursor != self.cursor + 1 {
            return Err(fail("cursor does not continue the ownership log"));
        }
        let at = event.at_ms;
        let holding =
            |worker: &WorkerId, run: &RunId, via, session: &Session, conversation: &Option<ConversationId>| Holding {
                worker_id: worker.clone(),
                run_id: run.clone(),
                via,
                sessions: vec![session.clone()],
                conversations: conversation.iter().cloned().collect(),
                since_ms: at,
                until_ms: None,
            };
        if let EventBody::OwnershipClaimed {
            ownership_id,
            holder,
            run_id,
            session,
            worktree,
            conversation,
            unmanaged,
            labels,
            previous,
        } = &event.body
        {
            if self.records.contains_key(ownership_id) {
                return Err(fail("ownership.claimed names a record that exists"));
            }
            let state = held(conversation, *unmanaged);
            let record = Record {
                id: ownership_id.clone(),
                state,
                worktree: worktree.clone(),
                labels: labels.clone(),
                holders: vec![holding(holder, run_id, Via::Claimed, session, conversation)],
                handoff_to: None,
                claimed_at_ms: at,
                last_seen_ms: at,
                wip: Vec::new(),
                submitted: None,
                landed: None,
                released: None,
                removed_at_ms: None,
                previous: previous.clone(),
            };
            self.records.insert(ownership_id.clone(), record);
            self.reindex(ownership_id);
            self.cursor = event.cursor;
            return Ok(());
        }
        let (id, _) =
            event.body.ownership().ok_or_else(|| fail("only ownership events belong to the ownership log"))?;
        let record = self.records.get_mut(id).ok_or_else(|| fail("unknown ownership record"))?;
        // Only what comes from its holder keeps its lease: root's changes,
        // or a snapshot taken before a reclaim, say nothing of the holder.
        if matches!(
            event.body,
            EventBody::OwnershipConversationBound { .. }
                | EventBody::OwnershipResumed { .. }
                | EventBody::OwnershipHeartbeat { .. }
                | EventBody::OwnershipHandoffCompleted { .. }
                | EventBody::OwnershipReclaimed { .. }
                | EventBody::OwnershipSubmitted { .. }
        ) {
            record.last_seen_ms = at;
        }
        match &event.body {
            EventBody::OwnershipConversationBound { conversation_id, .. } => {
                let holder = record.holders.last_mut().expect("a record has a holder");
                if holder.conversations.last() != Some(conversation_id) {
                    holder.conversations.push(conversation_id.clone());
                    keep_newest(&mut holder.conversations);
                }
                if record.state == OwnershipState::Provisional {
                    record.state = OwnershipState::Active;
                }
            }
            EventBody::OwnershipResumed { session, .. } => {
                let holder = record.holders.last_mut().expect("a record has a holder");
                holder.sessions.push(session.clone());
                keep_newest(&mut holder.sessions);
            }
            EventBody::OwnershipHeartbeat { .. } => {}
            EventBody::OwnershipHandoffStarted { to, .. } => {
                record.handoff_to = Some(to.clone());
                record.state = OwnershipState::HandingOff;
            }
            EventBody::OwnershipHandoffCompleted { holder, run_id, session, conversation, unmanaged, .. }
            | EventBody::OwnershipReclaimed { holder, run_id, session, conversation, unmanaged, .. } => {
                let via = match event.body {
                    EventBody::OwnershipReclaimed { .. } => Via::Reclaimed,
                    _ => Via::Handoff,
                };
                if record.holders.len() >= HOLDERS_MAX {
                    return Err(fail("more holders than a record may have"));
                }
                record.holders.last_mut().expect("a record has a holder").until_ms = Some(at);
                record.holders.push(holding(holder, run_id, via, session, conversation));
                record.handoff_to = None;
                record.state = held(conversation, *unmanaged);
            }
            EventBody::OwnershipReleased { reason, .. } => {
                record.state = OwnershipState::Released;
                record.handoff_to = None;
                record.released = Some(reason.clone().unwrap_or_default());
                record.holders.last_mut().expect("a record has a holder").until_ms = Some(at);
            }
            EventBody::OwnershipWipPreserved { ref_name, commit, .. } => {
                record.wip.push(Wip { ref_name: ref_name.clone(), commit: commit.clone(), at_ms: at });
                keep_newest(&mut record.wip);
            }
            EventBody::OwnershipSubmitted { holder, session, branch, head, .. } => {
                record.state = OwnershipState::Submitted;
                record.submitted = Some(protocol::ownership::Submitted {
                    branch: branch.clone(),
                    head: head.clone(),
                    worker_id: holder.clone(),
                    session: session.clone(),
                    at_ms: at,
                });
            }
            EventBody::OwnershipLanded { by, into, commit, source_head, .. } => {
                record.state = OwnershipState::Landed;
                record.landed = Some(protocol::ownership::Landed {
                    into: into.clone(),
                    commit: commit.clone(),
                    source_head: source_head.clone(),
                    by: by.clone(),
                    at_ms: at,
                });
                record.holders.last_mut().expect("a record has a holder").until_ms.get_or_insert(at);
            }
            EventBody::OwnershipRemoved { .. } => {
                record.state = OwnershipState::Removed;
                record.handoff_to = None;
                record.removed_at_ms = Some(at);
                record.holders.last_mut().expect("a record has a holder").until_ms.get_or_insert(at);
            }
            _ => unreachable!("ownership() names only ownership events"),
        }
        let id = id.clone();
        self.reindex(&id);
        self.cursor = event.cursor;
        Ok(())
    }

    /// Adds whatever the record now names to the indexes.
    fn reindex(&mut self, id: &OwnershipId) {
        let record = &self.records[id];
        index(&mut self.by_worktree, record.worktree.path.clone(), id);
        let branches = record.worktree.branch.iter().chain(record.submitted.as_ref().map(|s| &s.branch));
        for branch in branches {
            index(self.by_branch.entry(record.worktree.repo.clone()).or_default(), branch.clone(), id);
        }
        for holding in &record.holders {
            index(&mut self.by_worker, holding.worker_id.clone(), id);
            for session in &holding.sessions {
                index(&mut self.by_session, session.id.clone(), id);
            }
            for conversation in &holding.conversations {
                index(&mut self.by_conversation, conversation.clone(), id);
            }
        }
        let commits = record.submitted.iter().map(|s| &s.head).chain(record.landed.iter().map(|l| &l.commit));
        for commit in commits {
            index(&mut self.by_commit, commit.clone(), id);
        }
    }
}

/// A record's state once a holder holds it: provisional until the holder's
/// conversation is bound, unless it has none to bind.
fn held(conversation: &Option<ConversationId>, unmanaged: bool) -> OwnershipState {
    match conversation.is_some() || unmanaged {
        true => OwnershipState::Active,
        false => OwnershipState::Provisional,
    }
}

/// Whether a worker of `run` may see `record`: its holder is of this run,
/// or it is live and its holder's run has ended (nobody is left there to object; the
/// record waits for a reclaim, its work in progress preserved first).
pub fn readable(state: &State, record: &Record, run: &RunId) -> bool {
    let of = &record.holder().run_id;
    of == run || (record.state.is_live() && state.runs.get(of).is_none_or(|r| r.state.is_terminal()))
}

/// Whether `record`'s holder is proven dead at `now_ms`, and why: its
/// worker failed or was cancelled (or its run ended), or nothing came from
/// it for [`LEASE_MS`]. A worker that completed is not dead (root may
/// follow it up); a submitted record waits for its landing, however
/// quiet. A record no longer live is never stale.
pub fn stale(state: &State, record: &Record, now_ms: u64) -> Option<StaleReason> {
    if !record.state.is_live() {
        return None;
    }
    let holder = record.holder();
    let ended = match state.worker(&holder.worker_id) {
        None => true,
        Some(worker) => {
            matches!(worker.state, WorkerState::Failed | WorkerState::Cancelled | WorkerState::LaunchFailed)
                || state
                    .runs
                    .get(&worker.run_id)
                    .is_none_or(|run| matches!(run.state, RunState::Completed | RunState::Failed | RunState::Cancelled))
        }
    };
    if ended {
        return Some(StaleReason::HolderEnded);
    }
    let quiet = now_ms.saturating_sub(record.last_seen_ms) >= LEASE_MS;
    (quiet && record.state != OwnershipState::Submitted).then_some(StaleReason::LeaseLapsed)
}
