//! Execution Continuity's rules (`execution-continuity-SPEC.md` §10, §16),
//! pure: a worker's continuity record, its run's and its own lifecycle
//! state and `now` in; what to do out. Nothing here reads a clock or
//! submits anything: the scheduler shell commits what these rules decide,
//! and the record is rebuilt from the log after a restart, so every
//! deadline here is a function of durable facts.

use std::collections::{BTreeSet, HashSet};

use serde::{Deserialize, Serialize};

use protocol::continuity::{
    AttemptReason, ContinuationMode, ContinuationPolicy, Hold, StallLevel, TurnStall, Wake, threshold,
};
use protocol::executor::ConversationState;
use protocol::{CommandId, CommandIntent, RunState, WorkerDisposition, WorkerId, WorkerState};

use crate::model::{State, Worker};

/// The account-wide budget for automatic submissions: every worker of
/// this daemon shares one ChatGPT account, so N workers going idle at once
/// never fire N prompts in the same second.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pacing {
    /// The least time between two automatic (auto-resume) attempts, across all workers.
    pub min_gap_ms: u64,
    /// How long every automatic attempt waits after ChatGPT said "Too many
    /// requests" on any managed tab (its dialog names no time, so this is
    /// a conservative constant).
    pub rate_limit_wait_ms: u64,
    /// How long a turn may run with no durable progress from its worker (or
    /// a submitted prompt go without its turn starting) before it is
    /// reported stalled. Nothing reloads it.
    pub stalled_turn_after_ms: u64,
}

impl Default for Pacing {
    fn default() -> Self {
        Self { min_gap_ms: 5_000, rate_limit_wait_ms: 15 * 60_000, stalled_turn_after_ms: 20 * 60_000 }
    }
}

impl Pacing {
    /// Until when automatic attempts wait for a rate limit seen in `state`.
    fn rate_limited_until(&self, state: &State) -> Option<u64> {
        state.rate_limited_at_ms.map(|at| at.saturating_add(self.rate_limit_wait_ms))
    }
}

/// What falls due for one worker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Schedule its next attempt, answering `wakes`.
    Schedule {
        /// The worker.
        worker: WorkerId,
        /// The attempt's sequence number.
        attempt: u32,
        /// Auto resume, or manual (root or the operator asked).
        reason: AttemptReason,
        /// Every reason it answers.
        wakes: Vec<Wake>,
        /// Whether its prompt is the keepalive's checkpoint (else the resume).
        checkpoint: bool,
    },
    /// Its turn does not end.
    TurnStalled {
        /// The worker.
        worker: WorkerId,
        /// What was seen.
        stall: TurnStall,
        /// How long without progress (or without starting), in ms.
        for_ms: u64,
    },
    /// The stall guard speaks: a warning, or a pause (which holds it).
    Stalled {
        /// The worker.
        worker: WorkerId,
        /// How far.
        level: StallLevel,
        /// Consecutive attempts without progress.
        attempts_without_progress: u32,
        /// Milliseconds since its last progress.
        quiet_ms: u64,
    },
}

/// Everything that is due at `now`. At most one automatic attempt per
/// pacing gap, and it goes to the worker that has waited longest (idle
/// since, else last submitted; then by id, so a replay decides the same):
/// a worker whose turns end quickly never starves the others.
pub fn due(state: &State, now_ms: u64, pacing: Pacing) -> Vec<Action> {
    let open = workers_with_open_commands(state);
    let mut workers: Vec<&Worker> = state.workers.values().filter(|w| watched(w)).collect();
    let waiting_since = |w: &Worker| w.continuity.idle_since_ms.or(w.continuity.last_submitted_at_ms).unwrap_or(0);
    workers.sort_by(|a, b| waiting_since(a).cmp(&waiting_since(b)).then_with(|| a.id.cmp(&b.id)));
    let mut paced_at = state.last_auto_attempt_at_ms;
    let rate_limited = pacing.rate_limited_until(state).is_some_and(|until| now_ms < until);
    // A turn that does not end is reported for every unfinished worker,
    // whatever its continuation mode.
    let mut stalled: Vec<_> = turn_stalls(state).collect();
    stalled.sort_by(|a, b| a.0.id.cmp(&b.0.id));
    let mut actions: Vec<Action> = stalled
        .into_iter()
        .filter(|(_, _, since)| since + pacing.stalled_turn_after_ms <= now_ms)
        .map(|(worker, stall, since)| Action::TurnStalled { worker: worker.id.clone(), stall, for_ms: now_ms - since })
        .collect();
    for worker in workers {
        let Some(run) = state.runs.get(&worker.run_id) else { continue };
        let c = pending(worker, now_ms);
        if let Some(stalled) = stall_action(worker, &c, now_ms) {
            let pauses = matches!(stalled, Action::Stalled { level: StallLevel::Paused, .. });
            actions.push(stalled);
            if pauses {
                continue;
            }
        }
        if c.evaluate(run.state, worker.state, open.contains(&worker.id), now_ms) != Some(Verdict::Submit) {
            continue;
        }
        let wakes: Vec<Wake> = c.intent.as_ref().map(|i| i.wakes.iter().cloned().collect()).unwrap_or_default();
        let manual = wakes.iter().any(|w| matches!(w, Wake::Operator | Wake::Steering));
        if !manual {
            if rate_limited || paced_at.is_some_and(|at| now_ms < at + pacing.min_gap_ms) {
                continue;
            }
            paced_at = Some(now_ms);
        }
        let reason = if manual {
            AttemptReason::ManualResume
        } else if wakes.contains(&Wake::Recovery) {
            AttemptReason::Recovery
        } else {
            AttemptReason::AutoResume
        };
        actions.push(Action::Schedule {
            worker: worker.id.clone(),
            attempt: c.attempts + 1,
            reason,
            checkpoint: wakes.contains(&Wake::ActiveKeepalive),
            wakes,
        });
    }
    actions
}

