//! The operator's desk: the one reading of the pool every operator surface
//! shows (the daemon's dashboard, the extension's popup and overlay), in
//! Execution Continuity's terms (seed §17.1), and the one place a person's
//! control becomes plane requests (seed §15, §17.5), made as the run's
//! root so the rules that check root's MCP tools check a person's clicks.

use protocol::continuity::{ContinuationMode, Hold};
use protocol::operator::{ANSWER_MAX, Action, Run as RunView, Status, View, Worker as WorkerView};
use protocol::{ErrorCode, RunId, WorkerId, WorkerState};
use sha2::{Digest, Sha256};

use crate::decide::Request;
use crate::model::{Run, Worker};
use crate::plane::ControlPlane;

/// Most runs a view holds (newest first).
pub const RUNS_SHOWN: usize = 20;
/// Most bytes of a worker's `why` in a view (its whole question is in the
/// log): a view stays readable and small whatever a worker wrote.
pub const WHY_SHOWN: usize = 600;

/// `text` cut to at most `max` bytes at a character boundary, with "…".
fn clip(mut text: String, max: usize) -> String {
    if text.len() > max {
        let mut end = max - '…'.len_utf8();
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
        text.push('…');
    }
    text
}
/// The most bytes a view may take on the wire: a view over it sheds the
/// finished workers of its oldest runs, then its oldest runs, so it always
/// fits an executor frame with room to spare.
pub const VIEW_BYTES_MAX: usize = 192 * 1024;

/// A person's control, as a surface sends it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Control {
    /// What to do.
    pub action: Action,
    /// The worker (worker actions).
    pub worker_id: Option<WorkerId>,
    /// The run (run actions).
    pub run_id: Option<RunId>,
    /// The answer (`answer`).
    pub text: Option<String>,
    /// The answer's idempotency key: a resent answer is delivered once.
    pub key: Option<String>,
}

/// Why a control was refused: a stable code and words.
pub type Refused = (ErrorCode, String);

/// Execution Continuity's term for `w` and why, given what it waits for.
pub fn status(w: &Worker, waiting: Option<&protocol::Waiting>) -> (Status, String) {
    let why = |fallback: &str| waiting.map_or_else(|| fallback.to_owned(), |wait| wait.next_step.clone());
    // A hold's own words first: a person's question is what they must read.
    let said = |fallback: &str| w.continuity.hold_reason.clone().unwrap_or_else(|| why(fallback));
    match w.state {
        WorkerState::Completed => return (Status::Complete, w.outcome.clone().unwrap_or_default()),
        WorkerState::Failed | WorkerState::LaunchFailed => {
            return (Status::Failed, w.outcome.clone().unwrap_or_default());
        }
        WorkerState::Cancelled => return (Status::Stopped, w.outcome.clone().unwrap_or_default()),
        WorkerState::Created | WorkerState::LaunchRequested | WorkerState::Launching => {
            return (Status::Starting, why("its conversation is being opened"));
        }
        _ => {}
    }
    if waiting.is_some_and(|wait| wait.on == protocol::WaitingFor::Person)
        && w.continuity.hold != Some(Hold::AwaitingHuman)
    {
        return (Status::NeedsYou, why("a person must act in its conversation"));
    }
    match w.continuity.hold {
        Some(Hold::AwaitingHuman) => (Status::NeedsYou, said("it asked a person")),
        Some(Hold::AwaitingDependency) => (Status::Waiting, said("another worker or a deploy must change first")),
        // A person's pause shows as theirs even while the worker also waits on root.
        Some(Hold::Paused) => (Status::Paused, said("paused: its current turn may finish, no next one starts")),
        Some(Hold::Stalled) => {
            (Status::Stalled, said("no progress across its resumes: look at its conversation, then Resume"))
        }
        None if w.state == WorkerState::Waiting => (Status::Waiting, why("root's answer")),
        None if w.continuity.in_flight.is_some() => (Status::Resuming, "a continuation is being delivered".into()),
        None => (Status::Working, why(w.last_progress.as_deref().unwrap_or(""))),
    }
}

