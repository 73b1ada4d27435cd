//! Gates G2–G6 of the runtime pool, end to end: the real daemon binary, the
//! fake executor over the real `/executor` bridge, and one MCP session per
//! worker conversation playing its model (bootstrap, then tasks). Root is a
//! separate MCP session. Nothing else touches a conversation: every prompt a
//! conversation received was sent by the orchestrator (counted).

mod support;

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use fake_executor::{FakeConfig, FakeExecutor};
use serde_json::{Value, json};
use support::{Daemon, Mcp, credential};

const WAIT: Duration = Duration::from_secs(30);
/// Five managed conversations exceed the default of four active at once.
const DAEMON_ARGS: [&str; 6] = ["--pool-pacing-ms", "40", "--max-launches", "4", "--max-active-workers", "8"];

/// The conversations' side: each conversation is one MCP peer, as it is in ChatGPT.
struct Models {
    stop: Arc<std::sync::atomic::AtomicBool>,
}

impl Models {
    /// Plays every conversation's model: on its bootstrap prompt it calls
    /// worker_attach as the prompt says; on a wake it reads its newest task
    /// (runtime_bootstrap) and completes it,
    /// unless the task says "hold" (a long-running task).
    fn start(fake: Arc<FakeExecutor>, addr: String) -> Models {
        let addr = Arc::new(Mutex::new(addr));
        let done = Arc::new(Mutex::new(0));
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (a, d, s) = (addr.clone(), done.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut peers: HashMap<String, Mcp> = HashMap::new();
            while !s.load(std::sync::atomic::Ordering::SeqCst) {
                let stats = fake.stats();
                let handled = *d.lock().unwrap();
                for (conversation, prompt) in stats.submissions.iter().skip(handled) {
                    let attach = prompt
                        .split('"')
                        .find(|p| p.starts_with("att_"))
                        .expect("prompts carry the attach identity")
                        .to_owned();
                    let addr = a.lock().unwrap().clone();
                    let peer = peers.entry(conversation.to_string()).or_insert_with(|| Mcp::connect(&addr));
                    // The bootstrap prompt says worker_attach (a pool worker is admitted
                    // through it); a wake re-reads the task through runtime_bootstrap.
                    let tool = if prompt.starts_with("[orchestrator wake v2]") {
                        "runtime_bootstrap"
                    } else {
                        "worker_attach"
                    };
                    let me = match peer.call(tool, json!({"attach_identity": attach})) {
                        Ok(me) => me,
                        // Not resolved yet (the create's result is still in flight): try again shortly.
                        Err((code, _)) if code == "PEER_IDENTITY_UNRESOLVED" => break,
                        Err((code, message)) => panic!("runtime_bootstrap: {code}: {message}"),
                    };
                    if prompt.starts_with("[orchestrator wake v2]") {
                        let task = me["followups"].as_array().unwrap().last().unwrap().as_str().unwrap().to_owned();
                        if !task.contains("hold") {
                            peer.ok(
                                "worker_complete",
                                json!({"capability": me["capability"], "summary": format!("done: {task}")}),
                            );
                        }
                    }
                    *d.lock().unwrap() += 1;
                }
                std::thread::sleep(Duration::from_millis(15));
            }
        });
        Models { stop }
    }
}

impl Drop for Models {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
    }
}

struct Rig {
    state: tempfile::TempDir,
    daemon: Daemon,
    fake: Arc<FakeExecutor>,
    root: Mcp,
    cap: String,
    _models: Models,
}

impl Rig {
    async fn new() -> Rig {
        let state = tempfile::tempdir().unwrap();
        let daemon = Daemon::start_with(state.path(), &DAEMON_ARGS, &[]);
        let fake = Arc::new(FakeExecutor::start(FakeConfig::new(
            format!("ws://{}/executor", daemon.addr),
            credential(state.path(), "ext-1"),
            "ext-1",
        )));
        fake.wait_for(|s| s.connections == 1, WAIT).await;
        let root = Mcp::connect(&daemon.addr);
        let cap = root.ok("run_create", json!({"title": "pool"}))["root_capability"].as_str().unwrap().to_owned();
        let models = Models::start(fake.clone(), daemon.addr.clone());
        Rig { state, daemon, fake, root, cap, _models: models }
    }