/// When something next falls due after `now`, if anything is scheduled at all.
pub fn next_due_at(state: &State, now_ms: u64, pacing: Pacing) -> Option<u64> {
    let paced = [state.last_auto_attempt_at_ms.map(|at| at + pacing.min_gap_ms), pacing.rate_limited_until(state)]
        .into_iter()
        .flatten()
        .filter(|at| *at > now_ms)
        .max();
    let open = workers_with_open_commands(state);
    state
        .workers
        .values()
        .filter(|w| watched(w))
        .filter_map(|worker| {
            let run = state.runs.get(&worker.run_id)?;
            let c = pending(worker, now_ms);
            let verdict = c.evaluate(run.state, worker.state, open.contains(&worker.id), now_ms);
            let deferred = match verdict {
                Some(Verdict::NotBefore(at)) => Some(at),
                Some(Verdict::Submit) => paced,
                _ => None,
            };
            let keepalive = worker.conversation.as_ref().and(c.keepalive_due_at(worker.id.as_str()));
            [deferred, keepalive, c.stall_due_at()].into_iter().flatten().filter(|at| *at > now_ms).min()
        })
        .chain(turn_stalls(state).map(|(_, _, since)| since + pacing.stalled_turn_after_ms).filter(|at| *at > now_ms))
        .min()
}

/// Every unfinished worker's turn that does not end, not yet reported: the
/// worker, what is seen, and since when the bound counts.
fn turn_stalls(state: &State) -> impl Iterator<Item = (&Worker, TurnStall, u64)> {
    state
        .workers
        .values()
        .filter(|w| !w.state.is_terminal())
        .filter_map(|w| w.continuity.turn_stall().map(|(stall, since)| (w, stall, since)))
}

/// The worker's record with the keepalive's wake added when it is due (it
/// is derived from durable facts, so it needs no event of its own until
/// an attempt answers it).
fn pending(worker: &Worker, now_ms: u64) -> Continuity {
    let mut c = worker.continuity.clone();
    let keepalive = worker.conversation.as_ref().and(c.keepalive_due_at(worker.id.as_str()));
    if keepalive.is_some_and(|at| at <= now_ms) && worker.state == WorkerState::Running {
        c.wake(Wake::ActiveKeepalive);
    }
    // Idle is a fact about the conversation (a stale idle reason, the page
    // generating again, was already dropped by the fold); so is a turn that
    // ended on an incident, whose recovery waits the same grace.
    if !matches!(worker.conversation_state, Some(ConversationState::Idle | ConversationState::Error)) {
        c.idle_since_ms = None;
    }
    c
}

/// The stall guard's action for an Auto worker that is unheld and unfinished, if any.
fn stall_action(worker: &Worker, c: &Continuity, now_ms: u64) -> Option<Action> {
    if c.policy.mode != ContinuationMode::Auto || c.hold.is_some() || worker.state.is_terminal() {
        return None;
    }
    let level = match c.stall(now_ms) {
        Stall::Pause => StallLevel::Paused,
        Stall::Warn if !c.warned => StallLevel::Warning,
        Stall::Warn | Stall::Clear => return None,
    };
    Some(Action::Stalled {
        worker: worker.id.clone(),
        level,
        attempts_without_progress: c.progress.attempts_without,
        quiet_ms: now_ms.saturating_sub(c.progress.last_at_ms),
    })
}

/// Whether anything can fall due for the worker: it is unfinished, and in
/// Auto mode (keepalive, stall guard) or asked for a turn. The scheduler
/// runs on every commit, so everyone else is skipped before any work.
fn watched(worker: &Worker) -> bool {
    !worker.state.is_terminal()
        && (worker.continuity.intent.is_some() || worker.continuity.policy.mode == ContinuationMode::Auto)
}

/// The workers with a create or a send (a follow-up's, a resume's) open:
/// another turn is then already coming (seed §10.2, step 8). One pass.
pub(crate) fn workers_with_open_commands(state: &State) -> HashSet<&WorkerId> {
    state
        .open_commands
        .iter()
        .filter_map(|id| state.commands.get(id))
        .filter(|c| matches!(c.intent, CommandIntent::Create | CommandIntent::Send { .. }))
        .map(|c| &c.worker_id)
        .collect()
}

/// The durable, coalesced request for one more turn, not yet delivered.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Intent {
    /// Every reason given so far; one delivery answers them all.
    pub wakes: BTreeSet<Wake>,
}

impl Intent {
    /// Whether root or the operator asked for it (a manual worker gets it then).
    fn explicit(&self) -> bool {
        self.wakes.iter().any(|w| matches!(w, Wake::Operator | Wake::Steering))
    }