/// One worker as the surfaces show it.
pub fn worker_view(w: &Worker, run: &Run, waiting: Option<&protocol::Waiting>) -> WorkerView {
    let (status, why) = status(w, waiting);
    let why = clip(why, WHY_SHOWN);
    let since_ms = match (status, w.continuity.hold_since_ms) {
        // A wait of its own (a question, a pause, a stall): since it began.
        (Status::NeedsYou | Status::Paused | Status::Stalled | Status::Waiting, Some(since)) => since,
        // Its page needs a person (a tool-approval card): since the page said so,
        // however often the worker changes meanwhile.
        (Status::NeedsYou, None) if w.page_since_ms > 0 => w.page_since_ms,
        _ => w.updated_at_ms,
    };
    WorkerView {
        worker_id: w.id.to_string(),
        path: w.path.clone(),
        status,
        why,
        since_ms,
        attempt: w.continuity.attempts,
        auto_resumes: w.continuity.auto_resumes,
        auto_resume: w.continuity.policy.mode == ContinuationMode::Auto,
        held: w.continuity.hold.is_some(),
        answerable: w.continuity.hold == Some(Hold::AwaitingHuman) || w.state == WorkerState::Waiting,
        ask: w.continuity.hold_ask.clone().filter(|_| w.continuity.hold == Some(Hold::AwaitingHuman)),
        root: w.id == run.root,
        // Only a ChatGPT conversation's address becomes a link.
        conversation_url: w
            .conversation
            .as_ref()
            .map(|(_, url)| url.clone())
            .filter(|url| url.starts_with(protocol::executor::URL_PREFIX)),
        executor_id: w.executor_id.clone(),
        recent: w
            .continuity
            .recent
            .iter()
            .map(|(kind, at_ms)| protocol::operator::Recent { kind: kind.clone(), at_ms: *at_ms })
            .collect(),
        model: w.model.clone(),
        epoch: w.epoch,
        context_bytes: w.context_bytes,
        parked: w.parked,
    }
}

/// The newest `RUNS_SHOWN` runs and their workers, at most [`VIEW_BYTES_MAX`]
/// on the wire (an executor frame); `live` are the executors with a session
/// (what a worker waits for depends on them).
pub fn view(plane: &ControlPlane, live: &[String]) -> View {
    fit(view_all(plane, live), VIEW_BYTES_MAX)
}

/// The same, unbounded: for the dashboard, which is no frame.
pub fn view_all(plane: &ControlPlane, live: &[String]) -> View {
    let runs: Vec<RunView> = plane
        .newest_runs(RUNS_SHOWN)
        .into_iter()
        .map(|run| RunView {
            run_id: run.id.to_string(),
            title: run.title.clone(),
            state: run.state,
            workers: plane
                .workers_of(&run.id)
                .iter()
                .map(|w| worker_view(w, &run, plane.waiting_for(w, live).as_ref()))
                .collect(),
        })
        .collect();
    View { at_ms: plane.now_ms(), runs, omitted_runs: 0 }
}

/// Sheds what matters least until the view takes at most `max` bytes:
/// finished workers of the older runs first, then the questions' context,
/// then the older runs (counted in `omitted_runs`); the newest run stays.
fn fit(mut view: View, max: usize) -> View {
    let size = |v: &View| serde_json::to_vec(v).map_or(usize::MAX, |b| b.len());
    if size(&view) <= max {
        return view;
    }
    for run in view.runs.iter_mut().skip(1) {
        run.workers.retain(|w| !w.status.is_final());
    }
    if size(&view) > max {
        for ask in view.runs.iter_mut().flat_map(|r| &mut r.workers).filter_map(|w| w.ask.as_mut()) {
            ask.context = None;
        }
    }
    while size(&view) > max && view.runs.len() > 1 {
        view.runs.pop();
        view.omitted_runs += 1;
    }
    view
}

