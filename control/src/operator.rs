//! The operator's desk: the one reading of the pool every operator surface
//! shows (the daemon's dashboard, the extension's popup and overlay), in
//! Execution Continuity's terms (seed §17.1), and the one place a person's
//! control becomes plane requests (seed §15, §17.5), made as the run's
//! root so the rules that check root's MCP tools check a person's clicks.

use protocol::continuity::{ContinuationMode, Hold};
use protocol::operator::{Action, Run as RunView, Status, View, Worker as WorkerView};
use protocol::{ErrorCode, MessageKind, RunId, WorkerId, WorkerState};

use crate::decide::Request;
use crate::model::{Run, Worker};
use crate::plane::ControlPlane;

/// Most runs a view holds (newest first).
pub const RUNS_SHOWN: usize = 20;
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
        _ if w.state == WorkerState::Waiting => (Status::Waiting, why("root's answer")),
        Some(Hold::Paused) => (Status::Paused, said("paused: its current turn may finish, no next one starts")),
        Some(Hold::Stalled) => {
            (Status::Stalled, said("no progress across its resumes: look at its conversation, then Resume"))
        }
        None if w.continuity.in_flight.is_some() => (Status::Resuming, "a continuation is being delivered".into()),
        None => (Status::Working, why(w.last_progress.as_deref().unwrap_or(""))),
    }
}

/// One worker as the surfaces show it.
pub fn worker_view(w: &Worker, run: &Run, waiting: Option<&protocol::Waiting>) -> WorkerView {
    let (status, why) = status(w, waiting);
    let since_ms = match status {
        Status::NeedsYou | Status::Paused | Status::Stalled | Status::Waiting => {
            w.continuity.hold_since_ms.unwrap_or(w.updated_at_ms)
        }
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
    }
}

/// The newest `RUNS_SHOWN` runs and their workers; `live` are the executors
/// with a session (what a worker waits for depends on them).
pub fn view(plane: &ControlPlane, live: &[String]) -> View {
    let mut runs: Vec<(u64, RunId)> =
        plane.with_state(|s| s.runs.values().map(|r| (r.created_at_ms, r.id.clone())).collect());
    runs.sort_by(|a, b| b.cmp(a));
    let runs: Vec<RunView> = runs
        .into_iter()
        .take(RUNS_SHOWN)
        .filter_map(|(_, id)| plane.run(&id))
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
    fit(View { at_ms: plane.now_ms(), runs }, VIEW_BYTES_MAX)
}

/// Sheds what matters least until the view takes at most `max` bytes:
/// finished workers of the oldest runs first, then the oldest runs.
fn fit(mut view: View, max: usize) -> View {
    let size = |v: &View| serde_json::to_vec(v).map_or(usize::MAX, |b| b.len());
    for i in (0..view.runs.len()).rev() {
        if size(&view) <= max {
            return view;
        }
        view.runs[i].workers.retain(|w| !w.status.is_final());
    }
    while size(&view) > max && !view.runs.is_empty() {
        view.runs.pop();
    }
    view
}

/// Applies a person's control as the run's root; returns how many workers
/// (or runs) it changed: 0 when they were already so.
pub fn apply(plane: &ControlPlane, control: &Control) -> Result<u32, Refused> {
    let refused = |e: crate::Error| (e.code(), e.to_string());
    let not_found = |what: &str| (ErrorCode::NotFound, format!("no such {what}"));
    let changed = |events: Vec<protocol::Event>| u32::from(!events.is_empty());
    if control.action.is_run_level() {
        let run = control.run_id.as_ref().ok_or((ErrorCode::InvalidArgument, "run_id is required".into()))?;
        let actor = plane.run(run).ok_or_else(|| not_found("run"))?.root;
        return run_control(plane, run, &actor, control.action).map_err(refused);
    }
    let target = control.worker_id.clone().ok_or((ErrorCode::InvalidArgument, "worker_id is required".into()))?;
    let w = plane.worker(&target).ok_or_else(|| not_found("worker"))?;
    let actor = plane.run(&w.run_id).ok_or_else(|| not_found("run"))?.root;
    let request = match control.action {
        Action::Answer => {
            // Durable first (a message from root), then the hold goes: the
            // worker's next turn carries the answer, once.
            let text = control.text.as_deref().map(str::trim).filter(|t| !t.is_empty());
            let text = text.ok_or((ErrorCode::InvalidArgument, "the answer is empty".into()))?;
            if text.len() > protocol::operator::ANSWER_MAX {
                return Err((
                    ErrorCode::TooLarge,
                    format!("an answer is at most {} bytes", protocol::operator::ANSWER_MAX),
                ));
            }
            let root = plane.worker(&actor).ok_or_else(|| not_found("root"))?;
            let key = control.key.as_deref().map(|k| format!("operator-answer:{k}"));
            plane.send(&root, &target, MessageKind::Answer, text, None, key.as_deref()).map_err(refused)?;
            if w.continuity.hold.is_none() {
                return Ok(1);
            }
            Request::ReleaseHold { actor, target }
        }
        Action::Pause => {
            Request::SetHold { actor, target, hold: Hold::Paused, reason: "paused by a person".into(), ask: None }
        }
        Action::Resume => Request::ReleaseHold { actor, target },
        Action::Continue => Request::ContinueNow { actor, target },
        Action::Stop => Request::Interrupt { actor, target, reason: "stopped by a person".into() },
        Action::AutoResumeOn | Action::AutoResumeOff => {
            let mut policy = w.continuity.policy;
            policy.mode =
                if control.action == Action::AutoResumeOn { ContinuationMode::Auto } else { ContinuationMode::Manual };
            Request::SetContinuation { actor, target: Some(target), policy }
        }
        Action::PauseAll | Action::ResumeAll | Action::StopRun => unreachable!("run actions return above"),
    };
    plane.execute(request).map(changed).map_err(refused)
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
        changed += u32::from(!plane.execute(request)?.is_empty());
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
        let view = View { at_ms: 0, runs: vec![new.clone(), old] };
        let size = serde_json::to_vec(&view).unwrap().len();
        let fitted = fit(view.clone(), size - 500);
        assert_eq!(fitted.runs[0], new, "the newest run is whole");
        assert_eq!(fitted.runs[1].workers.len(), 1, "the old run's finished worker went");
        let smaller = fit(view, 1500);
        assert_eq!(smaller.runs.len(), 1, "then the oldest run goes");
        assert!(serde_json::to_vec(&smaller).unwrap().len() <= 1500);
    }
}
