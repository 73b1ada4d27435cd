//! The executor bridge end to end: the real daemon binary, fake executors
//! over real WebSockets, faults, `kill -9` restarts, refusals and routing.
//! Exactly-once is asserted against the fakes' own effect counters.

mod support;

use std::time::Duration;

use fake_executor::{FakeConfig, FakeExecutor, Fault, Op, Stats};
use protocol::executor::PROTOCOL_VERSION;
use serde_json::{Value, json};
use support::{Daemon, Mcp, credential, hello, refused, ws_url};

const WAIT: Duration = Duration::from_secs(20);

/// A run with root's capability.
struct Root {
    mcp: Mcp,
    cap: String,
    bootstrap_prompts: std::sync::Mutex<std::collections::HashMap<String, String>>,
}

impl Root {
    fn new(daemon: &Daemon) -> Root {
        let mcp = Mcp::connect(&daemon.addr);
        let cap = mcp.ok("run_create", json!({"title": "bridge"}))["root_capability"].as_str().unwrap().to_owned();
        Root { mcp, cap, bootstrap_prompts: Default::default() }
    }

    fn reconnect(&mut self, daemon: &Daemon) {
        self.mcp = Mcp::connect(&daemon.addr);
    }

    fn spawn(&self, name: &str) -> String {
        let out = self
            .mcp
            .ok("worker_spawn", json!({"capability": self.cap, "name": name, "assignment": {"objective": name}}));
        let id = out["worker"]["worker_id"].as_str().unwrap().to_owned();
        self.bootstrap_prompts.lock().unwrap().insert(id.clone(), out["bootstrap_prompt"].as_str().unwrap().to_owned());
        id
    }

    /// Root gives `worker` follow-up `n` ("step n").
    fn followup(&self, worker: &str, n: u32) -> Value {
        let args = json!({"capability": self.cap, "worker_id": worker, "instructions": format!("step {n}")});
        self.mcp.ok("worker_followup", args)
    }

    fn events(&self) -> Vec<Value> {
        self.mcp.ok("events_list", json!({"capability": self.cap, "limit": 500}))["events"].as_array().unwrap().clone()
    }

    /// The ids of the commands queued for `worker`, in order.
    fn commands(&self, worker: &str) -> Vec<String> {
        self.events()
            .iter()
            .filter(|e| e["type"] == "executor.command_queued" && e["data"]["worker_id"] == worker)
            .map(|e| e["data"]["command_id"].as_str().unwrap().to_owned())
            .collect()
    }

    /// Attaches the worker's conversation as the worker would (with the
    /// attach identity from its bootstrap prompt).
    fn attach(&self, worker: &str) {
        let replay = self.mcp.ok("worker_list", json!({"capability": self.cap}));
        assert!(replay["workers"].as_array().unwrap().iter().any(|w| w["worker_id"] == worker));
        let prompt = self.bootstrap_prompts.lock().unwrap()[worker].clone();
        let attach = prompt.split('"').find(|p| p.starts_with("att_")).unwrap().to_owned();
        self.mcp.ok("worker_attach", json!({"attach_identity": attach}));
    }

    /// Spawns a worker, waits for its conversation, and attaches it.
    async fn attached_worker(&self, name: &str) -> String {
        let w = self.spawn(name);
        self.wait_event("conversation.bound", &w).await;
        self.attach(&w);
        w
    }

    fn has_event(&self, kind: &str, worker: &str) -> bool {
        self.events().iter().any(|e| e["type"] == kind && e["data"]["worker_id"] == worker)
    }

