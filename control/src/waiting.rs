//! What a worker that is not working waits for, in words a person acts on.
//! Pure: the state, the operator's setup and the live executors in.

use protocol::{CommandIntent, ErrorCode, Waiting, WaitingFor, WorkerState};

use crate::model::{CommandPhase, State, Worker};
use crate::plane::ChatgptSetup;

/// Why `worker` is not working yet, if it is waiting on something outside
/// itself; `None` for a working or finished worker.
pub fn waiting_for(state: &State, setup: &ChatgptSetup, worker: &Worker, live: &[String]) -> Option<Waiting> {
    let waiting = |on, next_step: String| Some(Waiting { on, next_step });
    // ChatGPT's tool-approval card in its chat: a person must answer it
    // (the carriers never do); the worker goes on once they have.
    let approval = worker.conversation_state == Some(protocol::executor::ConversationState::Error)
        && worker.last_error == Some(ErrorCode::ToolApprovalRequired);
    if approval && !worker.state.is_terminal() {
        return waiting(
            WaitingFor::Person,
            "TOOL_APPROVAL_REQUIRED: ChatGPT asks whether to allow a tool call in this worker's chat: open its tab \
             and answer the card (\"Allow once\"); to stop it recurring, allow the app's actions in ChatGPT's \
             settings (docs/setup.md)"
                .into(),
        );
    }
    let draft = worker.conversation_state == Some(protocol::executor::ConversationState::Error)
        && worker.last_error == Some(ErrorCode::ComposerHasDraft);
    let wake_due = || {
        state
            .open_commands
            .iter()
            .filter_map(|id| state.commands.get(id))
            .any(|c| c.worker_id == worker.id && matches!(c.intent, CommandIntent::Send { .. }))
    };
    // Its tab showed another conversation (a person navigated it, or the
    // site moved it): fenced, nothing more goes to it, and a person says why.
    if worker.fenced && (!worker.state.is_terminal() || wake_due()) {
        return waiting(
            WaitingFor::Person,
            "CONVERSATION_IDENTITY_DRIFT: its tab showed another conversation than its own (a person navigated it \
             elsewhere, or ChatGPT moved it), so nothing more is sent to it: stop it (worker_stop) and spawn it \
             again (a pool slot shows RECONCILE_REQUIRED in runtime_status)"
                .into(),
        );
    }
    // A person's draft matters to a worker that works, or that has a wake
    // due (a finished worker's follow-up waits on it too).
    if draft && (!worker.state.is_terminal() || wake_due()) {
        return waiting(
            WaitingFor::Person,
            "COMPOSER_HAS_DRAFT: a person's draft is in this worker's composer (typed text, or an attachment: a \
             file, an image or a pasted block); nothing is typed beside it: send it or remove it in that tab, and \
             the worker's next message goes in once"
                .into(),
        );
    }
    // Its page could not be reached (the browser asleep, stopped, or not
    // authorized): its next message waits for the page to answer again.
    let unreachable = worker.last_error.filter(|e| {
        crate::schedule::waits_for_browser(*e)
            && worker.conversation_state == Some(protocol::executor::ConversationState::Error)
    });
    if let Some(code) = unreachable
        && (!worker.state.is_terminal() || wake_due())
    {
        return waiting(
            WaitingFor::Browser,
            format!(
                "{code}: its executor cannot reach this worker's page (the browser asleep, stopped or not \
                 authorized, or the tab frozen): wake or start the browser, or open the tab (docs/setup.md); while a \
                 message waits the daemon looks at the page again at its recheck interval, and the message goes in once"
            ),
        );
    }
    // Its executor is gone (the browser closed, asleep past its lease, or
    // its connection lost): its commands wait for it to come back.
    let gone = worker.conversation.is_some() && worker.executor_id.as_ref().is_some_and(|e| !live.contains(e));
    if gone && worker.state != WorkerState::Waiting && (!worker.state.is_terminal() || wake_due()) {
        return waiting(
            WaitingFor::Executor,
            "its executor is not connected (the browser closed or asleep, or its connection lost): start or wake the \
             browser; its commands wait and go once it is back"
                .into(),
        );
    }
    match worker.state {
        WorkerState::Waiting => {
            return waiting(WaitingFor::Answer, "it raised a question or blocker: answer with message_send".into());
        }
        WorkerState::Created | WorkerState::LaunchRequested | WorkerState::Launching => {}
        _ => return None,
    }
    if setup.app_label.is_none() {
        return waiting(
            WaitingFor::AppSetup,
            "the daemon has no --app-label, so the new conversation cannot be bound to the orchestrator's app and \
             never attaches: restart `orchestrator serve` with --app-label \"<the app's name in ChatGPT>\""
                .into(),
        );
    }
    match worker.last_error {
        Some(code @ (ErrorCode::HostAppBindingNotReady | ErrorCode::HostAppDisabled | ErrorCode::HostAppStale)) => {
            return waiting(
                WaitingFor::AppSetup,
                format!("{code}: fix the app in ChatGPT (docs/setup.md); `orchestrator doctor` says what is off"),
            );
        }
        Some(code) if crate::schedule::waits_for_browser(code) => {
            return waiting(
                WaitingFor::Browser,
                format!(
                    "{code}: its executor cannot reach the browser: start the browser, or allow remote debugging for \
                     the CDP agent (docs/cdp-carrier.md; `orchestrator status` shows what the agent found); the \
                     create is tried again by itself"
                ),
            );
        }
        Some(code) if code.is_host_state() => {
            return waiting(WaitingFor::Browser, format!("{code}: the browser needs you (docs/setup.md)"));
        }
        _ => {}
    }
    let create = state
        .open_commands
        .iter()
        .filter_map(|id| state.commands.get(id))
        .find(|c| c.worker_id == worker.id && c.intent == CommandIntent::Create);
    let executor_live = |c: &crate::model::QueuedCommand| c.executor_id.as_ref().is_none_or(|e| live.contains(e));
    match create {
        Some(c) if live.is_empty() || !executor_live(c) => waiting(
            WaitingFor::Executor,
            "no executor is connected: start the browser with the paired extension (`orchestrator pair` pairs one)"
                .into(),
        ),
        Some(c)
            if c.phase == CommandPhase::Queued
                && worker.model.is_some()
                && !live.iter().any(|e| state.model_executors.contains(e)) =>
        {
            waiting(
                WaitingFor::Executor,
                "it is pinned to a model, and no connected executor declared conversation_model (model pinning): \
                 connect the extension or CDP agent of this build"
                    .into(),
            )
        }
        Some(c)
            if c.phase == CommandPhase::Queued
                && worker.effort.is_some()
                && !live.iter().any(|e| state.effort_executors.contains(e)) =>
        {
            waiting(
                WaitingFor::Executor,
                "it is pinned to a thinking effort, and no connected executor declared conversation_effort: connect \
                 the extension or CDP agent of this build"
                    .into(),
            )
        }
        Some(c) if c.phase == CommandPhase::Queued && every_executor_full(state, live) => waiting(
            WaitingFor::LaunchSlot,
            "every connected executor holds as many conversations as its hello declared (load/capacity in \
             `orchestrator status`): connect another, raise `carrier-agent --capacity`, or let a worker finish"
                .into(),
        ),
        Some(c) if c.phase == CommandPhase::Queued => waiting(
            WaitingFor::LaunchSlot,
            "queued behind other launches (--max-launches, --max-active-workers), or for a tab to spare \
             (--max-open-tabs: an idle worker's tab is closed to make room)"
                .into(),
        ),
        _ => waiting(
            WaitingFor::Attach,
            "its conversation is being created or was given its bootstrap; it has not called worker_attach yet".into(),
        ),
    }
}

/// Whether each live executor declared a capacity and holds that many
/// unfinished workers already (the queue then places no create).
fn every_executor_full(state: &State, live: &[String]) -> bool {
    !live.is_empty()
        && live.iter().all(|executor| {
            let declared = state.executor_hosts.get(executor).and_then(|h| h.capacity);
            let load = state
                .workers
                .values()
                .filter(|w| crate::queue::managed(state, w) && w.executor_id.as_ref() == Some(executor))
                .count();
            declared.is_some_and(|capacity| load >= capacity as usize)
        })
}
