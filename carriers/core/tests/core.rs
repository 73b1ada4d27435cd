//! The executor's journal and registry across restarts: every command
//! resumes at its persisted phase, nothing is performed twice, and nothing
//! unmanaged is touched.

use executor_core::{Begin, Core, JOURNAL_KEEP, Phase, Plan};
use protocol::executor::{Command, CommandOp, CommandOutcome, ConversationState, ExecutorFrame};
use protocol::{CommandId, ConversationId, ErrorCode, WorkerId};

const CONV: &str = "0196b2c4-8e1f-7a3b-9c2d-4e5f60718293";
const OTHER: &str = "0196b2c4-8e1f-7a3b-9c2d-4e5f60718294";

fn worker(n: u8) -> WorkerId {
    WorkerId::from_uuid_bytes([n; 16])
}

fn command(n: u8, worker: &WorkerId, key: &str, op: CommandOp) -> Command {
    Command {
        command_id: CommandId::from_uuid_bytes([n; 16]),
        worker_id: worker.clone(),
        deadline_ms: 10_000,
        idempotency_key: key.into(),
        op,
    }
}

fn create(n: u8, w: &WorkerId) -> Command {
    command(
        n,
        w,
        &format!("create-{n}"),
        CommandOp::ConversationCreate {
            prompt: "boot".into(),
            project_url: None,
            app: None,
            model: None,
            effort: None,
            replaces: None,
        },
    )
}

fn send(n: u8, w: &WorkerId, conversation: &str) -> Command {
    let op = CommandOp::ConversationSend {
        conversation_id: conversation.parse().unwrap(),
        prompt: "wake".into(),
        app: None,
        model: None,
        effort: None,
    };
    command(n, w, &format!("send-{n}"), op)
}

/// What the executor plans for `command` at `now_ms`, as if no earlier
/// attempt were still running (each call stands for a fresh process).
fn plan_at(core: &mut Core<i32>, command: &Command, now_ms: u64) -> Plan<i32> {
    match core.begin(command, now_ms) {
        Begin::Perform(plan) => {
            core.abandon(&command.idempotency_key);
            plan
        }
        other => panic!("expected a plan, got {other:?}"),
    }
}

/// Persist and load, as the background does across a service-worker restart.
fn restart(core: &Core<i32>) -> Core<i32> {
    serde_json::from_str(&serde_json::to_string(core).unwrap()).unwrap()
}

/// A worker whose create opened tab 3 and submitted nothing yet.
fn opening_worker() -> (Core<i32>, WorkerId) {
    let mut core = Core::<i32>::default();
    let w = worker(1);
    assert!(matches!(plan_at(&mut core, &create(1, &w), 0), Plan::Create { .. }));
    core.advance("create-1", Phase::TabOpening);
    core.tab_opened(&w, 3);
    (core, w)
}

/// A worker with tab 7 bound to `CONV`, its create completed.
fn bound_worker() -> (Core<i32>, WorkerId) {
    let mut core = Core::<i32>::default();
    let w = worker(1);
    assert!(matches!(plan_at(&mut core, &create(1, &w), 0), Plan::Create { .. }));
    core.advance("create-1", Phase::TabOpening);
    core.tab_opened(&w, 7);
    core.advance("create-1", Phase::SubmissionStarted);
    let frames = core.page_report(&7, &format!("https://chatgpt.com/c/{CONV}"), ConversationState::Generating, None);
    assert!(
        matches!(&frames[0], ExecutorFrame::ConversationBound { conversation_id, .. } if conversation_id.as_str() == CONV)
    );
    core.advance("create-1", Phase::Submitted);
    core.finish("create-1", CommandOutcome::Ok { conversation_id: Some(CONV.parse().unwrap()) });
    (core, w)
}

#[test]
fn a_completed_command_is_answered_from_the_journal_after_a_restart() {
    let (core, w) = bound_worker();
    let mut core = restart(&core);
    // The daemon replays the create under a new command id: same outcome, nothing opened.
    let mut replay = create(1, &w);
    replay.command_id = CommandId::from_uuid_bytes([9; 16]);
    assert_eq!(
        plan_at(&mut core, &replay, 0),
        Plan::Reply(CommandOutcome::Ok { conversation_id: Some(CONV.parse().unwrap()) })
    );
    let Some(ExecutorFrame::Result { command_id, .. }) =
        core.finish("create-1", CommandOutcome::Ok { conversation_id: None })
    else {
        panic!()
    };
    assert_eq!(command_id, replay.command_id, "the result answers the replay's id");
}