    /// Polls the log (bounded) until `kind` appears for `worker`.
    async fn wait_event(&self, kind: &str, worker: &str) {
        let deadline = tokio::time::Instant::now() + WAIT;
        while !self.has_event(kind, worker) {
            assert!(tokio::time::Instant::now() < deadline, "no {kind} for {worker}: {:#?}", self.events());
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }
}

fn worker_id(id: &str) -> protocol::WorkerId {
    id.parse().unwrap()
}

fn frames(stats: &Stats, command: &str) -> usize {
    stats.frames_by_command.get(&command.parse().unwrap()).copied().unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_disconnect_after_the_create_ack_still_yields_one_conversation_and_one_bootstrap() {
    let state = tempfile::tempdir().unwrap();
    let daemon = Daemon::start(state.path());
    let fake = FakeExecutor::start(
        FakeConfig::new(ws_url(&daemon), credential(state.path(), "ext-1"), "ext-1")
            .fault(Fault::DisconnectAfterAck(Op::Create)),
    );
    let root = Root::new(&daemon);
    let a = root.spawn("alpha");
    root.wait_event("conversation.bound", &a).await;
    let stats = fake.wait_for(|s| s.conversations.len() == 1 && s.connections >= 2, WAIT).await;
    let prompts = stats.submissions_for(&worker_id(&a));
    assert_eq!(prompts.len(), 1, "{stats:#?}");
    assert!(prompts[0].starts_with("[orchestrator bootstrap v3]"));
    let create = &root.commands(&a)[0];
    assert_eq!(frames(&stats, create), 2, "sent once, replayed once after the reconnect");
    fake.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn result_faults_never_duplicate_an_effect() {
    let state = tempfile::tempdir().unwrap();
    let daemon = Daemon::start_with(state.path(), &["--max-launches", "4"], &[]);
    let config = FakeConfig::new(ws_url(&daemon), credential(state.path(), "ext-1"), "ext-1")
        .fault(Fault::DeliverTwice(Op::Create))
        .fault_after(1, Fault::Reorder(Op::Create))
        .fault_after(2, Fault::DropResult(Op::Create))
        .fault_after(2, Fault::ReconnectNewInstance);
    let fake = FakeExecutor::start(config);
    let root = Root::new(&daemon);
    let workers: Vec<String> = ["a", "b", "c"].iter().map(|n| root.spawn(n)).collect();
    // The dropped result is recovered by the replay after the new-instance reconnect.
    for w in &workers {
        root.wait_event("executor.command_completed", w).await;
    }
    let stats = fake.stats();
    assert!(stats.instances.len() >= 2 && stats.instances[0] != stats.instances[1], "{stats:#?}");
    for w in &workers {
        assert_eq!(stats.submissions_for(&worker_id(w)).len(), 1, "{w}: {stats:#?}");
        let completed = root
            .events()
            .iter()
            .filter(|e| e["type"] == "executor.command_completed" && e["data"]["worker_id"] == *w)
            .count();
        assert_eq!(completed, 1, "a result delivered twice is recorded once");
    }
    assert_eq!(stats.conversations.len(), 3);
    fake.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wake_reported_after_its_deadline_is_recorded_once() {
    let state = tempfile::tempdir().unwrap();
    let daemon = Daemon::start_with(state.path(), &["--executor-send-timeout-ms", "300"], &[]);
    let fake = FakeExecutor::start(
        FakeConfig::new(ws_url(&daemon), credential(state.path(), "ext-1"), "ext-1")
            .fault(Fault::StallPastDeadline(Op::Send)),
    );
    let root = Root::new(&daemon);
    let a = root.attached_worker("alpha").await;
    root.mcp.ok("worker_followup", json!({"capability": root.cap, "worker_id": a, "instructions": "and then B"}));
    let send = root.commands(&a)[1].clone();
    let stats = fake.wait_for(|s| s.submissions.len() == 2, WAIT).await;
    // Wait for the send's own completion (the create's is already there).
    let deadline = tokio::time::Instant::now() + WAIT;
    while !root
        .events()
        .iter()
        .any(|e| e["type"] == "executor.command_completed" && e["data"]["command_id"] == send.as_str())
    {
        assert!(tokio::time::Instant::now() < deadline, "the late result was never recorded");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let late = stats.commands.iter().find(|c| c.command_id.as_str() == send).unwrap();
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as u64;
    assert!(now > late.deadline_ms, "the fake answered after the deadline");
    let prompts = stats.submissions_for(&worker_id(&a));
    assert_eq!(prompts.len(), 2);
    assert!(prompts[1].starts_with("[orchestrator wake v2]") && prompts[1].contains("follow-up #1"));
    let completed = root
        .events()
        .iter()
        .filter(|e| e["type"] == "executor.command_completed" && e["data"]["command_id"] == send.as_str())
        .count();
    assert_eq!(completed, 1);
    fake.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_daemon_killed_with_commands_pending_replays_only_the_incomplete() {
    let state = tempfile::tempdir().unwrap();
    let args = ["--max-launches", "2"];
    let daemon = Daemon::start_with(state.path(), &args, &[]);
    let mut root = Root::new(&daemon);
    // One executor for the whole test: its journal survives the daemon's death.
    // Each fault counts matching commands on its own: the 2nd create stalls
    // before its ack, the 3rd after it.
    let config = FakeConfig::new(ws_url(&daemon), credential(state.path(), "ext-1"), "ext-1")
        .fault_after(1, Fault::StallBeforeAck(Op::Create))
        .fault_after(2, Fault::StallAfterAck(Op::Create));
    let fake = FakeExecutor::start(config);

    let done = root.spawn("done"); // completes before the kill
    root.wait_event("executor.command_completed", &done).await;
    let sent = root.spawn("sent"); // sent, never acknowledged
    let acked = root.spawn("acked"); // acknowledged, never acted on
    let queued = root.spawn("queued"); // held back by --max-launches 2
    let (c_done, c_sent, c_acked, c_queued) = (
        root.commands(&done)[0].clone(),
        root.commands(&sent)[0].clone(),
        root.commands(&acked)[0].clone(),
        root.commands(&queued)[0].clone(),
    );
    fake.wait_for(|s| frames(s, &c_sent) == 1 && frames(s, &c_acked) == 1, WAIT).await;
    root.wait_event("executor.command_acked", &acked).await;
    assert!(!root.has_event("executor.command_acked", &sent));
    assert!(!root.has_event("executor.command_dispatched", &queued));

    let addr = daemon.addr.clone();
    daemon.kill9();
    // Same port, so the fake (which keeps dialing) finds the new daemon.
    let daemon = Daemon::start_at(state.path(), &addr, &args);
    root.reconnect(&daemon);
    for w in [&sent, &acked, &queued] {
        root.wait_event("executor.command_completed", w).await;
    }
    let stats = fake.stats();
    assert_eq!(stats.conversations.len(), 4, "{stats:#?}");
    for w in [&done, &sent, &acked, &queued] {
        assert_eq!(stats.submissions_for(&worker_id(w)).len(), 1, "{w}");
    }
    assert_eq!(frames(&stats, &c_done), 1, "a completed command is never replayed");
    assert_eq!(frames(&stats, &c_sent), 2);
    assert_eq!(frames(&stats, &c_acked), 2);
    assert_eq!(frames(&stats, &c_queued), 1);
    fake.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_peers_are_refused_with_documented_reasons_and_others_keep_working() {
    let state = tempfile::tempdir().unwrap();
    let daemon = Daemon::start(state.path());
    let good = FakeExecutor::start(FakeConfig::new(ws_url(&daemon), credential(state.path(), "good"), "good"));
    good.wait_for(|s| s.connections == 1, WAIT).await;
    let t = credential(state.path(), "raw");

    let cases: Vec<(&str, Vec<String>, u16, &str)> = vec![
        (
            "wrong credential",
            vec![hello(&format!("exc1.raw.{}", "0".repeat(64)), PROTOCOL_VERSION)],
            4001,
            "UNAUTHORIZED",
        ),
        (
            "another executor's credential",
            vec![hello(&credential(state.path(), "other"), PROTOCOL_VERSION)],
            4001,
            "another executor id",
        ),
        (
            "missing hello",
            vec![r#"{"type":"heartbeat","seq":1}"#.into()],
            4003,
            "PROTOCOL_VIOLATION: the first frame must be hello",
        ),
        ("wrong version", vec![hello(&t, PROTOCOL_VERSION + 1)], 4002, "PROTOCOL_VERSION_MISMATCH"),
        (
            "garbage json",
            vec![hello(&t, PROTOCOL_VERSION), "{not json".into()],
            4003,
            "PROTOCOL_VIOLATION: malformed frame",
        ),
        ("oversized frame", vec![hello(&t, PROTOCOL_VERSION), "x".repeat(300 * 1024)], 4003, "exceeds 262144"),
        ("hello twice", vec![hello(&t, PROTOCOL_VERSION), hello(&t, PROTOCOL_VERSION)], 4003, "hello sent twice"),
        // Version 1 is still served (its session gets as far as the bad frame)...
        ("a v1 executor", vec![hello(&t, 1), "{not json".into()], 4003, "PROTOCOL_VIOLATION: malformed frame"),
        // ...but without v2's fields.
        (
            "v2 host fields in a v1 hello",
            vec![
                hello(&t, 1)
                    .replace(r#""executorKind":"fake""#, r#""executorKind":"fake","host":{"os":"linux","capacity":4}"#),
            ],
            4003,
            "need protocol version 2",
        ),
    ];
    for (name, frames, code, reason) in cases {
        let (got_code, got_reason) = refused(&daemon, None, frames).await.unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(got_code, code, "{name}: {got_reason}");
        assert!(got_reason.contains(reason), "{name}: {got_reason}");
    }
    // Web origins are refused at the upgrade; extension origins pass it.
    let err = refused(&daemon, Some("https://evil.example"), vec![]).await.unwrap_err();
    assert!(err.contains("403"), "{err}");
    let (code, _) = refused(
        &daemon,
        Some("moz-extension://0b5c3a4e-1111-2222-3333-444455556666"),
        vec![hello("bad", PROTOCOL_VERSION)],
    )
    .await
    .unwrap();
    assert_eq!(code, 4001, "an extension origin reaches the handshake");

    // The good executor never noticed and still gets work.
    assert!(good.is_connected());
    let root = Root::new(&daemon);
    let a = root.spawn("alpha");
    root.wait_event("conversation.bound", &a).await;
    assert_eq!(good.stats().connections, 1);
    good.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commands_go_only_to_the_executor_holding_the_worker() {
    let state = tempfile::tempdir().unwrap();
    let daemon = Daemon::start(state.path());
    let e1 = FakeExecutor::start(FakeConfig::new(ws_url(&daemon), credential(state.path(), "ext-1"), "ext-1"));
    let e2 = FakeExecutor::start(FakeConfig::new(ws_url(&daemon), credential(state.path(), "ext-2"), "ext-2"));
    e1.wait_for(|s| s.connections == 1, WAIT).await;
    e2.wait_for(|s| s.connections == 1, WAIT).await;
    let root = Root::new(&daemon);
    let (a, b) = (root.spawn("alpha"), root.spawn("beta"));
    root.wait_event("conversation.bound", &a).await;
    root.wait_event("conversation.bound", &b).await;
    let holder_of = |w: &str| if e1.stats().conversations.iter().any(|(x, _)| x.as_str() == w) { &e1 } else { &e2 };
    let (ha, hb) = (holder_of(&a), holder_of(&b));
    assert!(!std::ptr::eq(ha, hb), "least-loaded placement spreads the two creates");

    // Wake A with a follow-up: only A's executor sees it.
    root.attach(&a);
    root.mcp.ok("worker_followup", json!({"capability": root.cap, "worker_id": a, "instructions": "more"}));
    ha.wait_for(|s| s.submissions_for(&worker_id(&a)).len() == 2, WAIT).await;
    root.wait_event("executor.command_completed", &a).await;
    assert!(hb.stats().commands.iter().all(|c| c.worker_id.as_str() != a), "B's executor never saw A's commands");
    assert_eq!(hb.stats().submissions.len(), 1);
    e1.stop().await;
    e2.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pair_issues_one_credential_per_executor_and_revocation_disconnects_only_that_one() {
    let state = tempfile::tempdir().unwrap();
    let daemon = Daemon::start(state.path());
    let pair = |args: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_orchestrator"))
            .args(["pair", "--state-dir"])
            .arg(state.path())
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    };
    let shown = pair(&["--executor-id", "ext-1"]);
    assert!(shown.contains("executor:   ext-1") && shown.contains("options page"), "{shown}");
    let one = shown.lines().find_map(|l| l.strip_prefix("credential: ")).unwrap().trim().to_owned();
    let two: Value = serde_json::from_str(&pair(&["--executor-id", "ext-2", "--json"])).unwrap();
    let two = two["credential"].as_str().unwrap().to_owned();
    let listed = pair(&["--list", "--json"]);
    assert!(listed.contains("ext-1") && listed.contains("ext-2") && !listed.contains(&one[12..]), "{listed}");
    let f1 = FakeExecutor::start(FakeConfig::new(ws_url(&daemon), one.clone(), "ext-1"));
    let f2 = FakeExecutor::start(FakeConfig::new(ws_url(&daemon), two.clone(), "ext-2"));
    f1.wait_for(|s| s.connections == 1, WAIT).await;
    f2.wait_for(|s| s.connections == 1, WAIT).await;
    pair(&["--revoke", "ext-1"]);
    // ext-1 is closed as revoked and refused on every retry; ext-2 never noticed.
    let stats = f1.wait_for(|s| s.closes.len() >= 2, WAIT).await;
    assert_eq!(stats.closes[0].0, 4001);
    assert!(stats.closes[0].1.contains("revoked"), "{:?}", stats.closes);
    assert!(stats.closes[1].1.contains("unknown or revoked"), "{:?}", stats.closes);
    assert!(f2.is_connected() && f2.stats().closes.is_empty());
    // Rotation revokes every credential.
    pair(&["--rotate"]);
    let stats = f2.wait_for(|s| !s.closes.is_empty(), WAIT).await;
    assert_eq!(stats.closes[0].0, 4001);
    f1.stop().await;
    f2.stop().await;
    let fresh = pair(&["--executor-id", "ext-1", "--json"]);
    let fresh: Value = serde_json::from_str(&fresh).unwrap();
    let again = FakeExecutor::start(FakeConfig::new(
        ws_url(&daemon),
        fresh["credential"].as_str().unwrap().to_owned(),
        "ext-1",
    ));
    again.wait_for(|s| s.connections == 1, WAIT).await;
    again.stop().await;
}

/// Issue 15 #1, daemon side: the daemon dies mid-turn and the turn's idle
/// report is lost; the executor is a minimal one that never re-sends its
/// states after reconnecting. The daemon's last observation (`generating`)
/// predates the new session, so it inspects the conversation itself, learns
/// it is idle, and the waiting follow-up is delivered, once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follow_up_behind_a_stale_generating_state_is_delivered_after_a_restart_without_a_resync() {
    let state = tempfile::tempdir().unwrap();
    let daemon = Daemon::start(state.path());
    let mut root = Root::new(&daemon);
    let config = FakeConfig::new(ws_url(&daemon), credential(state.path(), "ext-1"), "ext-1")
        .fault(Fault::LoseIdleReport(Op::Send))
        .fault(Fault::NoResync);
    let fake = FakeExecutor::start(config);
    let a = root.attached_worker("alpha").await;
    root.followup(&a, 1);
    fake.wait_for(|s| s.submissions_for(&worker_id(&a)).len() == 2, WAIT).await;
    root.followup(&a, 2);

    let addr = daemon.addr.clone();
    daemon.kill9();
    let daemon = Daemon::start_at(state.path(), &addr, &[]);
    root.reconnect(&daemon);
    let stats = fake.wait_for(|s| s.submissions_for(&worker_id(&a)).len() == 3, WAIT).await;
    assert_eq!(stats.submissions_for(&worker_id(&a)).len(), 3, "bootstrap + two follow-ups, each once");
    fake.stop().await;
}

/// Issue 15 #1, the bound: no crash at all, but the idle report of a turn is
/// lost on the way. A follow-up waits on `generating`; after the recheck
/// bound without news the daemon inspects the conversation and delivers it.
/// (With no bound the follow-up would wait forever.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_send_waiting_on_a_lost_idle_report_is_delivered_after_the_recheck_bound() {
    let state = tempfile::tempdir().unwrap();
    let daemon = Daemon::start_with(state.path(), &["--executor-recheck-after-ms", "400"], &[]);
    let root = Root::new(&daemon);
    let config = FakeConfig::new(ws_url(&daemon), credential(state.path(), "ext-1"), "ext-1")
        .fault(Fault::LoseIdleReport(Op::Send));
    let fake = FakeExecutor::start(config);
    let a = root.attached_worker("alpha").await;
    for n in 1..=2 {
        root.followup(&a, n);
    }
    let stats = fake.wait_for(|s| s.submissions_for(&worker_id(&a)).len() == 3, WAIT).await;
    assert_eq!(stats.submissions_for(&worker_id(&a)).len(), 3, "bootstrap + two follow-ups, each once");
    let inspects = root
        .events()
        .iter()
        .filter(|e| e["type"] == "executor.command_queued" && e["data"]["intent"]["op"] == "inspect")
        .count();
    assert!(inspects >= 1, "the daemon asked again rather than waiting");
    fake.stop().await;
}

/// Reliability #1: a follow-up's turn ends while the daemon is dead, and its
/// idle report is lost with it. After the restart the daemon still believes
/// the conversation is generating, so the next follow-up would wait forever;
/// the executor re-sends its conversations' states after the welcome (the
/// protocol's reconnect rule) and the follow-up is delivered, once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follow_up_behind_a_turn_that_ended_while_the_daemon_was_down_is_delivered() {
    let state = tempfile::tempdir().unwrap();
    let daemon = Daemon::start(state.path());
    let mut root = Root::new(&daemon);
    let config = FakeConfig::new(ws_url(&daemon), credential(state.path(), "ext-1"), "ext-1")
        .fault(Fault::LoseIdleReport(Op::Send));
    let fake = FakeExecutor::start(config);
    let a = root.attached_worker("alpha").await;
    root.followup(&a, 1);
    fake.wait_for(|s| s.submissions_for(&worker_id(&a)).len() == 2, WAIT).await;
    // The turn "ended" unheard; follow-up 2 waits behind the generating state.
    root.followup(&a, 2);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(fake.stats().submissions_for(&worker_id(&a)).len(), 2, "sent into a generating conversation");

    let addr = daemon.addr.clone();
    daemon.kill9();
    let daemon = Daemon::start_at(state.path(), &addr, &[]);
    root.reconnect(&daemon);
    let stats = fake.wait_for(|s| s.submissions_for(&worker_id(&a)).len() == 3, WAIT).await;
    assert_eq!(stats.submissions_for(&worker_id(&a)).len(), 3, "bootstrap + two follow-ups, each once");
    fake.stop().await;
}

/// Seed §13.4 over MCP: `run_create` with `root_objective` launches root
/// into a conversation an executor opens (like a worker's, through the
/// same exactly-once create); root's bootstrap prompt names only its attach
/// identity, and root attaches from that conversation to get root's
/// capability, the objective and root's instructions. A run whose caller
/// is root has no such conversation and nothing is launched for it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_managed_root_is_launched_by_an_executor_and_attaches_from_its_own_conversation() {
    let state = tempfile::tempdir().unwrap();
    let daemon = Daemon::start(state.path());
    let fake = FakeExecutor::start(FakeConfig::new(ws_url(&daemon), credential(state.path(), "ext-1"), "ext-1"));
    let mcp = Mcp::connect(&daemon.addr);
    let out = mcp.ok("run_create", json!({"title": "managed", "root_objective": "ship the release"}));
    let (cap, root) = (out["root_capability"].as_str().unwrap().to_owned(), out["run"]["root_worker_id"].clone());
    let root_id = worker_id(root.as_str().unwrap());
    let r = root_id.clone();
    let stats = fake.wait_for(move |s| s.submissions_for(&r).len() == 1, WAIT).await;
    let prompt = &stats.submissions_for(&root_id)[0];
    assert!(prompt.starts_with("[orchestrator root bootstrap v1]"), "{prompt}");
    assert!(!prompt.contains(&cap) && !prompt.contains("ship the release"), "no capability, no objective in a prompt");
    let attach = prompt.split('"').find(|p| p.starts_with("att_")).unwrap();
    let attached = mcp.ok("worker_attach", json!({"attach_identity": attach}));
    assert_eq!(attached["capability"], cap.as_str(), "root's own capability");
    assert_eq!(attached["assignment"]["objective"], "ship the release");
    assert!(attached["instructions"].as_str().unwrap().starts_with("You are root"));
    let me = mcp.ok("run_get", json!({"capability": cap}));
    assert_eq!(me["workers"][0]["state"], "running");

    // A run whose caller is root queues no launch.
    let plain = mcp.ok("run_create", json!({"title": "caller is root"}))["root_capability"].clone();
    let events = mcp.ok("events_list", json!({"capability": plain, "limit": 500}))["events"].clone();
    let kinds: Vec<&str> = events.as_array().unwrap().iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["run.created", "worker.created", "worker.state_changed"]);
    fake.stop().await;
}

/// Main's checkpoint and rollover (#106) over the real bridge: a managed
/// root coordinating a running worker asks for its own rollover, writes
/// its checkpoint when prompted, and continues in a fresh conversation at
/// epoch 1 (the fake executor retires the old one); the fresh root reads
/// its capsule, its old capability is refused `CONVERSATION_RETIRED`, the
/// worker never notices (its question reaches the fresh root, whose answer
/// reaches it) and the run completes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_managed_root_rolls_over_mid_run_and_its_worker_completes() {
    let state = tempfile::tempdir().unwrap();
    let daemon = Daemon::start(state.path());
    // The rollover prompt (the first send) is still being answered when
    // root writes its checkpoint, as on a real page: the simulated page's
    // instant idle would let the daemon roll without waiting for it (a
    // rule of its own) before this test's checkpoint call, under load.
    let config = FakeConfig::new(ws_url(&daemon), credential(state.path(), "ext-1"), "ext-1")
        .fault(Fault::LoseIdleReport(Op::Send));
    let fake = FakeExecutor::start(config);
    let mcp = Mcp::connect(&daemon.addr);
    let created = mcp.ok(
        "run_create",
        json!({"title": "main", "root_objective": "ship the release", "attribution": "capability_only"}),
    );
    let root_id = worker_id(created["run"]["root_worker_id"].as_str().unwrap());
    let attach_of = |prompt: &str| prompt.split('"').find(|p| p.starts_with("att_")).unwrap().to_owned();
    let r = root_id.clone();
    let stats = fake.wait_for(move |s| s.submissions_for(&r).len() == 1, WAIT).await;
    let old_cap = mcp.ok("worker_attach", json!({"attach_identity": attach_of(&stats.submissions_for(&root_id)[0])}))
        ["capability"]
        .as_str()
        .unwrap()
        .to_owned();
    // Root spawns a worker; the worker attaches and starts.
    let spawned = mcp
        .ok("worker_spawn", json!({"capability": old_cap, "name": "builder", "assignment": {"objective": "build it"}}));
    let builder = spawned["worker"]["worker_id"].as_str().unwrap().to_owned();
    let b = worker_id(&builder);
    let b2 = b.clone();
    let stats = fake.wait_for(move |s| s.submissions_for(&b2).len() == 1, WAIT).await;
    let builder_cap =
        mcp.ok("worker_attach", json!({"attach_identity": attach_of(&stats.submissions_for(&b)[0])}))["capability"]
            .as_str()
            .unwrap()
            .to_owned();
    mcp.ok("worker_progress", json!({"capability": builder_cap, "summary": "half built"}));

    // Root asks for its own rollover: it is prompted to checkpoint, does, and rolls.
    let asked = mcp.ok("worker_rollover", json!({"capability": old_cap, "worker_id": root_id.to_string()}));
    assert_eq!(asked["rollover_pending"], "requested", "{asked}");
    let r = root_id.clone();
    let stats = fake.wait_for(move |s| s.submissions_for(&r).len() == 2, WAIT).await;
    assert!(stats.submissions_for(&root_id)[1].starts_with("[orchestrator rollover v1]"));
    mcp.ok("worker_checkpoint", json!({"capability": old_cap, "note": "builder is half way; then release"}));
    let r = root_id.clone();
    let stats = fake.wait_for(move |s| s.submissions_for(&r).len() == 3, WAIT).await;
    let fresh_prompt = &stats.submissions_for(&root_id)[2];
    assert!(fresh_prompt.starts_with("[orchestrator rollover bootstrap v1 epoch 1]"), "{fresh_prompt}");
    assert_eq!(stats.conversations.iter().filter(|(w, _)| *w == root_id).count(), 2, "one fresh conversation");
    let fresh = mcp.ok("worker_attach", json!({"attach_identity": attach_of(fresh_prompt)}));
    let new_cap = fresh["capability"].as_str().unwrap().to_owned();
    assert_ne!(new_cap, old_cap);
    assert_eq!(fresh["continuation"]["epoch"], 1, "{fresh}");
    assert_eq!(fresh["continuation"]["checkpoint"], "builder is half way; then release", "{fresh}");
    assert_eq!(fresh["assignment"]["objective"], "ship the release");
    let (code, _) = mcp.call("run_get", json!({"capability": old_cap})).unwrap_err();
    assert_eq!(code, "CONVERSATION_RETIRED");

    // The worker never notices: its question reaches the fresh root.
    let asked = mcp
        .ok("message_send", json!({"capability": builder_cap, "to": "/root", "kind": "question", "body": "ship now?"}));
    let answer = json!({"capability": new_cap, "to": builder, "kind": "answer", "body": "yes",
        "in_reply_to": asked["message_id"]});
    mcp.ok("message_send", answer);
    mcp.ok("worker_complete", json!({"capability": builder_cap, "summary": "built"}));
    mcp.ok("worker_complete", json!({"capability": new_cap, "summary": "released"}));
    let run = mcp.ok("run_get", json!({"capability": new_cap}));
    assert_eq!(run["run"]["state"], "completed", "{run}");
    fake.stop().await;
}

/// A conversation that fills up on a wake (the fake executor's
/// `ConversationFull`) rolls its worker over: one fresh conversation with
/// one rollover bootstrap, whose attach names the open follow-up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conversation_that_fills_up_on_a_wake_rolls_its_worker_over() {
    let state = tempfile::tempdir().unwrap();
    let daemon = Daemon::start(state.path());
    let config = FakeConfig::new(ws_url(&daemon), credential(state.path(), "ext-1"), "ext-1")
        .fault(Fault::ConversationFull(Op::Send));
    let fake = FakeExecutor::start(config);
    let root = Root::new(&daemon);
    let a = root.spawn("a");
    let w = worker_id(&a);
    let w2 = w.clone();
    let stats = fake.wait_for(move |s| s.submissions_for(&w2).len() == 1, WAIT).await;
    let attach = stats.submissions_for(&w)[0].split('"').find(|p| p.starts_with("att_")).unwrap().to_owned();
    root.mcp.ok("worker_attach", json!({"attach_identity": attach}));
    root.followup(&a, 1);
    let w2 = w.clone();
    let stats = fake
        .wait_for(
            move |s| s.conversations.iter().filter(|(x, _)| *x == w2).count() == 2 && s.submissions_for(&w2).len() == 3,
            WAIT,
        )
        .await;
    let prompts = stats.submissions_for(&w);
    assert!(prompts[2].starts_with("[orchestrator rollover bootstrap v1 epoch 1]"), "{prompts:?}");
    let fresh = prompts[2].split('"').find(|p| p.starts_with("att_")).unwrap().to_owned();
    let attached = root.mcp.ok("worker_attach", json!({"attach_identity": fresh}));
    assert_eq!(attached["continuation"]["open"], json!([1]), "{attached}");
    fake.stop().await;
}

/// A raw executor session: hello as `id` at `version` declaring
/// `capabilities`, welcome read.
async fn raw_session(
    daemon: &Daemon,
    token: &str,
    id: &str,
    version: u32,
    capabilities: &[&str],
) -> tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>> {
    use futures_util::{SinkExt, StreamExt};
    let (mut socket, _) = tokio_tungstenite::connect_async(ws_url(daemon)).await.unwrap();
    let hello = json!({"type": "hello", "protocolVersion": version, "token": token, "executorId": id,
        "executorInstanceId": format!("{id}-1"), "executorKind": "webext", "capabilities": capabilities});
    socket.send(tokio_tungstenite::tungstenite::Message::Text(hello.to_string().into())).await.unwrap();
    let welcome = socket.next().await.unwrap().unwrap();
    assert!(welcome.to_text().unwrap().contains("\"welcome\""), "{welcome:?}");
    socket
}

/// The next frame of `type` the daemon sends within `within`, skipping others.
async fn next_of(
    socket: &mut tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>,
    kind: &str,
    within: Duration,
) -> Option<Value> {
    use futures_util::StreamExt;
    let deadline = tokio::time::Instant::now() + within;
    while let Ok(Some(Ok(message))) = tokio::time::timeout_at(deadline, socket.next()).await {
        let frame: Value = serde_json::from_str(message.to_text().unwrap_or("null")).unwrap_or_default();
        if frame["type"] == kind {
            return Some(frame);
        }
    }
    None
}

/// `GET /admin/page-inspect` (what `canary run`'s pre-flight asks): every
/// v5 executor that declared `page_inspect` is asked, only the asked one's
/// answer to its own id counts, and the others are never asked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_inspection_asks_each_able_executor_and_takes_only_its_own_answer() {
    use futures_util::SinkExt;
    use tokio_tungstenite::tungstenite::Message;
    let state = tempfile::tempdir().unwrap();
    let daemon = Daemon::start(state.path());
    let mut able = raw_session(&daemon, &credential(state.path(), "able"), "able", 5, &["page_inspect"]).await;
    let mut older = raw_session(&daemon, &credential(state.path(), "older"), "older", 4, &["page_inspect"]).await;
    let mut unable = raw_session(&daemon, &credential(state.path(), "unable"), "unable", 5, &[]).await;

    let (addr, dir) = (daemon.addr.clone(), state.path().to_owned());
    let asked = tokio::spawn(async move { server::admin::inspect_page(&addr, &dir, "https://chatgpt.com/").await });
    let frame = next_of(&mut able, "pageInspect", WAIT).await.expect("the able executor is asked");
    assert_eq!(frame["url"], "https://chatgpt.com/");
    let id = frame["inspectId"].as_str().unwrap();
    // The real id answered by an executor not asked, and an answer to an id
    // nobody issued: neither counts; the asked executor's does.
    let forged = json!({"type": "pageInspected", "inspectId": id, "inspection": {"adapter": "chatgpt-dom 0.1.0",
        "state": "ready", "turns": 0, "stopButtons": 0, "submit": "would type the prompt", "appPills": []}});
    unable.send(Message::Text(forged.to_string().into())).await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let stray = json!({"type": "pageInspected", "inspectId": "insp-not-asked", "error": "INTERNAL"});
    let answer = json!({"type": "pageInspected", "inspectId": id, "inspection": {"adapter": "chatgpt-dom 0.1.0",
        "state": "challenge", "turns": 0, "stopButtons": 0, "submit": "nothing (CHATGPT_CHALLENGE: …)", "appPills": []}});
    able.send(Message::Text(stray.to_string().into())).await.unwrap();
    able.send(Message::Text(answer.to_string().into())).await.unwrap();
    let readings = tokio::time::timeout(WAIT, asked).await.unwrap().unwrap().unwrap();
    assert_eq!(readings.len(), 1, "{readings:?}");
    assert_eq!(readings[0].executor_id, "able");
    let inspection = readings[0].inspection.as_ref().unwrap();
    assert_eq!(inspection.state, "challenge");
    assert!(!inspection.usable());
    assert_eq!(next_of(&mut older, "pageInspect", Duration::from_millis(300)).await, None, "a v4 session");
    assert_eq!(next_of(&mut unable, "pageInspect", Duration::from_millis(300)).await, None, "no capability");

    // A page that is not chatgpt.com's is refused before anyone is asked.
    for page in ["https://example.com/", "https://chatgpt.com/auth/logout", "https://chatgpt.com/?q=x"] {
        let refused = server::admin::inspect_page(&daemon.addr, state.path(), page).await.unwrap_err();
        assert!(refused.to_string().contains("INVALID_ARGUMENT"), "{page}: {refused}");
    }
    assert_eq!(next_of(&mut able, "pageInspect", Duration::from_millis(300)).await, None);
}