    /// Whether it may be delivered inside the spacing floor: an idle
    /// conversation (when the policy allows), an operator's "continue now"
    /// and root's corrective steering are not spam.
    fn bypasses_floor(&self, policy: &ContinuationPolicy) -> bool {
        self.wakes.iter().any(|w| match w {
            Wake::Idle | Wake::Recovery => policy.idle_may_bypass_min_spacing,
            Wake::Operator | Wake::Steering => true,
            Wake::ActiveKeepalive | Wake::Event { .. } => false,
        })
    }
}

/// Progress as the stall guard counts it (seed §16.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Progress {
    /// Consecutive attempts that ended with no durable progress.
    pub attempts_without: u32,
    /// When the worker last made progress (or was created).
    pub last_at_ms: u64,
}

/// One worker's continuity record, folded from its events.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Continuity {
    /// Its policy (the run's default at spawn, then its own changes).
    pub policy: ContinuationPolicy,
    /// What holds its automatic turns, if anything.
    pub hold: Option<Hold>,
    /// The hold's reason in its setter's words (a person's question), for
    /// the operator surfaces.
    pub hold_reason: Option<String>,
    /// The choices and context of a person's question.
    pub hold_ask: Option<protocol::operator::Ask>,
    /// Since when it has been held.
    pub hold_since_ms: Option<u64>,
    /// The sequence number of its latest attempt; 0 before the first.
    pub attempts: u32,
    /// Of those, how many Auto Resume started (the operator surfaces show it).
    pub auto_resumes: u32,
    /// Its last Execution Continuity events (type, when), newest last, at
    /// most [`RECENT_KEPT`]: the overlay's drawer lists them.
    pub recent: Vec<(String, u64)>,
    /// What started the latest attempt.
    pub last_reason: Option<AttemptReason>,
    /// The continuation command queued or submitted and not yet finished:
    /// at most one per worker (seed §21.1).
    pub in_flight: Option<CommandId>,
    /// The turn asked for and not yet delivered.
    pub intent: Option<Intent>,
    /// When its last continuation was submitted.
    pub last_submitted_at_ms: Option<u64>,
    /// Since when its conversation has been idle while it is unfinished;
    /// cleared when a turn starts.
    pub idle_since_ms: Option<u64>,
    /// The stall guard's counters.
    pub progress: Progress,
    /// Whether a submitted turn is running, its end not yet seen.
    pub turn_open: bool,
    /// Whether the latest attempt has made progress so far.
    pub attempt_progressed: bool,
    /// Whether the stall guard's warning was raised since the last progress.
    pub warned: bool,
    /// The wakes the in-flight command carries: asked for again if it fails.
    pub carried: BTreeSet<Wake>,
    /// Where the page was while a prompt was being submitted.
    pub sending: Sending,
    /// Since when the page has been generating (cleared when a turn ends).
    pub busy_since_ms: Option<u64>,
    /// Whether the running turn was reported stalled already.
    pub turn_stall_reported: bool,
    /// When the running turn's content was last seen moving on (the page,
    /// not the worker: `conversation.progressed`).
    pub page_progress_at_ms: Option<u64>,
    /// Recoveries in a row that could not be delivered into the page (it
    /// still showed its incident): asked again up to
    /// [`RECOVERY_ATTEMPTS_MAX`], then the worker is held for a person.
    pub recoveries_undelivered: u32,
}

/// How many continuity events a worker's record keeps for the surfaces.
pub const RECENT_KEPT: usize = 5;

impl Continuity {
    /// Notes a continuity event about the worker (the oldest goes past [`RECENT_KEPT`]).
    pub fn noted(&mut self, kind: &'static str, at_ms: u64) {
        if self.recent.len() == RECENT_KEPT {
            self.recent.remove(0);
        }
        self.recent.push((kind.to_owned(), at_ms));
    }
}

/// How many recoveries in a row may go undelivered before the worker is
/// paused for a person instead of being tried again.
pub const RECOVERY_ATTEMPTS_MAX: u32 = 3;

/// What the page showed while a prompt of the worker was being submitted:
/// its turn can start and end before the submission's result arrives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum Sending {
    /// No prompt is being submitted.
    #[default]
    No,
    /// One is, and nothing was seen since it was handed out.
    Dispatched,
    /// Its turn was seen generating.
    SawBusy,
    /// And then ending (idle, or an incident).
    SawEnd,
}

/// How a continuation's command ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Finish {
    /// Its prompt went in.
    Submitted,
    /// It surely did not (refused, timed out before typing, the tab closed).
    Undelivered,
    /// It may have (`AMBIGUOUS_SUBMISSION`, `OUTCOME_UNKNOWN`).
    Uncertain,
}

/// Why a pending turn is withdrawn for good.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    /// The run completed, failed or was cancelled.
    Run,
    /// The worker completed, failed or was cancelled.
    Worker,
}

/// Why a pending turn is kept but not delivered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Held {
    /// Awaiting a person.
    Human,
    /// Awaiting the answer to a question or blocker it raised.
    Answer,
    /// Awaiting a dependency.
    Dependency,
    /// Paused by root or the operator.
    Paused,
    /// Manual mode and nobody asked explicitly.
    Manual,
    /// Paused by the stall guard.
    Stalled,
}