/// Applies a person's control as the run's root; returns how many workers
/// (or runs) it changed: 0 when they were already so (or an answer was
/// already delivered under its key).
pub fn apply(plane: &ControlPlane, control: &Control) -> Result<u32, Refused> {
    let refused = |e: crate::Error| (e.code(), e.to_string());
    let not_found = |what: &str| (ErrorCode::NotFound, format!("no such {what}"));
    let changed = |events: Vec<protocol::Event>| u32::from(!events.is_empty());
    control.check()?;
    if let (true, Some(run)) = (control.action.is_run_level(), &control.run_id) {
        let actor = plane.run(run).ok_or_else(|| not_found("run"))?.root;
        return run_control(plane, run, &actor, control.action).map_err(refused);
    }
    let target = control.worker_id.clone().ok_or((ErrorCode::InvalidArgument, "worker_id is required".into()))?;
    let w = plane.worker(&target).ok_or_else(|| not_found("worker"))?;
    let actor = plane.run(&w.run_id).ok_or_else(|| not_found("run"))?.root;
    let request = match control.action {
        Action::Answer => return answer(plane, control, &w, actor),
        Action::Pause => {
            Request::SetHold { actor, target, hold: Hold::Paused, reason: "paused by a person".into(), ask: None }
        }
        Action::Resume => Request::ReleaseHold { actor, target },
        Action::Continue => Request::ContinueNow { actor, target },
        Action::Stop => Request::Interrupt { actor, target, reason: "stopped by a person".into() },
        Action::Rollover => return plane.ask_rollover(&actor, &target).map(changed).map_err(refused),
        Action::AutoResumeOn | Action::AutoResumeOff => {
            let mut policy = w.continuity.policy;
            policy.mode =
                if control.action == Action::AutoResumeOn { ContinuationMode::Auto } else { ContinuationMode::Manual };
            Request::SetContinuation { actor, target: Some(target), policy }
        }
        Action::PauseAll | Action::ResumeAll | Action::StopRun => {
            return Err((ErrorCode::InvalidArgument, "a run action names run_id".into()));
        }
    };
    plane.execute(request).map(changed).map_err(refused)
}

/// A person's answer to `w`'s question (its own, or one to root): the
/// message from root and the release of its wait for a person, in one
/// commit that checks the question is still open, so its next turn carries
/// exactly one answer whichever surfaces answer at once. A replayed key
/// changes nothing; a worker that asks nothing (answered already) is
/// refused.
fn answer(plane: &ControlPlane, control: &Control, w: &Worker, actor: WorkerId) -> Result<u32, Refused> {
    // A quick refusal for a worker that asks nothing; the commit below
    // checks again, against the state it commits to.
    if w.continuity.hold != Some(Hold::AwaitingHuman) && w.state != WorkerState::Waiting {
        return Err((ErrorCode::InvalidTransition, "the worker asks nothing now (answered already?)".into()));
    }
    let text = control.text.as_deref().map(str::trim).unwrap_or_default();
    let root = plane.worker(&actor).ok_or((ErrorCode::NotFound, "no root".into()))?;
    // Any client key, hashed to a bounded one of its own namespace.
    let key = control.key.as_deref().map(|k| {
        let digest = Sha256::digest(k.as_bytes());
        format!("operator-answer:{}", digest[..16].iter().map(|b| format!("{b:02x}")).collect::<String>())
    });
    let refused = |e: crate::Error| (e.code(), e.to_string());
    // One commit: the question is checked, answered and released together.
    let sent = plane.answer(&root, &w.id, text, key.as_deref()).map_err(refused)?;
    Ok(u32::from(sent))
}

impl Control {
    /// The control's shape and bounds: a worker action names a worker, a
    /// run action a run; an answer has 1 to [`ANSWER_MAX`] bytes of text and
    /// nothing else does.
    pub fn check(&self) -> Result<(), Refused> {
        let invalid = |why: &str| Err((ErrorCode::InvalidArgument, why.to_owned()));
        let run_level = self.action.is_run_level();
        if run_level != self.run_id.is_some() || run_level == self.worker_id.is_some() {
            return invalid("a worker action names worker_id, a run action run_id");
        }
        match (&self.text, self.action) {
            (Some(text), Action::Answer) if text.len() > ANSWER_MAX => {
                Err((ErrorCode::TooLarge, format!("an answer is at most {ANSWER_MAX} bytes")))
            }
            (Some(text), Action::Answer) if !text.trim().is_empty() => Ok(()),
            (_, Action::Answer) => invalid("the answer is empty"),
            (Some(_), _) => invalid("text comes with an answer only"),
            (None, _) => Ok(()),
        }
    }
}