#[test]
fn page_progress_is_paced_per_worker_and_only_for_a_bound_managed_tab() {
    let (mut core, w) = bound_worker();
    let every = protocol::executor::PROGRESS_EVERY_MS;
    let progress = [ExecutorFrame::ConversationProgress { worker_id: w.clone() }];
    assert_eq!(core.page_progress(&7, 1_000), progress);
    assert!(core.page_progress(&7, 1_000 + every - 1).is_empty(), "paced");
    assert_eq!(core.page_progress(&7, 1_000 + every), progress);
    assert!(core.page_progress(&99, 1_000).is_empty(), "a tab this executor does not manage means nothing");
}

#[test]
fn a_steer_is_planned_only_by_a_carrier_that_declared_the_seam() {
    let (mut core, w) = bound_worker();
    let op = CommandOp::ConversationSteer { conversation_id: CONV.parse().unwrap(), prompt: "checkpoint".into() };
    let steer = command(3, &w, "steer-3", op);
    let Plan::Reply(CommandOutcome::Error { code, .. }) = plan_at(&mut core, &steer, 0) else {
        panic!("a carrier without a steering seam answers a steer with an error, touching no page")
    };
    assert_eq!(code, ErrorCode::InvalidArgument);
    core.set_steering(true);
    assert_eq!(plan_at(&mut core, &steer, 0), Plan::Steer { tab: 7, prompt: "checkpoint".into() });
}

#[test]
fn a_restart_inside_submission_reconciles_with_the_page_instead_of_resending() {
    let (mut core, w) = bound_worker();
    assert_eq!(plan_at(&mut core, &send(2, &w, CONV), 0), Plan::Submit { tab: 7, prompt: "wake".into() });
    core.advance("send-2", Phase::SubmissionStarted);
    let mut core = restart(&core);
    assert_eq!(plan_at(&mut core, &send(2, &w, CONV), 0), Plan::Reconcile { tab: Some(7) });
    // The tab is gone too: still a reconcile (which then reports AMBIGUOUS_SUBMISSION), never a resend.
    core.tab_removed(&7);
    assert_eq!(plan_at(&mut core, &send(2, &w, CONV), 0), Plan::Reconcile { tab: None });
}

#[test]
fn a_restart_after_opening_the_tab_submits_there_without_opening_another() {
    let (core, w) = opening_worker();
    let mut core = restart(&core);
    assert_eq!(plan_at(&mut core, &create(1, &w), 0), Plan::Submit { tab: 3, prompt: "boot".into() });
    // A second create for the same worker under another key is a conflict, not a second tab.
    let other = command(
        5,
        &w,
        "create-other",
        CommandOp::ConversationCreate {
            prompt: "x".into(),
            project_url: None,
            app: None,
            model: None,
            effort: None,
            replaces: None,
        },
    );
    assert!(matches!(
        plan_at(&mut core, &other, 0),
        Plan::Reply(CommandOutcome::Error { code: ErrorCode::Conflict, .. })
    ));
}

#[test]
fn commands_naming_conversations_this_executor_did_not_create_are_refused() {
    let (mut core, w) = bound_worker();
    let refused =
        |plan: Plan<i32>| matches!(plan, Plan::Reply(CommandOutcome::Error { code: ErrorCode::UnmanagedTarget, .. }));
    assert!(refused(plan_at(&mut core, &send(2, &w, OTHER), 0)), "another conversation");
    assert!(refused(plan_at(&mut core, &send(3, &worker(2), CONV), 0)), "another worker");
    let close = command(
        4,
        &worker(3),
        "close-4",
        CommandOp::ConversationClose { conversation_id: CONV.parse().unwrap(), park: false },
    );
    assert!(refused(plan_at(&mut core, &close, 0)));
    let open = command(
        5,
        &worker(3),
        "open-5",
        CommandOp::ConversationOpen {
            conversation_id: OTHER.parse().unwrap(),
            url: format!("https://chatgpt.com/c/{OTHER}"),
        },
    );
    assert!(refused(plan_at(&mut core, &open, 0)));
    // Reports from a tab nobody manages mean nothing.
    assert!(core.page_report(&99, &format!("https://chatgpt.com/c/{OTHER}"), ConversationState::Idle, None).is_empty());
    assert_eq!(core.worker_of(&99), None);
}

