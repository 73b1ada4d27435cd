//! The executor's memory and judgement, without IO: the command idempotency
//! journal (phases `received → submission_started → submitted → completed`),
//! the managed-tab registry (worker ↔ tab ↔ conversation), and what page
//! reports and lost tabs mean on the wire. The background script persists
//! [`Core`] after every change and performs the effects it asks for; a
//! restart (service worker stopped, extension reloaded) loads it back, and
//! the daemon's replay of unfinished commands resumes each at its phase.

use std::collections::BTreeMap;

use chatgpt_dom::{is_project_page, parse_url};
use protocol::executor::{Command, CommandOp, CommandOutcome, ConversationState, ExecutorFrame};
use protocol::{CommandId, ConversationId, ErrorCode, WorkerId};
use serde::{Deserialize, Serialize};

/// Completed journal entries kept for replays; older ones are forgotten.
pub const JOURNAL_KEEP: usize = 512;

/// Where a command is. Persisted before the step it names is taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    /// Journaled and acknowledged; no effect yet.
    Received,
    /// A tab is being opened for it (its URL carries the command's marker).
    TabOpening,
    /// The prompt is being handed to the page: from here a lost result is
    /// ambiguous unless the page can vouch for it.
    SubmissionStarted,
    /// The page took the prompt; the result may not have reached the daemon.
    Submitted,
    /// The result was sent.
    Completed,
}

/// One journaled command, by idempotency key.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Entry {
    /// The latest command id carrying this key (replays may renumber).
    pub command_id: CommandId,
    /// The worker it serves.
    pub worker_id: WorkerId,
    /// How far it got.
    pub phase: Phase,
    /// Its outcome, once known.
    pub outcome: Option<CommandOutcome>,
    /// Arrival order, for forgetting the oldest.
    pub seq: u64,
}

/// A worker's managed conversation.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Managed {
    /// The tab showing it, while one is open.
    pub tab: Option<i32>,
    /// The bound conversation, once the page showed `/c/<uuid>`.
    pub conversation: Option<ConversationId>,
    /// The last coarse state reported to the daemon.
    pub state: Option<ConversationState>,
}

/// What to do for a command, after it is journaled and acknowledged.
#[derive(Debug, Clone, PartialEq)]
pub enum Plan {
    /// Nothing to perform: send this result (a replay, or a refusal).
    Reply(CommandOutcome),
    /// Refused without touching the journal (the key belongs to another worker).
    Refuse(CommandOutcome),
    /// Open a tab at `url` (marked with the command) and submit `prompt` there.
    Create {
        /// Where the new chat starts.
        url: String,
        /// The bootstrap prompt.
        prompt: String,
    },
    /// Submit `prompt` in the worker's tab once the page is idle.
    Submit {
        /// The managed tab.
        tab: i32,
        /// The prompt.
        prompt: String,
    },
    /// The prompt may already be in the page: ask the page before answering.
    Reconcile {
        /// The managed tab, if still open.
        tab: Option<i32>,
    },
    /// Open the exact conversation in a new managed tab.
    Open {
        /// Its canonical URL.
        url: String,
    },
    /// Report the page's state.
    Inspect {
        /// The managed tab.
        tab: i32,
    },
    /// Close the managed tab.
    Close {
        /// The managed tab.
        tab: i32,
    },
}

/// The persisted executor state.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Core {
    journal: BTreeMap<String, Entry>,
    workers: BTreeMap<WorkerId, Managed>,
    next_seq: u64,
}

fn refuse(code: ErrorCode, detail: &str) -> Plan {
    Plan::Reply(CommandOutcome::Error { code, detail: detail.into() })
}

/// The fragment that marks a tab opened for a command, so a restart between
/// opening it and recording it finds it again exactly (never by guess).
pub fn tab_marker(command: &str) -> String {
    format!("#orchestrator-{command}")
}

impl Core {
    /// The journal entry for `key`.
    pub fn entry(&self, key: &str) -> Option<&Entry> {
        self.journal.get(key)
    }

    /// The worker's managed conversation.
    pub fn managed(&self, worker: &WorkerId) -> Option<&Managed> {
        self.workers.get(worker)
    }

    /// Every managed worker.
    pub fn workers(&self) -> impl Iterator<Item = (&WorkerId, &Managed)> {
        self.workers.iter()
    }

    /// The worker a tab serves, if the tab is managed.
    pub fn worker_of(&self, tab: i32) -> Option<&WorkerId> {
        self.workers.iter().find(|(_, m)| m.tab == Some(tab)).map(|(w, _)| w)
    }