/// What to do with a worker's pending turn now (seed §10.2, in its order).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Withdraw it (steps 1–2).
    Cancel(Ended),
    /// Keep it, deliver nothing (steps 3–7).
    Hold(Held),
    /// Another command for the worker is pending or submitted: the reasons
    /// ride with that one (step 8).
    Coalesce,
    /// Deliver it at this time, not before: the idle grace, or the spacing
    /// floor (step 9). Re-evaluated then.
    NotBefore(u64),
    /// Deliver exactly one fresh continuation now (step 10).
    Submit,
}

/// What the stall guard says (seed §16.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Stall {
    /// Progressing.
    Clear,
    /// Past a warning threshold: surface it, keep resuming.
    Warn,
    /// Past a pause threshold: hold further resumes.
    Pause,
}

impl Continuity {
    /// A record starting at `now` under `policy`.
    pub fn new(policy: ContinuationPolicy, now_ms: u64) -> Self {
        Self { policy, progress: Progress { attempts_without: 0, last_at_ms: now_ms }, ..Self::default() }
    }

    /// Adds a reason for a turn; the same reason twice is one (duplicate
    /// idle reports make one resume).
    pub fn wake(&mut self, wake: Wake) {
        self.intent.get_or_insert_with(Intent::default).wakes.insert(wake);
    }

    /// The conversation was seen idle at `now` while the worker is
    /// unfinished: a submitted turn ended (an attempt without progress
    /// counts against the stall guard) and the worker wants another.
    pub fn went_idle(&mut self, now_ms: u64) {
        // The page takes input again: an earlier incident is over.
        self.recoveries_undelivered = 0;
        self.turn_ended(now_ms, Wake::Idle);
    }

    /// The turn ended on an incident at `now` ("Message delivery timed out",
    /// or "Too many requests"): the attempt ends there (without progress,
    /// unless it made some) and a recovery is asked for, a fresh resume
    /// through the same rules (so after a rate limit, after its wait).
    pub fn turn_failed(&mut self, now_ms: u64) {
        self.turn_ended(now_ms, Wake::Recovery);
    }

    /// The turn that does not end, if one runs: what is seen, and when the
    /// bound starts counting (the later of its start and the worker's last
    /// durable progress). Reported once per turn.
    pub fn turn_stall(&self) -> Option<(TurnStall, u64)> {
        if self.turn_stall_reported {
            return None;
        }
        match (self.busy_since_ms, self.last_submitted_at_ms) {
            (Some(since), _) => {
                let last =
                    [Some(since), Some(self.progress.last_at_ms), self.page_progress_at_ms].into_iter().flatten();
                Some((TurnStall::GeneratingWithoutProgress, last.max().unwrap_or(since)))
            }
            (None, Some(at)) if self.turn_open => Some((TurnStall::NeverStarted, at)),
            _ => None,
        }
    }

    /// Whether a submitted turn is open that its page was never seen running
    /// and the page, as last seen (`page`), shows it ended: the reports may
    /// have been lost. The daemon then asks the page ([`crate::schedule`]).
    pub fn turn_unconfirmed(&self, page: Option<ConversationState>) -> bool {
        self.turn_open && self.busy_since_ms.is_none() && page == Some(ConversationState::Idle)
    }

    /// The running turn's content moved on at `now`: the bound for a turn
    /// that does not end starts again (and a later stall is reported anew).
    /// It is not the worker's progress: the stall guard does not count it.
    pub fn page_progressed(&mut self, now_ms: u64) {
        if self.busy_since_ms.is_some() {
            self.page_progress_at_ms = Some(now_ms);
            self.turn_stall_reported = false;
        }
    }

    fn turn_ended(&mut self, now_ms: u64, wake: Wake) {
        self.busy_since_ms = None;
        self.page_progress_at_ms = None;
        self.turn_stall_reported = false;
        if std::mem::take(&mut self.turn_open) && !self.attempt_progressed {
            self.progress.attempts_without = self.progress.attempts_without.saturating_add(1);
        }
        if self.sending == Sending::SawBusy {
            self.sending = Sending::SawEnd;
        }
        if self.idle_since_ms.is_none() {
            self.idle_since_ms = Some(now_ms);
        }
        self.wake(wake);
    }

    /// A prompt of this worker was handed to its executor; `mid_turn`: as a
    /// steer into a turn already seen running, whose end then counts.
    pub fn send_dispatched(&mut self, mid_turn: bool) {
        self.sending = if mid_turn { Sending::SawBusy } else { Sending::Dispatched };
    }

    /// That prompt's command finished: whether its turn already ran and
    /// ended before the result came (the page reports and the result travel
    /// separately, so either may come first).
    pub fn send_finished(&mut self) -> bool {
        std::mem::take(&mut self.sending) == Sending::SawEnd
    }

    /// The conversation was seen generating: an idle or recovery reason is moot.
    pub fn went_busy(&mut self, now_ms: u64) {
        if self.sending == Sending::Dispatched {
            self.sending = Sending::SawBusy;
        }
        if self.busy_since_ms.is_none() {
            self.busy_since_ms = Some(now_ms);
            self.turn_stall_reported = false;
        }
        self.idle_since_ms = None;
        self.recoveries_undelivered = 0;
        if let Some(intent) = &mut self.intent {
            intent.wakes.remove(&Wake::Idle);
            intent.wakes.remove(&Wake::Recovery);
            if intent.wakes.is_empty() {
                self.intent = None;
            }
        }
    }

