//! Real external MCP clients against the real binary: the Python SDK over
//! streamable HTTP (both protocol modes), the TypeScript SDK over stdio, a
//! `kill -9` restart, hostile inputs, and the HTTP safety checks.

mod support;

use std::process::Command;
use std::time::{Duration, Instant};

use support::{Daemon, http, python, ts_dir};

#[test]
fn python_sdk_plays_root_and_two_workers_over_http_in_both_modes() {
    let dir = tempfile::tempdir().unwrap();
    let daemon = Daemon::start(dir.path());
    for mode in ["auto", "legacy"] {
        let out = python("flow.py", &[&daemon.mcp_url(), mode]);
        assert!(out.contains(&format!("flow over {mode}: ok")), "{out}");
        assert!(!out.contains("Session termination failed"), "the SDK complains on close: {out}");
    }
}

#[test]
fn typescript_sdk_plays_the_same_flow_over_stdio() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new("node")
        .arg("flow.mjs")
        .arg(env!("CARGO_BIN_EXE_orchestrator"))
        .arg(dir.path())
        .current_dir(ts_dir())
        .env("RUST_LOG", "warn")
        .output()
        .unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success() && text.contains("flow over stdio: ok"), "{text}");
}

#[test]
fn kill_dash_nine_mid_run_loses_nothing_acknowledged() {
    let state = tempfile::tempdir().unwrap();
    let scratch = tempfile::tempdir().unwrap();
    let scratch_path = scratch.path().to_str().unwrap().to_owned();
    let daemon = Daemon::start(state.path());
    let mut writer = Command::new("python3")
        .arg(e2e::workspace().join("server/tests/py/restart.py"))
        .args(["before", &daemon.mcp_url(), &scratch_path])
        .current_dir(e2e::workspace().join("server/tests/py"))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Kill while progress calls are in flight, once enough were acknowledged.
    let acks = scratch.path().join("acks");
    let deadline = Instant::now() + Duration::from_secs(60);
    while std::fs::read_to_string(&acks).map_or(0, |s| s.lines().count()) < 25 {
        assert!(Instant::now() < deadline, "the writer made no progress");
        assert!(writer.try_wait().unwrap().is_none(), "the writer died before the kill");
        std::thread::sleep(Duration::from_millis(20));
    }
    daemon.kill9();
    let _ = writer.wait();
    let daemon = Daemon::start(state.path());
    let out = python("restart.py", &["after", &daemon.mcp_url(), &scratch_path]);
    assert!(out.contains("restart: ok"), "{out}");
}

/// Issue 15 #5: an assignment whose fields are each within bounds but
/// together 1.6 MB is refused; follow-ups, events and worker lists that
/// escape large still come back in responses the Python SDK can read (it
/// refuses a message over 1 MiB), and paging through the log progresses.
#[test]
fn every_response_fits_what_the_python_sdk_accepts_and_paging_progresses() {
    let state = tempfile::tempdir().unwrap();
    let daemon = Daemon::start(state.path());
    for mode in ["auto", "legacy"] {
        let out = python("bounds.py", &[&daemon.mcp_url(), mode]);
        assert!(out.contains("ok:"), "{out}");
    }
}

/// Issue 15: an executor written from `docs/executor-protocol.md` alone (by
/// someone who read no Rust and not the fake executor; its docstring lists
/// what the doc left open) runs the two-worker flow, survives a SIGKILL of
/// the daemon at the exact point between an effect and its result (replay
/// answered from its journal), and serves a pool: ensure, a task, a lost tab
/// recovered, a stop.
#[test]
fn an_executor_written_from_the_protocol_doc_alone_runs_two_workers_a_restart_and_a_pool() {
    let state = tempfile::tempdir().unwrap();
    let out = python("doc_executor_flow.py", &[env!("CARGO_BIN_EXE_orchestrator"), state.path().to_str().unwrap()]);
    assert!(out.contains("ok: scenarios a, b, c passed"), "{out}");
}

#[test]
fn hostile_inputs_get_typed_errors_and_change_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let daemon = Daemon::start(dir.path());
    let out = python("hostile.py", &[&daemon.mcp_url()]);
    assert!(out.contains("hostile: ok"), "{out}");
}

const INIT: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}"#;
const ACCEPT: (&str, &str) = ("Accept", "application/json, text/event-stream");
const JSON: (&str, &str) = ("Content-Type", "application/json");