/// Issue 44: Chromium gives a tab it discards a new id (measured on
/// Chromium 156): the managed tab keeps its worker under the new id, its
/// reports still count, and the old id means nothing any more.
#[test]
fn a_replaced_tab_keeps_its_worker_under_the_new_id() {
    let (mut core, w) = bound_worker();
    assert_eq!(core.tab_replaced(&99, 100), None, "a tab nobody manages");
    assert_eq!(core.tab_replaced(&7, 8), Some(w.clone()));
    assert_eq!(core.worker_of(&8), Some(&w));
    assert_eq!(core.worker_of(&7), None);
    assert!(core.tab_removed(&7).is_empty(), "the old id's removal means nothing");
    let url = format!("https://chatgpt.com/c/{CONV}");
    assert!(!core.page_report(&8, &url, ConversationState::Idle, None).is_empty(), "the new id reports");
    // Discarded, then reloaded: out of reach until its page reports again,
    // and that report (idle, as before) goes out as a change.
    let gone = core.page_unreachable(&8, "discarded");
    assert!(matches!(
        &gone[..],
        [
            ExecutorFrame::ConversationError { code: ErrorCode::BrowserControlUnavailable, .. },
            ExecutorFrame::ConversationState { state: ConversationState::Error, .. }
        ]
    ));
    assert!(!core.page_report(&8, &url, ConversationState::Idle, None).is_empty(), "back: said");
    assert!(core.page_unreachable(&99, "not ours").is_empty());
}

/// Issue 44: after a browser restart a stored tab id may name a person's
/// tab; only a tab showing the worker's own conversation is still its.
#[test]
fn a_tab_is_the_workers_only_while_it_shows_its_conversation() {
    let (core, _) = bound_worker();
    assert!(core.shows_own(&7, &format!("https://chatgpt.com/c/{CONV}")));
    let project = format!("https://chatgpt.com/g/g-p-{}-notes/c/{CONV}?model=y", "a".repeat(32));
    assert!(core.shows_own(&7, &project), "in its Project");
    assert!(!core.shows_own(&7, &format!("https://chatgpt.com/c/{OTHER}")), "a person's conversation");
    assert!(!core.shows_own(&7, "https://chatgpt.com/"), "a new chat");
    assert!(!core.shows_own(&7, "https://example.com/"));
    assert!(!core.shows_own(&99, &format!("https://chatgpt.com/c/{CONV}")), "a tab nobody manages");
    assert!(!core.submitting(&worker(1)), "its create's outcome is known");
}

#[test]
fn page_reports_bind_once_flag_drift_and_coalesce_states() {
    let (mut core, w) = bound_worker();
    let url = format!("https://chatgpt.com/c/{CONV}");
    assert!(core.page_report(&7, &url, ConversationState::Generating, None).is_empty(), "no change, nothing sent");
    let frames = core.page_report(&7, &url, ConversationState::Idle, None);
    assert_eq!(
        frames,
        vec![ExecutorFrame::ConversationState { worker_id: w.clone(), state: ConversationState::Idle, error: None }]
    );
    let frames = core.page_report(&7, &format!("https://chatgpt.com/c/{OTHER}"), ConversationState::Idle, None);
    assert!(matches!(
        &frames[..],
        [ExecutorFrame::ConversationError { code: ErrorCode::ConversationIdentityDrift, .. }]
    ));
    assert_eq!(
        core.managed(&w).unwrap().conversation.as_ref().map(ConversationId::as_str),
        Some(CONV),
        "never rebinds"
    );
    // The tab closes: the conversation is reported closed; a reopen opens the exact URL.
    assert_eq!(core.tab_removed(&7), vec![ExecutorFrame::ConversationClosed { worker_id: w.clone() }]);
    let open = command(
        6,
        &w,
        "open-6",
        CommandOp::ConversationOpen { conversation_id: CONV.parse().unwrap(), url: url.clone() },
    );
    assert_eq!(plan_at(&mut core, &open, 0), Plan::Open { url });
    assert!(matches!(
        plan_at(&mut core, &send(7, &w, CONV), 0),
        Plan::Reply(CommandOutcome::Error { code: ErrorCode::NotFound, .. })
    ));
}