    /// The pending turn became the next attempt, its command `command`
    /// queued; the reasons are delivered with it and returned.
    pub fn scheduled(&mut self, command: CommandId) -> Intent {
        self.attempts += 1;
        self.in_flight = Some(command);
        self.attempt_progressed = false;
        let intent = self.intent.take().unwrap_or_default();
        self.carried = intent.wakes.clone();
        intent
    }

    /// The in-flight command finished at `now`. Submitted: the turn is open
    /// until the conversation is idle again. Otherwise the attempt ended
    /// there, without progress. Undelivered, what it carried is asked for
    /// again: a fresh attempt under the same rules (the stall guard bounds
    /// how often), never a silent stop; a recovery too, but only
    /// [`RECOVERY_ATTEMPTS_MAX`] times in a row (an error page that takes
    /// no message is not spun against: the worker is then paused, saying
    /// why, see [`Continuity::recovery_exhausted`]). Uncertain, nothing is
    /// asked again: the prompt may be in, and a resend could duplicate it
    /// (the worker is paused for a look).
    ///
    /// `ended_early`: the submitted prompt's turn was already seen to run
    /// and end (see [`Continuity::send_finished`]); the end it left stands.
    pub fn command_finished(&mut self, finish: Finish, ended_early: bool, now_ms: u64) {
        self.in_flight = None;
        let carried = std::mem::take(&mut self.carried);
        if finish == Finish::Submitted {
            self.recoveries_undelivered = 0;
            self.last_submitted_at_ms = Some(now_ms);
            if ended_early {
                if !self.attempt_progressed {
                    self.progress.attempts_without = self.progress.attempts_without.saturating_add(1);
                }
                return;
            }
            self.idle_since_ms = None;
            self.turn_open = true;
            self.turn_stall_reported = false;
            return;
        }
        if !self.attempt_progressed {
            self.progress.attempts_without = self.progress.attempts_without.saturating_add(1);
        }
        if finish == Finish::Undelivered {
            if carried.contains(&Wake::Recovery) {
                self.recoveries_undelivered = self.recoveries_undelivered.saturating_add(1);
            }
            let again = self.recoveries_undelivered < RECOVERY_ATTEMPTS_MAX;
            for wake in carried.into_iter().filter(|w| *w != Wake::Recovery || again) {
                self.wake(wake);
            }
        }
    }

    /// Whether the in-flight command carries a recovery that, if it is not
    /// delivered, is the last one allowed in a row.
    pub fn recovery_exhausted(&self) -> bool {
        self.carried.contains(&Wake::Recovery) && self.recoveries_undelivered + 1 >= RECOVERY_ATTEMPTS_MAX
    }

    /// The worker finished (completed, failed, cancelled): nothing is pending.
    pub fn ended(&mut self) {
        self.intent = None;
        self.idle_since_ms = None;
        self.turn_open = false;
    }

    /// Durable progress at `now` (a progress report, a message, a
    /// disposition change) resets the no-progress counters.
    pub fn progressed(&mut self, now_ms: u64) {
        self.progress = Progress { attempts_without: 0, last_at_ms: now_ms };
        self.attempt_progressed = true;
        self.warned = false;
    }

    /// The stall guard's reading at `now`.
    pub fn stall(&self, now_ms: u64) -> Stall {
        let p = &self.policy;
        let attempts = self.progress.attempts_without;
        let quiet = now_ms.saturating_sub(self.progress.last_at_ms);
        let past = |count: u32, ms: u64| {
            threshold(count.into()).is_some_and(|c| u64::from(attempts) >= c)
                || threshold(ms).is_some_and(|m| quiet >= m)
        };
        if past(p.stall_pause_after_no_progress_attempts, p.stall_pause_after_no_progress_ms) {
            Stall::Pause
        } else if past(p.stall_warning_after_no_progress_attempts, p.stall_warning_after_no_progress_ms) {
            Stall::Warn
        } else {
            Stall::Clear
        }
    }

    /// When a time-based stall threshold is next crossed, if one is set and
    /// the guard watches this worker (Auto, unheld).
    fn stall_due_at(&self) -> Option<u64> {
        let p = &self.policy;
        if p.mode != ContinuationMode::Auto || self.hold.is_some() {
            return None;
        }
        let warn = threshold(p.stall_warning_after_no_progress_ms).filter(|_| !self.warned);
        [warn, threshold(p.stall_pause_after_no_progress_ms)]
            .into_iter()
            .flatten()
            .map(|ms| self.progress.last_at_ms + ms)
            .min()
    }