/// A run-level control (seed §17.5) as `actor`, the run's root: pause every
/// unfinished worker but root after its current turn, release every paused
/// or stalled one, or stop the run.
pub fn run_control(plane: &ControlPlane, run: &RunId, actor: &WorkerId, action: Action) -> Result<u32, crate::Error> {
    if action == Action::StopRun {
        let events =
            plane.execute(Request::CancelRun { actor: actor.clone(), reason: "stopped by a person".into() })?;
        return Ok(u32::from(!events.is_empty()));
    }
    let mut changed = 0;
    for w in plane.workers_of(run).into_iter().filter(|w| w.id != *actor && !w.state.is_terminal()) {
        let request = match action {
            Action::PauseAll if w.continuity.hold.is_none() => Request::SetHold {
                actor: actor.clone(),
                target: w.id,
                hold: Hold::Paused,
                reason: "paused with the whole run".into(),
                ask: None,
            },
            Action::ResumeAll if matches!(w.continuity.hold, Some(Hold::Paused | Hold::Stalled)) => {
                Request::ReleaseHold { actor: actor.clone(), target: w.id }
            }
            _ => continue,
        };
        // One worker's refusal (it ended meanwhile) does not stop the others.
        changed += plane.execute(request).map_or(0, |events| u32::from(!events.is_empty()));
    }
    Ok(changed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn worker(path: &str, status: Status) -> WorkerView {
        WorkerView {
            worker_id: format!("wrk_{path}"),
            path: path.into(),
            status,
            why: "x".repeat(1000),
            since_ms: 0,
            attempt: 0,
            auto_resumes: 0,
            auto_resume: false,
            held: false,
            answerable: false,
            ask: None,
            root: false,
            conversation_url: None,
            executor_id: None,
            recent: vec![],
            model: None,
            epoch: 0,
            context_bytes: 0,
            parked: false,
        }
    }

    #[test]
    fn a_view_over_its_bound_sheds_finished_workers_of_old_runs_first() {
        let run = |id: &str, workers| RunView {
            run_id: id.into(),
            title: id.into(),
            state: protocol::RunState::Active,
            workers,
        };
        let new = run("new", vec![worker("a", Status::Working), worker("b", Status::Complete)]);
        let old = run("old", vec![worker("c", Status::Working), worker("d", Status::Complete)]);
        let view = View { at_ms: 0, runs: vec![new.clone(), old], omitted_runs: 0 };
        let size = serde_json::to_vec(&view).unwrap().len();
        let fitted = fit(view.clone(), size - 500);
        assert_eq!(fitted.runs[0], new, "the newest run is whole");
        assert_eq!(fitted.runs[1].workers.len(), 1, "the old run's finished worker went");
        let newest_only = View { at_ms: 0, runs: vec![new.clone()], omitted_runs: 0 };
        let smaller = fit(view, serde_json::to_vec(&newest_only).unwrap().len() + 20);
        assert_eq!(
            (smaller.runs.as_slice(), smaller.omitted_runs),
            (&[new][..], 1),
            "then the older run goes, counted"
        );
        let never_empty = fit(newest_only, 10);
        assert_eq!(never_empty.runs.len(), 1, "the newest run stays whatever its size");
    }

    #[test]
    fn a_long_why_is_clipped_at_a_character_boundary() {
        let clipped = clip("é".repeat(400), WHY_SHOWN);
        assert!(clipped.len() <= WHY_SHOWN && clipped.ends_with('…'), "{}", clipped.len());
        assert_eq!(clip("short".into(), WHY_SHOWN), "short");
    }
}