    /// Journals an arriving command (or finds its earlier arrival) and says
    /// what to do. The caller persists, then acknowledges, then acts.
    pub fn receive(&mut self, command: &Command, now_ms: u64) -> Plan {
        let key = command.idempotency_key.clone();
        if let Some(entry) = self.journal.get_mut(&key) {
            if entry.worker_id != command.worker_id {
                return Plan::Refuse(CommandOutcome::Error {
                    code: ErrorCode::Conflict,
                    detail: "idempotency key reused for another worker".into(),
                });
            }
            entry.command_id = command.command_id.clone();
            match (entry.phase, &entry.outcome) {
                (Phase::Submitted | Phase::Completed, Some(outcome)) => return Plan::Reply(outcome.clone()),
                (Phase::SubmissionStarted | Phase::Submitted, _) => {
                    let tab = self.workers.get(&command.worker_id).and_then(|m| m.tab);
                    return Plan::Reconcile { tab };
                }
                // Received or opening: nothing happened in the page yet; go on.
                _ => {}
            }
        } else {
            self.next_seq += 1;
            self.journal.insert(
                key,
                Entry {
                    command_id: command.command_id.clone(),
                    worker_id: command.worker_id.clone(),
                    phase: Phase::Received,
                    outcome: None,
                    seq: self.next_seq,
                },
            );
            self.forget_old();
        }
        if now_ms > command.deadline_ms {
            return refuse(ErrorCode::DeadlineExceeded, "the command arrived after its deadline");
        }
        self.plan(command)
    }

    fn plan(&self, command: &Command) -> Plan {
        let managed = self.workers.get(&command.worker_id);
        // Every command but create must name the conversation this executor bound for the worker.
        let bound = |conversation: &ConversationId| -> Result<&Managed, Plan> {
            match managed {
                Some(m) if m.conversation.as_ref() == Some(conversation) => Ok(m),
                _ => Err(refuse(ErrorCode::UnmanagedTarget, "not a conversation this executor created for the worker")),
            }
        };
        let open_tab = |conversation: &ConversationId| -> Result<i32, Plan> {
            bound(conversation)?
                .tab
                .ok_or_else(|| refuse(ErrorCode::NotFound, "the conversation has no open tab; open it first"))
        };
        let result = match &command.op {
            CommandOp::ConversationCreate { app: Some(label), .. }
            | CommandOp::ConversationSend { app: Some(label), .. }
                if !protocol::limits::valid_app_label(label) =>
            {
                return refuse(ErrorCode::InvalidArgument, "app is not a valid app label");
            }
            CommandOp::ConversationCreate { prompt, project_url, .. } => {
                match managed {
                    // Resuming after a restart: the tab is already open, go on to submit.
                    Some(Managed { tab: Some(tab), conversation: None, .. })
                        if self.journal.get(&command.idempotency_key).is_some_and(|e| e.phase == Phase::TabOpening) =>
                    {
                        Ok(Plan::Submit { tab: *tab, prompt: prompt.clone() })
                    }
                    Some(_) => Err(refuse(ErrorCode::Conflict, "the worker already has a managed conversation")),
                    None => {
                        let base = match project_url {
                            Some(url) if is_project_page(url) => url.clone(),
                            Some(_) => {
                                return refuse(
                                    ErrorCode::InvalidArgument,
                                    "projectUrl is not a chatgpt.com project URL",
                                );
                            }
                            None => "https://chatgpt.com/".into(),
                        };
                        Ok(Plan::Create { url: base, prompt: prompt.clone() })
                    }
                }
            }
            CommandOp::ConversationSend { conversation_id, prompt, .. }
            | CommandOp::ConversationSteer { conversation_id, prompt } => {
                open_tab(conversation_id).map(|tab| Plan::Submit { tab, prompt: prompt.clone() })
            }
            CommandOp::ConversationOpen { conversation_id, .. } => bound(conversation_id).map(|m| match m.tab {
                Some(_) => Plan::Reply(CommandOutcome::Ok { conversation_id: Some(conversation_id.clone()) }),
                None => Plan::Open { url: format!("https://chatgpt.com/c/{conversation_id}") },
            }),
            CommandOp::ConversationInspect { conversation_id } => {
                open_tab(conversation_id).map(|tab| Plan::Inspect { tab })
            }
            CommandOp::ConversationClose { conversation_id } => bound(conversation_id).map(|m| match m.tab {
                Some(tab) => Plan::Close { tab },
                None => Plan::Reply(CommandOutcome::Ok { conversation_id: Some(conversation_id.clone()) }),
            }),
        };
        result.unwrap_or_else(|refusal| refusal)
    }