    /// When the active keepalive falls due for `worker`, if it runs at all:
    /// Auto mode, no hold, nothing in flight. Uniform within the policy's
    /// window after the last submission (or the last progress before any),
    /// by a jitter derived from the worker and its attempt count, so the
    /// deadline is the same after a restart and differs between workers.
    pub fn keepalive_due_at(&self, worker: &str) -> Option<u64> {
        let p = &self.policy;
        if p.mode != ContinuationMode::Auto || self.hold.is_some() || self.in_flight.is_some() {
            return None;
        }
        let from = self.last_submitted_at_ms.unwrap_or(self.progress.last_at_ms);
        let span = p.active_keepalive_max_ms.saturating_sub(p.active_keepalive_min_ms);
        let jitter = if span == 0 { 0 } else { fnv1a(worker.as_bytes(), self.attempts) % (span + 1) };
        Some(from.saturating_add(p.active_keepalive_min_ms).saturating_add(jitter))
    }

    /// Seed §10.2: what to do with the pending turn, given the run's and the
    /// worker's lifecycle state and whether another command (a create, a
    /// follow-up's send) is open for the worker. `None` when no turn is pending.
    pub fn evaluate(&self, run: RunState, worker: WorkerState, command_open: bool, now_ms: u64) -> Option<Verdict> {
        let intent = self.intent.as_ref()?;
        Some(if run.is_terminal() {
            Verdict::Cancel(Ended::Run)
        } else if worker.is_terminal() {
            Verdict::Cancel(Ended::Worker)
        } else if self.hold == Some(Hold::AwaitingHuman) {
            Verdict::Hold(Held::Human)
        } else if worker == WorkerState::Waiting {
            Verdict::Hold(Held::Answer)
        } else if self.hold == Some(Hold::AwaitingDependency) {
            Verdict::Hold(Held::Dependency)
        } else if self.hold == Some(Hold::Paused) {
            Verdict::Hold(Held::Paused)
        } else if self.policy.mode == ContinuationMode::Manual && !intent.explicit() {
            Verdict::Hold(Held::Manual)
        } else if self.hold == Some(Hold::Stalled) {
            Verdict::Hold(Held::Stalled)
        } else if self.in_flight.is_some() || command_open || worker != WorkerState::Running {
            // Launching: the create command is the one in flight.
            Verdict::Coalesce
        } else {
            match self.due_at(intent) {
                Some(at) if at > now_ms => Verdict::NotBefore(at),
                _ => Verdict::Submit,
            }
        })
    }

    /// The earliest time the pending turn may go: an idle reason waits out
    /// the grace; unless something bypasses it, the spacing floor holds.
    fn due_at(&self, intent: &Intent) -> Option<u64> {
        let ended = intent.wakes.iter().any(|w| matches!(w, Wake::Idle | Wake::Recovery));
        let grace = self.idle_since_ms.filter(|_| ended).map(|at| at + self.policy.idle_grace_ms);
        let floor = self
            .last_submitted_at_ms
            .filter(|_| !intent.bypasses_floor(&self.policy))
            .map(|at| at + self.policy.min_continuation_spacing_ms);
        grace.max(floor)
    }

    /// The worker's disposition as views show it (seed §7.3).
    pub fn disposition(&self, worker: WorkerState) -> WorkerDisposition {
        match worker {
            WorkerState::Completed => return WorkerDisposition::Completed,
            WorkerState::Failed | WorkerState::LaunchFailed => return WorkerDisposition::Failed,
            WorkerState::Cancelled => return WorkerDisposition::Cancelled,
            WorkerState::Waiting => return WorkerDisposition::AwaitingHuman,
            WorkerState::Created | WorkerState::LaunchRequested | WorkerState::Launching | WorkerState::Running => {}
        }
        match self.hold {
            Some(Hold::AwaitingHuman) => WorkerDisposition::AwaitingHuman,
            Some(Hold::AwaitingDependency) => WorkerDisposition::AwaitingDependency,
            Some(Hold::Paused | Hold::Stalled) => WorkerDisposition::Paused,
            None if self.idle_since_ms.is_some() && self.in_flight.is_none() => WorkerDisposition::AwaitingExecution,
            None => WorkerDisposition::Running,
        }
    }
}