#[test]
fn late_commands_and_bad_project_urls_are_refused_before_any_effect() {
    let mut core = Core::<i32>::default();
    let w = worker(1);
    assert!(matches!(
        plan_at(&mut core, &create(1, &w), 20_000),
        Plan::Reply(CommandOutcome::Error { code: ErrorCode::DeadlineExceeded, .. })
    ));
    let op = CommandOp::ConversationCreate {
        prompt: "p".into(),
        project_url: Some("https://evil.example/g/x".into()),
        app: None,
        model: None,
        effort: None,
        replaces: None,
    };
    assert!(matches!(
        plan_at(&mut core, &command(2, &worker(2), "k2", op), 0),
        Plan::Reply(CommandOutcome::Error { code: ErrorCode::InvalidArgument, .. })
    ));
    let project = format!("https://chatgpt.com/g/g-p-{}/project", "a".repeat(32));
    let op = CommandOp::ConversationCreate {
        prompt: "p".into(),
        project_url: Some(project.clone()),
        app: None,
        model: None,
        effort: None,
        replaces: None,
    };
    assert_eq!(
        plan_at(&mut core, &command(3, &worker(3), "k3", op), 0),
        Plan::Create { url: project, prompt: "p".into() }
    );
    // An app label that cannot name an app is refused before anything opens or types.
    for label in ["", " padded", "line\nbreak"] {
        let op = CommandOp::ConversationCreate {
            prompt: "p".into(),
            project_url: None,
            app: Some(label.into()),
            model: None,
            effort: None,
            replaces: None,
        };
        assert!(matches!(
            plan_at(&mut core, &command(4, &worker(4), &format!("k4{label}"), op), 0),
            Plan::Reply(CommandOutcome::Error { code: ErrorCode::InvalidArgument, .. })
        ));
        let op = CommandOp::ConversationSend {
            conversation_id: CONV.parse().unwrap(),
            prompt: "wake".into(),
            app: Some(label.into()),
            model: None,
            effort: None,
        };
        assert!(matches!(
            plan_at(&mut core, &command(5, &worker(5), &format!("k5{label}"), op), 0),
            Plan::Reply(CommandOutcome::Error { code: ErrorCode::InvalidArgument, .. })
        ));
    }
}

#[test]
fn the_journal_stays_bounded() {
    let mut core = Core::<i32>::default();
    for n in 0..(JOURNAL_KEEP + 40) {
        let key = format!("k{n}");
        let w = WorkerId::from_uuid_bytes([(n % 200) as u8 + 1; 16]);
        let c = command(1, &w, &key, CommandOp::ConversationInspect { conversation_id: CONV.parse().unwrap() });
        plan_at(&mut core, &c, 0);
        core.finish(&key, CommandOutcome::Ok { conversation_id: None });
    }
    assert!(core.entry("k0").is_none(), "the oldest completed entries are forgotten");
    assert!(core.entry(&format!("k{}", JOURNAL_KEEP + 39)).is_some());
}

#[test]
fn a_key_reused_by_another_worker_is_refused_without_touching_the_journal() {
    let (mut core, w) = bound_worker();
    let mut other = create(1, &worker(9));
    other.command_id = CommandId::from_uuid_bytes([8; 16]);
    let refused = |begin: Begin<i32>| {
        matches!(
            begin,
            Begin::Refused(ExecutorFrame::Result {
                outcome: CommandOutcome::Error { code: ErrorCode::Conflict, .. },
                ..
            })
        )
    };
    assert!(refused(core.begin(&other, 0)));
    // Also while the owner's command is being performed (a replay would join it).
    assert_eq!(core.begin(&send(2, &w, CONV), 0), Begin::Perform(Plan::Submit { tab: 7, prompt: "wake".into() }));
    let mut thief = send(3, &worker(9), CONV);
    thief.idempotency_key = "send-2".into();
    assert!(refused(core.begin(&thief, 0)));
    let entry = core.entry("create-1").unwrap();
    assert_eq!((&entry.worker_id, entry.phase), (&w, Phase::Completed), "the owner's entry is intact");
    assert_eq!(entry.command_id, CommandId::from_uuid_bytes([1; 16]));
}