    /// A replay arrived while the command is being performed: the result
    /// will answer the newest command id. False (and nothing changed) when
    /// the key belongs to another worker.
    pub fn retarget(&mut self, key: &str, command: &Command) -> bool {
        match self.journal.get_mut(key) {
            Some(entry) if entry.worker_id == command.worker_id => {
                entry.command_id = command.command_id.clone();
                true
            }
            Some(_) => false,
            None => true,
        }
    }

    /// Moves `key` to `phase`. Persist before taking the step it names.
    pub fn advance(&mut self, key: &str, phase: Phase) {
        if let Some(entry) = self.journal.get_mut(key) {
            entry.phase = phase;
        }
    }

    /// Records the command's outcome (phase `submitted` for an effect that
    /// happened, `completed` otherwise) and returns the result frame.
    pub fn finish(&mut self, key: &str, outcome: CommandOutcome) -> Option<ExecutorFrame> {
        let entry = self.journal.get_mut(key)?;
        entry.outcome = Some(outcome.clone());
        entry.phase = Phase::Completed;
        Some(ExecutorFrame::Result { command_id: entry.command_id.clone(), outcome })
    }

    /// A tab was opened for `worker` (a create, or a reopen of its conversation).
    pub fn tab_opened(&mut self, worker: &WorkerId, tab: i32) {
        self.workers.entry(worker.clone()).or_default().tab = Some(tab);
    }

    /// A create was refused before anything was submitted (the app could
    /// not be bound, the page was signed out…): the worker no longer owns a
    /// conversation-less tab, so a later retry starts clean. Returns the tab
    /// to close. A worker whose page already showed a conversation keeps it.
    pub fn release_unbound(&mut self, worker: &WorkerId) -> Option<i32> {
        if self.workers.get(worker).is_some_and(|m| m.conversation.is_none()) {
            return self.workers.remove(worker).and_then(|m| m.tab);
        }
        None
    }

    /// A tab went away. For a managed tab, the worker's conversation is closed.
    pub fn tab_removed(&mut self, tab: i32) -> Vec<ExecutorFrame> {
        let Some(worker) = self.worker_of(tab).cloned() else { return vec![] };
        let managed = self.workers.get_mut(&worker).expect("found above");
        managed.tab = None;
        managed.state = Some(ConversationState::Closed);
        vec![ExecutorFrame::ConversationClosed { worker_id: worker }]
    }

    /// What a page report means: a binding the first time a managed tab
    /// shows `/c/<uuid>`, drift if it later shows another, and state changes.
    /// Reports from tabs this executor does not manage mean nothing.
    pub fn page_report(
        &mut self,
        tab: i32,
        url: &str,
        state: ConversationState,
        error: Option<ErrorCode>,
    ) -> Vec<ExecutorFrame> {
        let Some(worker) = self.worker_of(tab).cloned() else { return vec![] };
        let managed = self.workers.get_mut(&worker).expect("found above");
        let mut frames = Vec::new();
        if let Some(seen) = parse_url(url).and_then(|r| r.conversation) {
            match &managed.conversation {
                None => {
                    managed.conversation = Some(seen.clone());
                    frames.push(ExecutorFrame::ConversationBound {
                        worker_id: worker.clone(),
                        url: format!("https://chatgpt.com/c/{seen}"),
                        conversation_id: seen,
                    });
                }
                Some(bound) if *bound == seen => {}
                Some(bound) => frames.push(ExecutorFrame::ConversationError {
                    worker_id: worker.clone(),
                    code: ErrorCode::ConversationIdentityDrift,
                    detail: format!("the managed tab shows {seen}, bound to {bound}"),
                }),
            }
        }
        if managed.state != Some(state) || state == ConversationState::Error {
            managed.state = Some(state);
            frames.push(ExecutorFrame::ConversationState { worker_id: worker, state, error });
        }
        frames
    }

    /// Drops tabs that no longer exist (after a browser restart), reporting
    /// each managed conversation that lost its tab.
    pub fn retain_tabs(&mut self, alive: impl Fn(i32) -> bool) -> Vec<ExecutorFrame> {
        let gone: Vec<i32> = self.workers.values().filter_map(|m| m.tab).filter(|t| !alive(*t)).collect();
        gone.into_iter().flat_map(|tab| self.tab_removed(tab)).collect()
    }

    fn forget_old(&mut self) {
        let done = self.journal.values().filter(|e| e.phase == Phase::Completed).count();
        if done <= JOURNAL_KEEP {
            return;
        }
        let mut completed: Vec<(u64, String)> =
            self.journal.iter().filter(|(_, e)| e.phase == Phase::Completed).map(|(k, e)| (e.seq, k.clone())).collect();
        completed.sort();
        for (_, key) in completed.into_iter().take(done - JOURNAL_KEEP) {
            self.journal.remove(&key);
        }
    }
}
