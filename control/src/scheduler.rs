//! The shell that runs [`crate::schedule`]: one task that owns its timers.
//! It commits what is due now, sleeps until the next rule falls due (by the
//! plane's injected clock), and wakes early on every commit and every change
//! of the connected executors. The executor bridge only sends what the
//! queue holds; nothing here sends anything. Execution Continuity's rules
//! (resume, keepalive, stall guard) run in this task too.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use crate::ControlPlane;
use crate::schedule::Policy;

/// The pause before retrying a turn whose commit failed.
const RETRY: Duration = Duration::from_secs(1);

/// Runs until `stop` resolves or the connected set's sender is dropped.
/// `connected` holds the executors with a live session, kept current by the
/// bridge before it records each connect and disconnect.
pub async fn run(
    plane: Arc<ControlPlane>,
    mut connected: watch::Receiver<Vec<String>>,
    policy: Policy,
    stop: impl std::future::Future<Output = ()>,
) {
    let mut changes = plane.subscribe_changes();
    tokio::pin!(stop);
    loop {
        let executors = connected.borrow_and_update().clone();
        let turn_began = plane.now_ms();
        let failed = in_place(|| {
            // A full conversation rolls over before anything is resumed in it.
            plane
                .rollover(policy.rollover)
                .and(plane.recheck(&executors, policy))
                .and(plane.relaunch(&executors))
                .and(plane.continue_due(policy.pacing))
                .and(policy.tabs.map_or(Ok(0), |tabs| plane.tabs(tabs)))
        })
        .err();
        if let Some(e) = &failed {
            tracing::error!(code = %e.code(), "scheduled work not committed, retrying in {RETRY:?}: {e}");
        }
        // What was due when the turn began was handled (or failed: then it
        // is retried after a pause, not in a loop); what fell due during the
        // turn wakes us at once.
        let now = plane.now_ms();
        let timer = match failed {
            Some(_) => Some(tokio::time::Instant::now() + RETRY),
            None => [
                plane.next_recheck_at(&executors, policy),
                plane.next_relaunch_at(&executors),
                plane.next_continue_at(policy.pacing),
                policy.tabs.and_then(|tabs| plane.next_tabs_at(tabs)),
                plane.next_rollover_at(policy.rollover),
            ]
            .into_iter()
            .flatten()
            .filter(|at| *at > turn_began)
            .min()
            .map(|at| tokio::time::Instant::now() + Duration::from_millis(at.saturating_sub(now))),
        };
        tokio::select! {
            _ = async { tokio::time::sleep_until(timer.expect("guarded")).await }, if timer.is_some() => {}
            changed = changes.changed() => if changed.is_err() { return },
            changed = connected.changed() => if changed.is_err() { return },
            _ = &mut stop => return,
        }
    }
}

/// Runs short blocking control-plane work (a SQLite commit) on this task:
/// in place on a multi-threaded runtime, inline on a current-thread one
/// (tests on paused time), so no work hides in a thread pool that paused
/// time cannot see.
pub fn in_place<T>(work: impl FnOnce() -> T) -> T {
    match tokio::runtime::Handle::current().runtime_flavor() {
        tokio::runtime::RuntimeFlavor::MultiThread => tokio::task::block_in_place(work),
        _ => work(),
    }
}