/// FNV-1a over `bytes` and `salt`: a stable, well-spread jitter source.
fn fnv1a(bytes: &[u8], salt: u32) -> u64 {
    bytes
        .iter()
        .chain(&salt.to_le_bytes())
        .fold(0xcbf2_9ce4_8422_2325, |hash, byte| (hash ^ u64::from(*byte)).wrapping_mul(0x0100_0000_01b3))
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIN: u64 = 60_000;

    fn auto() -> Continuity {
        Continuity::new(ContinuationPolicy { mode: ContinuationMode::Auto, ..ContinuationPolicy::default() }, 0)
    }

    fn command(n: u8) -> CommandId {
        format!("cmd_{:032x}", n).parse().expect("a command id")
    }

    /// A worker that was continued once at `at` and whose turn then ended.
    fn after_one_turn(at: u64) -> Continuity {
        let mut c = auto();
        c.wake(Wake::Operator);
        c.scheduled(command(1));
        c.command_finished(Finish::Submitted, false, at);
        c
    }

    fn verdict(c: &Continuity, worker: WorkerState, now: u64) -> Option<Verdict> {
        c.evaluate(RunState::Active, worker, false, now)
    }

    #[test]
    fn idle_active_auto_schedules_one_resume_after_the_grace() {
        let mut c = auto();
        c.went_idle(1_000);
        assert_eq!(verdict(&c, WorkerState::Running, 2_000), Some(Verdict::NotBefore(4_000)));
        assert_eq!(verdict(&c, WorkerState::Running, 4_000), Some(Verdict::Submit));
        let delivered = c.scheduled(command(1));
        assert_eq!(delivered.wakes, BTreeSet::from([Wake::Idle]));
        assert_eq!(c.attempts, 1);
        assert_eq!(verdict(&c, WorkerState::Running, 5_000), None, "nothing left pending");
    }

    #[test]
    fn idle_in_manual_mode_holds_unless_root_or_the_operator_asks() {
        let mut c = Continuity::new(ContinuationPolicy::default(), 0);
        c.went_idle(0);
        assert_eq!(verdict(&c, WorkerState::Running, 10_000), Some(Verdict::Hold(Held::Manual)));
        c.wake(Wake::Operator);
        assert_eq!(verdict(&c, WorkerState::Running, 10_000), Some(Verdict::Submit));
    }

    #[test]
    fn a_finished_worker_or_run_withdraws_the_pending_turn() {
        let mut c = auto();
        c.went_idle(0);
        for ended in [WorkerState::Completed, WorkerState::Failed, WorkerState::Cancelled, WorkerState::LaunchFailed] {
            assert_eq!(verdict(&c, ended, 10_000), Some(Verdict::Cancel(Ended::Worker)), "{ended:?}");
        }
        for run in [RunState::Completed, RunState::Failed, RunState::Cancelled] {
            assert_eq!(
                c.evaluate(run, WorkerState::Running, false, 10_000),
                Some(Verdict::Cancel(Ended::Run)),
                "{run:?}"
            );
        }
        // Root completing leaves its children running.
        assert_eq!(c.evaluate(RunState::Completing, WorkerState::Running, false, 10_000), Some(Verdict::Submit));
    }

    #[test]
    fn completion_during_the_grace_cancels_and_completion_after_submission_leaves_nothing() {
        let mut c = auto();
        c.went_idle(0);
        assert_eq!(verdict(&c, WorkerState::Running, 1_000), Some(Verdict::NotBefore(3_000)));
        assert_eq!(verdict(&c, WorkerState::Completed, 3_000), Some(Verdict::Cancel(Ended::Worker)));

        let mut c = after_one_turn(0);
        c.went_idle(5_000);
        assert_eq!(verdict(&c, WorkerState::Completed, 9_000), Some(Verdict::Cancel(Ended::Worker)));
        c.ended();
        assert_eq!(verdict(&c, WorkerState::Completed, 9_000), None, "nothing pending once it ended");
    }

    #[test]
    fn holds_apply_in_the_seeds_order() {
        let mut c = auto();
        c.went_idle(0);
        c.wake(Wake::Operator);
        for (hold, held) in [
            (Hold::AwaitingHuman, Held::Human),
            (Hold::AwaitingDependency, Held::Dependency),
            (Hold::Paused, Held::Paused),
            (Hold::Stalled, Held::Stalled),
        ] {
            c.hold = Some(hold);
            assert_eq!(verdict(&c, WorkerState::Running, 10_000), Some(Verdict::Hold(held)));
        }
        c.hold = None;
        assert_eq!(verdict(&c, WorkerState::Waiting, 10_000), Some(Verdict::Hold(Held::Answer)));
        // The run's end comes before any hold.
        c.hold = Some(Hold::AwaitingHuman);
        assert_eq!(c.evaluate(RunState::Cancelled, WorkerState::Running, false, 0), Some(Verdict::Cancel(Ended::Run)));
        // Manual mode comes before the stall guard.
        c.policy.mode = ContinuationMode::Manual;
        c.hold = Some(Hold::Stalled);
        c.intent = Some(Intent { wakes: BTreeSet::from([Wake::Idle]) });
        assert_eq!(verdict(&c, WorkerState::Running, 10_000), Some(Verdict::Hold(Held::Manual)));
    }

    #[test]
    fn duplicate_idle_reports_make_one_resume() {
        let mut c = auto();
        c.went_idle(0);
        c.went_idle(500);
        c.went_idle(900);
        assert_eq!(c.idle_since_ms, Some(0), "the grace runs from the first");
        assert_eq!(c.intent.as_ref().map(|i| i.wakes.len()), Some(1));
        c.scheduled(command(1));
        c.went_idle(1_000);
        assert_eq!(verdict(&c, WorkerState::Running, 10_000), Some(Verdict::Coalesce), "one in flight at a time");
        c.in_flight = None;
        assert_eq!(
            c.evaluate(RunState::Active, WorkerState::Running, true, 10_000),
            Some(Verdict::Coalesce),
            "a follow-up's send is open"
        );
    }

    #[test]
    fn a_wake_inside_the_floor_is_kept_and_delivered_at_it_and_idle_steering_and_operator_bypass_it() {
        let c0 = after_one_turn(0);
        let mut c = c0.clone();
        c.wake(Wake::ActiveKeepalive);
        c.wake(Wake::Event { kind: "message.sent".into() });
        assert_eq!(verdict(&c, WorkerState::Running, 61_000), Some(Verdict::NotBefore(15 * MIN)));
        assert_eq!(verdict(&c, WorkerState::Running, 15 * MIN), Some(Verdict::Submit));
        assert_eq!(c.scheduled(command(2)).wakes.len(), 2, "both reasons ride with one delivery");

        let mut c = c0.clone();
        c.went_idle(MIN);
        assert_eq!(verdict(&c, WorkerState::Running, MIN + 3_000), Some(Verdict::Submit));
        c.policy.idle_may_bypass_min_spacing = false;
        assert_eq!(verdict(&c, WorkerState::Running, MIN + 3_000), Some(Verdict::NotBefore(15 * MIN)));

        for wake in [Wake::Steering, Wake::Operator] {
            let mut c = c0.clone();
            c.wake(wake);
            assert_eq!(verdict(&c, WorkerState::Running, MIN), Some(Verdict::Submit));
        }
    }

    #[test]
    fn going_busy_drops_the_idle_reason_but_keeps_the_others() {
        let mut c = after_one_turn(0);
        c.went_idle(MIN);
        c.went_busy(0);
        assert_eq!(c.intent, None);
        c.went_idle(2 * MIN);
        c.wake(Wake::ActiveKeepalive);
        c.went_busy(0);
        assert_eq!(c.intent.as_ref().map(|i| i.wakes.clone()), Some(BTreeSet::from([Wake::ActiveKeepalive])));
    }

    #[test]
    fn a_launching_worker_coalesces_with_its_create() {
        let mut c = auto();
        c.wake(Wake::Event { kind: "message.sent".into() });
        for state in [WorkerState::Created, WorkerState::LaunchRequested, WorkerState::Launching] {
            assert_eq!(verdict(&c, state, 0), Some(Verdict::Coalesce));
        }
    }

    #[test]
    fn progress_resets_the_no_progress_counters_and_the_thresholds_warn_then_pause() {
        let mut c = auto();
        let turn = |c: &mut Continuity, n: u8| {
            c.scheduled(command(n));
            c.command_finished(Finish::Submitted, false, 0);
            c.went_idle(0);
        };
        for n in 0..9 {
            turn(&mut c, n);
        }
        assert_eq!(c.stall(0), Stall::Clear);
        turn(&mut c, 9);
        assert_eq!(c.stall(0), Stall::Warn, "10 attempts without progress");
        for n in 10..20 {
            turn(&mut c, n);
        }
        assert_eq!(c.stall(0), Stall::Pause);
        c.progressed(5 * MIN);
        assert_eq!(c.progress, Progress { attempts_without: 0, last_at_ms: 5 * MIN });
        assert_eq!(c.stall(5 * MIN), Stall::Clear);
        assert_eq!(c.stall(35 * MIN), Stall::Warn, "30 minutes quiet");
        assert_eq!(c.stall(65 * MIN), Stall::Pause, "60 minutes quiet");
        c.policy.stall_pause_after_no_progress_ms = 0;
        c.policy.stall_warning_after_no_progress_ms = 0;
        assert_eq!(c.stall(1_000 * MIN), Stall::Clear, "no total cap");

        // An attempt that progressed counts nothing; one whose submission failed counts.
        c.scheduled(command(30));
        c.progressed(MIN);
        c.command_finished(Finish::Submitted, false, MIN);
        c.went_idle(MIN);
        assert_eq!(c.progress.attempts_without, 0);
        c.scheduled(command(31));
        c.command_finished(Finish::Undelivered, false, MIN);
        assert_eq!(c.progress.attempts_without, 1);
    }

    #[test]
    fn the_keepalive_falls_in_its_window_is_stable_and_differs_between_workers() {
        let c = after_one_turn(10 * MIN);
        let at = c.keepalive_due_at("wrk_a").expect("auto, unheld, idle");
        assert!((30 * MIN..=31 * MIN).contains(&at), "{at}");
        assert_eq!(c.clone().keepalive_due_at("wrk_a"), Some(at), "the same after a restart");
        let spread: BTreeSet<u64> = (0..50).filter_map(|n| c.keepalive_due_at(&format!("wrk_{n}"))).collect();
        assert!(spread.len() > 40, "workers are spread over the window: {}", spread.len());
        let mut held = c.clone();
        held.hold = Some(Hold::Paused);
        assert_eq!(held.keepalive_due_at("wrk_a"), None);
        let mut manual = c;
        manual.policy.mode = ContinuationMode::Manual;
        assert_eq!(manual.keepalive_due_at("wrk_a"), None);
    }

    #[test]
    fn the_disposition_names_holds_idleness_and_endings() {
        let mut c = auto();
        assert_eq!(c.disposition(WorkerState::Running), WorkerDisposition::Running);
        c.went_idle(0);
        assert_eq!(c.disposition(WorkerState::Running), WorkerDisposition::AwaitingExecution);
        assert_eq!(c.disposition(WorkerState::Waiting), WorkerDisposition::AwaitingHuman);
        c.hold = Some(Hold::AwaitingDependency);
        assert_eq!(c.disposition(WorkerState::Running), WorkerDisposition::AwaitingDependency);
        c.hold = Some(Hold::Stalled);
        assert_eq!(c.disposition(WorkerState::Running), WorkerDisposition::Paused);
        assert_eq!(c.disposition(WorkerState::Completed), WorkerDisposition::Completed);
        assert_eq!(c.disposition(WorkerState::LaunchFailed), WorkerDisposition::Failed);
    }
}