#[test]
fn a_refused_create_releases_its_tab_so_a_retry_under_a_new_key_starts_clean() {
    let (mut core, w) = opening_worker();
    let refused = CommandOutcome::Error { code: ErrorCode::HostAppDisabled, detail: String::new() };
    core.finish("create-1", refused);
    assert_eq!(core.release_unbound(&w), Some(3));
    assert_eq!(core.worker_of(&3), None, "the tab is no longer managed");
    // Nothing reached the page: the key stays received, so a replay of it
    // acts again (the protocol's rule), as does a retry under a new key.
    assert_eq!(core.entry("create-1").map(|e| (e.phase, e.outcome.clone())), Some((Phase::Received, None)));
    assert!(matches!(plan_at(&mut core, &create(1, &w), 0), Plan::Create { .. }));
    let retry = command(
        2,
        &w,
        "create-1:retry-1",
        CommandOp::ConversationCreate {
            prompt: "boot".into(),
            project_url: None,
            app: Some("Orchestrator".into()),
            model: None,
            effort: None,
            replaces: None,
        },
    );
    assert!(matches!(plan_at(&mut core, &retry, 0), Plan::Create { .. }));
    // A worker whose page already showed its conversation keeps it.
    core.tab_opened(&w, 4);
    core.page_report(&4, &format!("https://chatgpt.com/c/{CONV}"), ConversationState::Idle, None);
    assert_eq!(core.release_unbound(&w), None);
}

#[test]
fn a_replay_while_the_command_runs_joins_it_and_the_result_answers_the_newest_id() {
    let (mut core, w) = bound_worker();
    assert_eq!(core.begin(&send(2, &w, CONV), 0), Begin::Perform(Plan::Submit { tab: 7, prompt: "wake".into() }));
    let mut replay = send(2, &w, CONV);
    replay.command_id = CommandId::from_uuid_bytes([42; 16]);
    assert_eq!(core.begin(&replay, 0), Begin::Joined, "one effect: the replay does not plan again");
    core.advance("send-2", Phase::Submitted);
    let Some(ExecutorFrame::Result { command_id, .. }) = core.finish("send-2", core.ok(&w)) else { panic!() };
    assert_eq!(command_id, replay.command_id);
    // Settled: a later replay is answered from the journal.
    assert!(matches!(core.begin(&replay, 0), Begin::Perform(Plan::Reply(CommandOutcome::Ok { .. }))));
}

#[test]
fn an_abandoned_attempt_is_resumed_at_its_phase_by_the_replay() {
    let (mut core, w) = bound_worker();
    assert!(matches!(core.begin(&send(2, &w, CONV), 0), Begin::Perform(Plan::Submit { .. })));
    core.advance("send-2", Phase::SubmissionStarted);
    core.abandon("send-2");
    assert_eq!(core.begin(&send(2, &w, CONV), 0), Begin::Perform(Plan::Reconcile { tab: Some(7) }));
}

#[test]
fn an_error_before_the_page_leaves_the_key_received_and_one_after_is_kept() {
    let (mut core, w) = bound_worker();
    let late = CommandOutcome::Error { code: ErrorCode::DeadlineExceeded, detail: "busy".into() };
    assert!(matches!(core.begin(&send(2, &w, CONV), 0), Begin::Perform(Plan::Submit { .. })));
    core.finish("send-2", late);
    assert_eq!(core.entry("send-2").map(|e| e.phase), Some(Phase::Received));
    assert!(matches!(core.begin(&send(2, &w, CONV), 0), Begin::Perform(Plan::Submit { .. })), "a replay acts");
    core.advance("send-2", Phase::SubmissionStarted);
    let ambiguous = CommandOutcome::Error { code: ErrorCode::AmbiguousSubmission, detail: "gone".into() };
    core.finish("send-2", ambiguous.clone());
    assert_eq!(core.begin(&send(2, &w, CONV), 0), Begin::Perform(Plan::Reply(ambiguous)), "never typed twice");
}

#[test]
fn an_inspection_and_a_resync_re_send_the_state_even_when_unchanged() {
    let (mut core, w) = bound_worker();
    let url = format!("https://chatgpt.com/c/{CONV}");
    let state = |s| ExecutorFrame::ConversationState { worker_id: w.clone(), state: s, error: None };
    assert_eq!(
        core.inspected(&7, &url, ConversationState::Generating, None),
        vec![state(ConversationState::Generating)]
    );
    let bound = ExecutorFrame::ConversationBound {
        worker_id: w.clone(),
        conversation_id: CONV.parse().unwrap(),
        url: url.clone(),
    };
    assert_eq!(core.resync(), vec![bound, state(ConversationState::Generating)]);
}

