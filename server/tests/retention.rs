//! Retention through the binary: `orchestrator prune` takes the runs that
//! ended long enough ago from a stopped daemon's state directory, and a
//! restart serves every other run as it was.

mod support;

use std::process::{Command, Output};

use serde_json::{Value, json};
use support::{Daemon, Mcp};

fn prune(dir: &std::path::Path, args: &[&str]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_orchestrator"));
    cmd.arg("prune").arg("--state-dir").arg(dir).args(args);
    cmd.output().unwrap()
}

fn json_of(out: &Output) -> Value {
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

fn run(mcp: &Mcp, title: &str) -> (String, String) {
    let made = mcp.ok("run_create", json!({"title": title, "attribution": "capability_only"}));
    (made["run"]["run_id"].as_str().unwrap().to_owned(), made["root_capability"].as_str().unwrap().to_owned())
}

#[test]
fn prune_takes_ended_runs_from_a_stopped_daemon_and_a_restart_keeps_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    let mut daemon = Daemon::start(dir.path());
    let mcp = Mcp::connect(&daemon.addr);
    let (ended, ended_cap) = run(&mcp, "ended");
    let spawned = json!({"capability": ended_cap, "name": "w", "assignment": {"objective": "be pruned"}});
    mcp.ok("worker_spawn", spawned);
    mcp.ok("run_cancel", json!({"capability": ended_cap, "reason": "done with it"}));
    let (kept, kept_cap) = run(&mcp, "kept");
    let spawned = json!({"capability": kept_cap, "name": "w", "assignment": {"objective": "stay"}});
    let worker = mcp.ok("worker_spawn", spawned)["worker"]["worker_id"].as_str().unwrap().to_owned();
    let note = json!({"capability": kept_cap, "to": worker, "kind": "information", "body": "still here"});
    mcp.ok("message_send", note);
    let before = mcp.ok("run_get", json!({"capability": kept_cap}));
    assert_eq!(before["run"]["run_id"], kept.as_str());

    let refused = prune(dir.path(), &["--older-than", "0"]);
    assert!(!refused.status.success(), "a running daemon's store is never pruned under it");
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(said.contains("in use by another orchestrator process"), "{said}");
    daemon.kill();

    let listed = json_of(&prune(dir.path(), &["--older-than", "0", "--dry-run", "--json"]));
    assert_eq!(listed["dry_run"], true);
    let runs: Vec<&str> = listed["runs"].as_array().unwrap().iter().map(|r| r["run_id"].as_str().unwrap()).collect();
    assert_eq!(runs, [ended.as_str()], "only the ended run: {listed:#}");
    assert_eq!(listed["runs"][0]["state"], "cancelled");
    assert!(listed["events"].as_u64().unwrap() >= 4, "{listed:#}");
    let recent = json_of(&prune(dir.path(), &["--json"]));
    assert_eq!(recent["runs"], json!([]), "by default a run is kept for 30 days after it ended");

    let removed = prune(dir.path(), &["--older-than", "0"]);
    let text = String::from_utf8_lossy(&removed.stdout);
    assert!(removed.status.success(), "{}", String::from_utf8_lossy(&removed.stderr));
    assert!(text.starts_with("removed 1 run(s)") && text.contains(&ended), "{text}");
    assert_eq!(json_of(&prune(dir.path(), &["--older-than", "0", "--json"]))["runs"], json!([]));

    let daemon = Daemon::start(dir.path());
    let mcp = Mcp::connect(&daemon.addr);
    assert_eq!(mcp.ok("run_get", json!({"capability": kept_cap})), before, "the kept run, as it was");
    let (code, _) = mcp.call("run_get", json!({"capability": ended_cap})).unwrap_err();
    assert_eq!(code, "UNAUTHORIZED", "the pruned run is gone");
    run(&mcp, "a new run after the prune");
}
