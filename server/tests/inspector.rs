//! The MCP Inspector's CLI (the version pinned in `tests/ts/package.json`,
//! run through `npx`) against the real daemon: its schema portability lint
//! finds nothing in `tools/list`, and it calls every tool, each argument
//! built from the tool's own input schema and each result checked against
//! the tool's output schema by the SDK the Inspector runs on. A fake
//! executor serves the pool, so the runtime tools run for real.

mod support;

use std::collections::BTreeSet;
use std::process::Command;
use std::time::{Duration, Instant};

use fake_executor::{FakeConfig, FakeExecutor};
use serde_json::{Value, json};
use support::{Daemon, Mcp, credential, ts_dir, ws_url};

const WAIT: Duration = Duration::from_secs(30);

/// Runs the Inspector CLI against `url`; its exit status, stdout and stderr.
fn inspector(url: &str, args: &[&str]) -> (bool, String, String) {
    let out = Command::new("npx")
        .args(["--no-install", "mcp-inspector", "--cli", url, "--transport", "http"])
        .args(args)
        .current_dir(ts_dir())
        .output()
        .expect("npx runs (node is installed by the README test command)");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The tools the Inspector called successfully, to check that none was missed.
struct Caller {
    url: String,
    called: BTreeSet<String>,
}

impl Caller {
    /// `tool` with `args` (`key=value`: the Inspector reads a value as JSON
    /// when it parses, so `7777` is a number, then types it by the schema);
    /// its structured result. Panics on an error result, an output
    /// that does not match its schema, or anything the Inspector warns about.
    fn call(&mut self, tool: &str, args: &[String]) -> Value {
        self.attempt(tool, args).unwrap_or_else(|text| panic!("{tool} {args:?}: {text}"))
    }

    fn attempt(&mut self, tool: &str, args: &[String]) -> Result<Value, String> {
        let mut argv = vec!["--method", "tools/call", "--tool-name", tool];
        if !args.is_empty() {
            argv.push("--tool-arg");
            argv.extend(args.iter().map(String::as_str));
        }
        let (ok, stdout, stderr) = inspector(&self.url, &argv);
        let lower = stderr.to_lowercase();
        assert!(!lower.contains("warn") && !lower.contains("schema"), "{tool}: the Inspector complains: {stderr}");
        let result: Value = serde_json::from_str(&stdout).map_err(|_| format!("{stdout}{stderr}"))?;
        if !ok || result["isError"] != false {
            return Err(format!("{stdout}{stderr}"));
        }
        self.called.insert(tool.to_owned());
        Ok(result["structuredContent"].clone())
    }
}

fn arg(key: &str, value: impl std::fmt::Display) -> String {
    format!("{key}={value}")
}

fn attach_identity(prompt: &str) -> String {
    prompt
        .split('"')
        .find(|p| p.starts_with("att_"))
        .expect("a bootstrap prompt carries its attach identity")
        .to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_inspector_lists_every_tool_without_warnings_and_calls_each() {
    let state = tempfile::tempdir().unwrap();
    let trees = tempfile::tempdir().unwrap();
    let (_, worktrees) = support::git_fixture(trees.path(), &["inspected"]);
    let root_dir = trees.path().to_str().unwrap();
    let daemon = Daemon::start_with(
        state.path(),
        &["--app-label", "My Orch", "--pool-pacing-ms", "20", "--worktree-root", root_dir],
        &[],
    );
    let fake = FakeExecutor::start(FakeConfig::new(ws_url(&daemon), credential(state.path(), "ext-1"), "ext-1"));
    fake.wait_for(|s| s.connections == 1, WAIT).await;
    let url = daemon.mcp_url();

    let (ok, stdout, stderr) = inspector(&url, &["--method", "tools/list", "--strict"]);
    assert!(ok, "{stderr}");
    assert!(!stderr.contains("Warning") && !stderr.contains("Error"), "portability findings:\n{stderr}");
    let listed: BTreeSet<String> = serde_json::from_str::<Value>(&stdout).unwrap()["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(listed.len(), 40, "{listed:?}");

    let mut c = Caller { url, called: BTreeSet::new() };
    // The Inspector is a plain MCP client no browser sees: capability-only identity.
    let created = c.call(
        "run_create",
        &[arg("title", "inspected run"), arg("idempotency_key", "r1"), arg("attribution", "capability_only")],
    );
    let root = created["root_capability"].as_str().unwrap().to_owned();
    let cap = || arg("capability", &root);
    c.call("run_get", &[cap()]);

    // One worker with every assignment field, one with its objective alone
    // (its attach output then omits what it does not have).
    let full = json!({
        "objective": "build A", "constraints": ["no side effects"], "acceptance_criteria": ["A builds"],
        "dependencies": ["none"], "scope": {"allowed": ["a/"], "forbidden": ["b/"]}, "artifact_refs": ["commit:0"],
        "communication_policy": "ask /root", "completion_protocol": "say what you built"
    });
    let a =
        c.call("worker_spawn", &[cap(), arg("name", "alpha"), arg("assignment", full), arg("idempotency_key", "a")]);
    let b = c.call("worker_spawn", &[cap(), arg("name", "beta"), arg("assignment", json!({"objective": "build B"}))]);
    let a_id = a["worker"]["worker_id"].as_str().unwrap().to_owned();
    let b_id = b["worker"]["worker_id"].as_str().unwrap().to_owned();
    let spawned =
        [a["bootstrap_prompt"].as_str().unwrap(), b["bootstrap_prompt"].as_str().unwrap()].map(attach_identity);
    let att_a = c.call("worker_attach", &[arg("attach_identity", &spawned[0])]);
    let att_b = c.call("worker_attach", &[arg("attach_identity", &spawned[1])]);
    assert_eq!(att_a["assignment"]["completion_protocol"], "say what you built");
    assert!(att_b["assignment"].get("completion_protocol").is_none(), "{att_b}");
    let cap_a = arg("capability", att_a["capability"].as_str().unwrap());
    let cap_b = arg("capability", att_b["capability"].as_str().unwrap());

    c.call("worker_progress", &[cap_a.clone(), arg("summary", "half way"), arg("percent", 50)]);
    let question = c.call(
        "message_send",
        &[cap_a.clone(), arg("to", "/root"), arg("kind", "question"), arg("body", "Which port?")],
    );
    let cursor = created["run"]["cursor"].as_u64().unwrap();
    c.call("events_wait", &[cap(), arg("after_cursor", cursor), arg("timeout_ms", 1000), arg("limit", 50)]);
    c.call("events_list", &[cap(), arg("limit", 50)]);
    let reply_to = question["message_id"].as_str().unwrap();
    c.call(
        "message_send",
        &[cap(), arg("to", &a_id), arg("kind", "answer"), arg("body", "port 7777"), arg("in_reply_to", reply_to)],
    );
    c.call("message_broadcast", &[cap(), arg("kind", "information"), arg("body", "all hands")]);
    c.call("worker_list", &[cap()]);
    // A blocked chat is refused; unblocked, it works again.
    c.call("worker_block", &[cap(), arg("worker_id", &a_id), arg("reason", "looping")]);
    let refused = c.attempt("worker_progress", &[cap_a.clone(), arg("summary", "still here")]).unwrap_err();
    assert!(refused.contains("CHAT_BLOCKED"), "{refused}");
    c.call("worker_unblock", &[cap(), arg("worker_id", &a_id)]);
    c.call("worker_complete", &[cap_a, arg("summary", "A built"), arg("artifacts", json!(["commit:aaaa"]))]);
    c.call("worker_followup", &[cap(), arg("worker_id", &a_id), arg("instructions", "also build A2")]);
    c.call("worker_stop", &[cap(), arg("worker_id", &a_id), arg("reason", "enough")]);
    // Execution Continuity on beta: policies, holds, continue now.
    c.call("run_continuation_set_default", &[cap(), arg("policy", json!({"mode": "auto"}))]);
    let auto = json!({"mode": "auto", "idle_grace_ms": 0, "stall_pause_after_no_progress_ms": 0});
    c.call("worker_continuation_set", &[cap(), arg("worker_id", &b_id), arg("policy", auto)]);
    let continuation = c.call("worker_continuation_get", &[cap(), arg("worker_id", &b_id)]);
    assert_eq!(continuation["policy"]["mode"], "auto", "{continuation}");
    assert_eq!(continuation["policy"]["idle_grace_ms"], 0, "{continuation}");
    let paused = c.call("worker_pause", &[cap(), arg("worker_id", &b_id), arg("reason", "look first")]);
    assert_eq!(paused["disposition"], "paused", "{paused}");
    let resumed = c.call("worker_continue_now", &[cap(), arg("worker_id", &b_id)]);
    assert!(resumed.get("hold").is_none(), "continue now clears the pause: {resumed}");
    assert_eq!(c.call("run_pause_all", &[cap()])["changed"], 1, "beta; alpha is stopped");
    assert_eq!(c.call("run_resume_all", &[cap()])["changed"], 1);
    c.call("worker_await_dependency", &[cap_b.clone(), arg("reason", "A's API")]);
    c.call("worker_resume", &[cap_b.clone(), arg("worker_id", &b_id)]);
    let choices = arg("choices", json!(["postgres", "sqlite"]));
    let waiting = c.call("worker_await_human", &[cap_b.clone(), arg("reason", "which database?"), choices]);
    assert_eq!(waiting["disposition"], "awaiting_human", "{waiting}");
    c.call("worker_fail", &[cap_b, arg("reason", "B cannot be built")]);
    let listed_workers = c.call("worker_list", &[cap()]);
    let beta = listed_workers["workers"].as_array().unwrap().iter().find(|w| w["worker_id"] == b_id.as_str()).unwrap();
    assert_eq!(beta["state"], "failed", "{listed_workers}");

    // The pool: the fake executor opens the conversation; the Inspector plays its model.
    c.call("runtime_ensure", &[cap(), arg("desired_workers", 1)]);
    // The executor also launched alpha and beta: the pool's prompt is the other one.
    let pooled = |p: &str| !spawned.contains(&attach_identity(p));
    let stats = fake.wait_for(|s| s.submissions.iter().any(|(_, p)| pooled(p)), WAIT).await;
    let pool_attach = attach_identity(&stats.submissions.iter().find(|(_, p)| pooled(p)).unwrap().1);
    let deadline = Instant::now() + WAIT;
    let pool_worker = loop {
        match c.attempt("runtime_bootstrap", &[arg("attach_identity", &pool_attach)]) {
            Ok(me) => break me,
            // The create's result may still be in flight.
            Err(text) if text.contains("PEER_IDENTITY_UNRESOLVED") && Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(text) => panic!("runtime_bootstrap: {text}"),
        }
    };
    let watcher = Mcp::connect(&daemon.addr);
    let deadline = Instant::now() + WAIT;
    while watcher.ok("runtime_status", json!({"capability": root}))["state"] != "READY" {
        assert!(Instant::now() < deadline, "the pool never became READY");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    c.call("runtime_status", &[cap()]);
    let task = c.call("task_dispatch", &[cap(), arg("instructions", "count to three"), arg("idempotency_key", "t1")]);
    let task_id = task["task_id"].as_str().unwrap().to_owned();
    let pool_cap = pool_worker["capability"].as_str().unwrap();
    watcher.ok("worker_complete", json!({"capability": pool_cap, "summary": "one, two, three"}));
    let collected = c.call("task_collect", &[cap(), arg("task_id", &task_id)]);
    assert_eq!(collected["result"], "one, two, three", "{collected}");
    c.call("runtime_scale", &[cap(), arg("desired_workers", 2)]);
    c.call("runtime_recover", &[cap()]);
    c.call("runtime_stop", &[cap()]);
    // Rollover on a third worker: its own checkpoint, then root's request
    // once its conversation is bound (the fake executor rolls over).
    let g = c.call("worker_spawn", &[cap(), arg("name", "gamma"), arg("assignment", json!({"objective": "build G"}))]);
    let g_id = g["worker"]["worker_id"].as_str().unwrap().to_owned();
    let att_g =
        c.call("worker_attach", &[arg("attach_identity", attach_identity(g["bootstrap_prompt"].as_str().unwrap()))]);
    let checkpoint = c.call(
        "worker_checkpoint",
        &[arg("capability", att_g["capability"].as_str().unwrap()), arg("note", "done: nothing; next: G")],
    );
    assert_eq!(checkpoint["epoch"], 0, "{checkpoint}");
    let deadline = Instant::now() + WAIT;
    let rolling = loop {
        match c.attempt("worker_rollover", &[cap(), arg("worker_id", &g_id)]) {
            Ok(out) => break out,
            // Not bound yet.
            Err(text) if text.contains("INVALID_TRANSITION") && Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(text) => panic!("worker_rollover: {text}"),
        }
    };
    assert_eq!(rolling["rollover_pending"], "requested", "{rolling}");
    // Worktree ownership: root (its own chat) claims, is heard from, is found.
    let wt = worktrees[0].to_str().unwrap();
    let claimed = c.call("ownership_claim", &[cap(), arg("worktree", wt), arg("session", "inspector-1")]);
    let own = claimed["records"][0]["ownership_id"].as_str().unwrap().to_owned();
    assert_eq!(claimed["records"][0]["state"], "active", "{claimed}");
    c.call("ownership_update", &[cap(), arg("ownership_id", &own), arg("op", "heartbeat")]);
    let who = c.call("ownership_who", &[cap(), arg("worktree", wt)]);
    assert_eq!(who["records"][0]["holder"]["session"], "inspector-1", "{who}");
    c.call("run_cancel", &[cap(), arg("reason", "inspected")]);

    let missed: Vec<&String> = listed.difference(&c.called).collect();
    assert!(missed.is_empty(), "tools never called: {missed:?}");
    fake.stop().await;
}