#[test]
fn http_refuses_foreign_hosts_and_web_origins() {
    let dir = tempfile::tempdir().unwrap();
    let daemon = Daemon::start(dir.path());
    let (status, body) = http(&daemon.addr, "GET", "/healthz", &[], "");
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("\"ok\""));
    let (status, _) = http(&daemon.addr, "POST", "/mcp", &[ACCEPT, JSON], INIT);
    assert_eq!(status, 200, "a loopback client is served");
    // DNS rebinding: a foreign Host header.
    let (status, _) = http(&daemon.addr, "POST", "/mcp", &[ACCEPT, JSON, ("Host", "evil.example:7777")], INIT);
    assert_eq!(status, 403);
    // A web page's fetch carries an Origin.
    let (status, _) = http(&daemon.addr, "POST", "/mcp", &[ACCEPT, JSON, ("Origin", "https://evil.example")], INIT);
    assert_eq!(status, 403);
}

#[test]
fn an_mcp_secret_guards_the_endpoint_by_bearer_or_secret_path() {
    let dir = tempfile::tempdir().unwrap();
    let secret = "s3cr3t-Vq3hZ8rT0kLw2nB7xYc5mJ9dFp4sGa1uEi6o";
    let daemon =
        Daemon::start_with(dir.path(), &["--allowed-host", "tunnel.example"], &[("ORCHESTRATOR_MCP_SECRET", secret)]);
    let (status, _) = http(&daemon.addr, "POST", "/mcp", &[ACCEPT, JSON], INIT);
    assert_eq!(status, 401);
    let bearer = format!("Bearer {secret}");
    let (status, _) = http(&daemon.addr, "POST", "/mcp", &[ACCEPT, JSON, ("Authorization", &bearer)], INIT);
    assert_eq!(status, 200);
    let (status, _) =
        http(&daemon.addr, "POST", &format!("/s/{secret}/mcp"), &[ACCEPT, JSON, ("Host", "tunnel.example")], INIT);
    assert_eq!(status, 200, "ChatGPT connectors send no headers: the secret path serves them");
    let (status, _) = http(&daemon.addr, "POST", "/s/wrong/mcp", &[ACCEPT, JSON], INIT);
    assert_eq!(status, 404);
}

#[test]
fn serve_refuses_a_network_listener_without_a_secret_and_a_second_daemon() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_orchestrator"))
        .args(["serve", "--listen", "0.0.0.0:0", "--state-dir"])
        .arg(dir.path())
        .env_remove("ORCHESTRATOR_MCP_SECRET")
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("ORCHESTRATOR_MCP_SECRET"));
    let _first = Daemon::start(dir.path());
    let out = Command::new(env!("CARGO_BIN_EXE_orchestrator"))
        .args(["serve", "--listen", "127.0.0.1:0", "--state-dir"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("in use"));
}

#[test]
fn sigterm_stops_the_daemon_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let mut daemon = Daemon::start(dir.path());
    let pid = daemon.child.id().to_string();
    assert!(Command::new("kill").args(["-TERM", &pid]).status().unwrap().success());
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(status) = daemon.child.try_wait().unwrap() {
            assert!(status.success(), "{status}");
            break;
        }
        assert!(Instant::now() < deadline, "the daemon ignored SIGTERM");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Issue 35's acceptance: a root and two workers (Python SDK, every call
/// attributed by an executor written from the protocol doc) claim, hand off,
/// land, remove and reclaim worktrees of a real Git repository; `orchestrator
/// who` by worktree, branch and landed commit names the exact worker,
/// session and conversation; a SIGKILL and restart rebuild the identical
/// records and Git projections.
#[test]
fn worktree_ownership_through_the_python_sdk_and_who() {
    let state = tempfile::tempdir().unwrap();
    let trees = tempfile::tempdir().unwrap();
    support::git_fixture(trees.path(), &["alpha", "beta", "gamma"]);
    let root = std::fs::canonicalize(trees.path()).unwrap();
    let out = python(
        "ownership_flow.py",
        &[env!("CARGO_BIN_EXE_orchestrator"), state.path().join("state").to_str().unwrap(), root.to_str().unwrap()],
    );
    assert!(out.contains("ok: ownership flow passed"), "{out}");
}