    fn call(&self, tool: &str, mut args: Value) -> Value {
        args["capability"] = json!(self.cap);
        self.root.ok(tool, args)
    }

    fn status(&self) -> Value {
        self.call("runtime_status", json!({}))
    }

    fn cursor(&self) -> u64 {
        self.call("run_get", json!({}))["run"]["cursor"].as_u64().unwrap()
    }

    /// Waits until the pool is READY with `n` parked, admitted slots.
    async fn ready(&self, n: usize) -> Value {
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            let s = self.status();
            let slots = s["slots"].as_array().unwrap();
            if s["state"] == "READY" && slots.len() == n && slots.iter().all(|x| x["admitted"] == true) {
                return s;
            }
            assert!(tokio::time::Instant::now() < deadline, "not READY with {n}: {s:#}");
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }

    fn workers(&self, status: &Value) -> Vec<String> {
        status["slots"].as_array().unwrap().iter().map(|s| s["worker_id"].as_str().unwrap().to_owned()).collect()
    }

    /// Every prompt any conversation received came from an orchestrator command.
    fn assert_no_manual_interaction(&self) {
        let stats = self.fake.stats();
        let mut from_commands = HashSet::new();
        for c in &stats.commands {
            if let protocol::executor::CommandOp::ConversationCreate { prompt, .. }
            | protocol::executor::CommandOp::ConversationSend { prompt, .. } = &c.op
            {
                from_commands.insert(prompt.clone());
            }
        }
        let manual = stats.submissions.iter().filter(|(_, p)| !from_commands.contains(p)).count();
        assert_eq!(manual, 0, "prompts not sent by the orchestrator");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn g2_ensure_three_parks_three_distinct_conversations_and_a_replay_does_nothing() {
    let rig = Rig::new().await;
    let out = rig.call("runtime_ensure", json!({"desired_workers": 3}));
    assert_eq!(out["outcome"]["provisioned"], json!([0, 1, 2]));
    let status = rig.ready(3).await;
    let stats = rig.fake.stats();
    let conversations: HashSet<_> = stats.conversations.iter().map(|(_, c)| c.clone()).collect();
    assert_eq!(conversations.len(), 3, "three distinct conversations");
    let ids: HashSet<_> =
        status["slots"].as_array().unwrap().iter().map(|s| s["conversation_id"].as_str().unwrap().to_owned()).collect();
    assert_eq!(ids.len(), 3);
    assert_eq!(stats.submissions.len(), 3, "one bootstrap each");
    let (cursor, commands) = (rig.cursor(), stats.commands.len());
    let again = rig.call("runtime_ensure", json!({"desired_workers": 3}));
    assert_eq!(again["outcome"]["provisioned"], json!([]));
    assert_eq!(rig.cursor(), cursor, "the replay recorded nothing");
    assert_eq!(rig.fake.stats().commands.len(), commands, "and sent nothing");
    rig.assert_no_manual_interaction();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn g3_targeted_tasks_wake_the_exact_workers_and_are_collected_without_cross_attribution() {
    let rig = Rig::new().await;
    rig.call("runtime_ensure", json!({"desired_workers": 3}));
    let status = rig.ready(3).await;
    let tasks: Vec<Value> = (0..3)
        .map(|slot| rig.call("task_dispatch", json!({"instructions": format!("task for slot {slot}"), "slot": slot})))
        .collect();
    for (slot, task) in tasks.iter().enumerate() {
        assert_eq!(task["worker_id"], rig.workers(&status)[slot]);
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            let c = rig.call("task_collect", json!({"task_id": task["task_id"]}));
            if c["status"] == "completed" {
                assert_eq!(c["result"], format!("done: task for slot {slot}"), "no cross-attribution");
                break;
            }
            assert!(tokio::time::Instant::now() < deadline, "task {slot} never completed");
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }
    let stats = rig.fake.stats();
    for w in rig.workers(&status) {
        let prompts = stats.submissions_for(&w.parse().unwrap());
        assert_eq!(prompts.len(), 2, "bootstrap + exactly one wake for {w}");
    }
    rig.assert_no_manual_interaction();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn g4_a_lost_carrier_is_recovered_as_the_same_worker_and_the_others_are_untouched() {
    let rig = Rig::new().await;
    rig.call("runtime_ensure", json!({"desired_workers": 3}));
    let before = rig.ready(3).await;
    let lost = rig.workers(&before)[1].clone();
    let untouched = rig.fake.stats();
    assert!(rig.fake.lose_tab(&lost.parse().unwrap()));
    let deadline = tokio::time::Instant::now() + WAIT;
    while rig.status()["state"] != "DEGRADED" {
        assert!(tokio::time::Instant::now() < deadline);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let out = rig.call("runtime_recover", json!({}));
    assert_eq!(out["outcome"]["recovering"], json!([1]));
    let after = rig.ready(3).await;
    assert_eq!(rig.workers(&after), rig.workers(&before), "same logical workers");
    assert_eq!(after["slots"][1]["continuation_epoch"], 1);
    assert_eq!(after["slots"][1]["conversation_id"], before["slots"][1]["conversation_id"], "the exact conversation");
    let stats = rig.fake.stats();
    assert_eq!(stats.reopened.len(), 1);
    assert_eq!(stats.submissions.len(), untouched.submissions.len(), "no prompt anywhere");
    assert_eq!(stats.conversations.len(), 3, "no new conversation");
    rig.assert_no_manual_interaction();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn g5_three_to_five_to_two_keeps_protected_workers() {
    let rig = Rig::new().await;
    rig.call("runtime_ensure", json!({"desired_workers": 3}));
    rig.ready(3).await;
    let up = rig.call("runtime_scale", json!({"desired_workers": 5}));
    assert_eq!(up["outcome"]["provisioned"], json!([3, 4]));
    let five = rig.ready(5).await;
    // Slot 4 gets a long-running task: it is busy and must survive the scale-down.
    let busy = rig.workers(&five)[4].clone();
    rig.call("task_dispatch", json!({"instructions": "hold: long task", "slot": 4}));
    rig.fake.wait_for(|s| s.submissions_for(&busy.parse().unwrap()).len() == 2, WAIT).await;
    let down = rig.call("runtime_scale", json!({"desired_workers": 2}));
    assert_eq!(down["outcome"]["retiring"], json!([3, 2, 1]));
    assert_eq!(down["outcome"]["protected"], json!([4]));
    let stats = rig.fake.wait_for(|s| s.closed.len() == 3, WAIT).await;
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let s = rig.status();
        let slots: Vec<u64> = s["slots"].as_array().unwrap().iter().map(|x| x["slot"].as_u64().unwrap()).collect();
        if slots == vec![0, 4] {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "{s:#}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(stats.conversations.len(), 5, "scale-up added only the missing two");
    rig.assert_no_manual_interaction();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn g6_a_cold_restart_reconstructs_the_pool_with_one_ensure_and_no_duplicates() {
    let mut rig = Rig::new().await;
    rig.call("runtime_ensure", json!({"desired_workers": 3}));
    let before = rig.ready(3).await;
    let conversations = rig.fake.stats().conversations.len();
    let addr = rig.daemon.addr.clone();
    // Cold: SIGKILL, then a new daemon on the same port, where the executor redials.
    rig.daemon.kill();
    rig.daemon = Daemon::start_at(rig.state.path(), &addr, &DAEMON_ARGS);
    rig.fake.wait_for(|s| s.connections >= 2, WAIT).await;
    rig.root = Mcp::connect(&rig.daemon.addr);
    let out = rig.call("runtime_ensure", json!({"desired_workers": 3}));
    assert_eq!(out["outcome"]["provisioned"], json!([]), "reconstructed from durable state");
    let after = rig.status();
    assert_eq!(rig.workers(&after), rig.workers(&before));
    assert_eq!(rig.fake.stats().conversations.len(), conversations, "no duplicate conversation");
    rig.assert_no_manual_interaction();

    // Issue 15 #3, lifted by caller attribution (#20): each worker was
    // admitted as its conversation (its runtime_bootstrap was seen in its
    // own page), not as an MCP session that died with the old daemon. A
    // wake's re-attach is proven the same way, so the pool is READY after
    // a cold restart and a task is accepted.
    let slots = after["slots"].as_array().unwrap();
    assert!(slots.iter().all(|s| s["admitted"] == true && s["can_act"] == true), "{after:#}");
    assert_eq!(after["state"], "READY", "{after:#}");
    let task = rig.call("task_dispatch", json!({"instructions": "x", "slot": 0}));
    assert!(task["task_id"].is_string(), "{task:#}");
}