#[test]
fn the_handshake_frames_follow_the_protocol() {
    assert_eq!(executor_core::tab_marker("send:w/1 x"), "#orchestrator-send-w-1-x");
    assert_eq!(executor_core::heartbeat_every(60_000), executor_core::HEARTBEAT_MAX);
    assert_eq!(executor_core::heartbeat_every(5), executor_core::HEARTBEAT_MIN);
    assert_eq!(executor_core::heartbeat_every(5_000).as_millis(), 5_000);
}

#[test]
fn a_conversation_the_daemon_closed_is_reported_once_and_forgotten() {
    let (mut core, w) = bound_worker();
    let close =
        command(8, &w, "close-8", CommandOp::ConversationClose { conversation_id: CONV.parse().unwrap(), park: false });
    assert_eq!(plan_at(&mut core, &close, 0), Plan::Close { tab: Some(7) });
    assert_eq!(core.closed_by_daemon(&w), vec![ExecutorFrame::ConversationClosed { worker_id: w.clone() }]);
    assert!(core.managed(&w).is_none());
    assert!(core.resync().is_empty(), "a resync does not bring it back");
    assert!(core.tab_removed(&7).is_empty(), "the browser's own removal event means nothing now");

    // The tab was already gone (lost, or the person closed it): still forgotten.
    let (mut core, w) = bound_worker();
    core.tab_removed(&7);
    assert_eq!(plan_at(&mut core, &close, 0), Plan::Close { tab: None });
    core.closed_by_daemon(&w);
    assert!(core.resync().is_empty());
}

#[test]
fn a_create_resumed_after_its_deadline_gives_its_tab_up_and_a_retry_starts_clean() {
    let (core, w) = opening_worker();
    let mut core = restart(&core);
    let late = plan_at(&mut core, &create(1, &w), 20_000);
    assert!(matches!(late, Plan::Reply(CommandOutcome::Error { code: ErrorCode::DeadlineExceeded, .. })));
    core.finish("create-1", CommandOutcome::Error { code: ErrorCode::DeadlineExceeded, detail: String::new() });
    assert_eq!(core.worker_of(&3), None, "the tab is no longer the worker's");
    let retry = command(
        2,
        &w,
        "create-1:retry-1",
        CommandOp::ConversationCreate {
            prompt: "boot".into(),
            project_url: None,
            app: None,
            model: None,
            effort: None,
            replaces: None,
        },
    );
    assert!(matches!(plan_at(&mut core, &retry, 0), Plan::Create { .. }), "not a CONFLICT");
}

/// A park closes the tab and keeps the binding, across a restart: its
/// closing reports nothing, a send waits for the reopen, the reopen opens
/// the exact conversation, and a park of a tab already gone is done.
#[test]
fn a_parked_tab_keeps_its_binding_and_is_reopened_on_its_exact_conversation() {
    let (mut core, w) = bound_worker();
    let park =
        command(2, &w, "park-2", CommandOp::ConversationClose { conversation_id: CONV.parse().unwrap(), park: true });
    assert_eq!(plan_at(&mut core, &park, 0), Plan::Park { tab: 7 });
    assert_eq!(core.parked(&w), Some(7));
    // A restart between the journal and the close: the replay closes that tab.
    let mut core = restart(&core);
    assert_eq!(plan_at(&mut core, &park, 0), Plan::FinishPark { tab: 7 });
    core.park_closed(&w);
    let mut core = restart(&core);
    assert!(core.tab_removed(&7).is_empty(), "the parked tab's closing reports nothing");
    assert_eq!(core.worker_of(&7), None);
    assert!(
        matches!(plan_at(&mut core, &send(3, &w, CONV), 0), Plan::Reply(CommandOutcome::Error { .. })),
        "no tab: the daemon reopens it first"
    );
    let again =
        command(4, &w, "park-4", CommandOp::ConversationClose { conversation_id: CONV.parse().unwrap(), park: true });
    assert!(matches!(plan_at(&mut core, &again, 0), Plan::Reply(CommandOutcome::Ok { .. })), "already parked");
    let url = format!("https://chatgpt.com/c/{CONV}");
    let open = command(
        5,
        &w,
        "open-5",
        CommandOp::ConversationOpen { conversation_id: CONV.parse().unwrap(), url: url.clone() },
    );
    assert_eq!(plan_at(&mut core, &open, 0), Plan::Open { url });
    core.tab_opened(&w, 8);
    assert!(matches!(plan_at(&mut core, &send(6, &w, CONV), 0), Plan::Submit { tab: 8, .. }));
}

/// A rollover's create: the worker's old conversation (`replaces`) stops
/// being managed (its tab left open, never closed or reported again), the
/// fresh one is created as a first create, and a restart at any phase
/// resumes that create, never a second one.
#[test]
fn a_rollover_create_retires_the_old_conversation_and_resumes_across_restarts() {
    let (mut core, w) = bound_worker();
    let rollover = command(
        9,
        &w,
        "rollover-1",
        CommandOp::ConversationCreate {
            prompt: "boot 1".into(),
            project_url: None,
            app: None,
            model: None,
            effort: None,
            replaces: Some(CONV.parse().unwrap()),
        },
    );
    // A create without `replaces` still finds the worker managed.
    assert!(matches!(
        plan_at(&mut core.clone(), &create(2, &w), 0),
        Plan::Reply(CommandOutcome::Error { code: ErrorCode::Conflict, .. })
    ));
    assert_eq!(
        plan_at(&mut core, &rollover, 0),
        Plan::Create { url: "https://chatgpt.com/".into(), prompt: "boot 1".into() }
    );
    assert!(core.managed(&w).is_none(), "the old conversation is no longer managed");
    // Its tab's reports say nothing now.
    assert!(core.tab_removed(&7).is_empty());
    // Restarted before the new tab opened: the same plan.
    let mut again = restart(&core);
    assert!(matches!(plan_at(&mut again, &rollover, 0), Plan::Create { .. }));
    // Restarted after it opened: submit there, never a second tab.
    core.advance("rollover-1", Phase::TabOpening);
    core.tab_opened(&w, 8);
    let mut again = restart(&core);
    assert_eq!(plan_at(&mut again, &rollover, 0), Plan::Submit { tab: 8, prompt: "boot 1".into() });
    // A replaces naming another conversation retires nothing.
    let (mut core, w) = bound_worker();
    let stray = command(
        10,
        &w,
        "rollover-x",
        CommandOp::ConversationCreate {
            prompt: "b".into(),
            project_url: None,
            app: None,
            model: None,
            effort: None,
            replaces: Some(OTHER.parse().unwrap()),
        },
    );
    assert!(matches!(
        plan_at(&mut core, &stray, 0),
        Plan::Reply(CommandOutcome::Error { code: ErrorCode::Conflict, .. })
    ));
    assert!(core.managed(&w).is_some());
}

/// Issue 44: after a browser start no tab id from before is trusted. A
/// bound worker keeps its conversation, reported closed, and is opened
/// again at its exact URL (never in the tab its old id may now name); a
/// create that had only opened its tab starts afresh; one that may have
/// handed its prompt over is ambiguous.
#[test]
fn after_a_browser_start_no_tab_id_from_before_is_trusted() {
    let (core, w) = bound_worker();
    let mut core = restart(&core);
    assert_eq!(core.browser_started(), vec![ExecutorFrame::ConversationClosed { worker_id: w.clone() }]);
    assert_eq!(core.managed(&w).unwrap().tab, None);
    assert_eq!(core.managed(&w).unwrap().conversation.as_ref().map(ConversationId::as_str), Some(CONV));
    assert!(core.page_report(&7, &format!("https://chatgpt.com/c/{CONV}"), ConversationState::Idle, None).is_empty());
    assert!(matches!(
        plan_at(&mut core, &send(2, &w, CONV), 0),
        Plan::Reply(CommandOutcome::Error { code: ErrorCode::NotFound, .. })
    ));
    let url = format!("https://chatgpt.com/c/{CONV}");
    let open = command(
        3,
        &w,
        "open-3",
        CommandOp::ConversationOpen { conversation_id: CONV.parse().unwrap(), url: url.clone() },
    );
    assert_eq!(plan_at(&mut core, &open, 0), Plan::Open { url });

    let (core, w) = opening_worker();
    let mut core = restart(&core);
    assert!(core.browser_started().is_empty(), "a create's tab was never reported bound");
    assert!(core.managed(&w).is_none());
    assert!(matches!(plan_at(&mut core, &create(1, &w), 0), Plan::Create { .. }), "opened only: starts afresh");

    let (mut core, w) = opening_worker();
    core.advance("create-1", Phase::SubmissionStarted);
    let mut core = restart(&core);
    core.browser_started();
    assert_eq!(plan_at(&mut core, &create(1, &w), 0), Plan::Reconcile { tab: None }, "may have been sent");
}
