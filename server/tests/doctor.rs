//! `orchestrator doctor` against a real daemon, and the host settings'
//! validation: a bad app label or Project URL stops `serve` with a clear
//! error instead of creating workers that can never be bound.

mod support;

use std::path::Path;
use std::process::Command;

fn orchestrator() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_orchestrator"))
}

/// Runs `doctor` against `state` (the daemon's state dir): exit code and stdout.
fn doctor(mcp_url: &str, state: &Path, extra: &[&str]) -> (i32, String) {
    let out = Command::new(orchestrator())
        .args(["doctor", "--mcp-url", mcp_url, "--state-dir"])
        .arg(state)
        .args(extra)
        .output()
        .unwrap();
    (out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Issue 17: doctor reports what the *running* daemon was started with (not
/// its own flags), compares what you expect, and names what is missing.
#[test]
fn doctor_reads_the_daemons_identity_and_catalog_and_lists_the_setup() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let project = "https://chatgpt.com/g/g-p-0123456789abcdef0123456789abcdef-workers/project";
    let daemon = e2e::Daemon::start(
        orchestrator(),
        &state,
        "127.0.0.1:0",
        &["--app-label", "My Orch", "--worker-project-url", project],
    )
    .unwrap();
    let (code, text) = doctor(&daemon.mcp_url(), &state, &[]);
    assert_eq!(code, 1, "no executor, not exposed: setup to do: {text}");
    assert!(text.contains("chatgpt-orchestrator"), "{text}");
    assert!(text.contains("(same as this binary)"), "{text}");
    assert!(text.contains("app label  ok   \"My Orch\""), "{text}");
    assert!(text.contains(project), "{text}");
    assert!(text.contains("executors  FAIL") && text.contains("orchestrator pair"), "{text}");
    assert!(text.contains("exposure   FAIL") && text.contains("orchestrator expose"), "{text}");
    assert!(text.contains("name it exactly \"My Orch\""), "{text}");
    assert!(text.contains("worker Project"), "{text}");

    let (code, text) = doctor(&daemon.mcp_url(), &state, &["--app-label", "Wrong Name"]);
    assert_eq!(code, 1);
    assert!(text.contains("app label  FAIL the daemon runs with \"My Orch\", you expected \"Wrong Name\""), "{text}");

    let (_, json) = doctor(&daemon.mcp_url(), &state, &["--json"]);
    let report: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(report["ready"], false);
    let item = |what: &str| report["checks"].as_array().unwrap().iter().find(|c| c["what"] == what).unwrap().clone();
    assert_eq!(item("app label")["ok"], true);
    assert_eq!(item("executors")["ok"], false);

    let (code, text) =
        doctor(&daemon.mcp_url(), &state, &["--app-label", "x", "--worker-project-url", "https://evil.example/g/x"]);
    assert_eq!(code, 1);
    assert!(text.contains("--worker-project-url must look like"), "{text}");

    let (code, text) = doctor(&daemon.mcp_url(), &dir.path().join("elsewhere"), &[]);
    assert_eq!(code, 2, "the admin read needs the daemon's state dir: {text}");
    assert!(text.contains("admin") && text.contains("cannot read"), "{text}");

    let (code, text) = doctor("http://127.0.0.1:9/mcp", &state, &["--app-label", "x"]);
    assert_eq!(code, 2);
    assert!(text.contains("not reachable"), "{text}");
}

/// Without an app label the daemon's own answer fails the item, whatever
/// doctor is told; with everything in place doctor exits 0.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn doctor_fails_a_missing_label_and_passes_a_ready_daemon() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let bare = support::Daemon::start(&state);
    let (url, s) = (bare.mcp_url(), state.clone());
    let (code, text) = tokio::task::spawn_blocking(move || doctor(&url, &s, &["--app-label", "Orch"])).await.unwrap();
    assert_eq!(code, 1);
    assert!(text.contains("app label  FAIL not set"), "{text}");
    drop(bare);

    let expose = Command::new(orchestrator())
        .args(["expose", "--host", "tunnel.example", "--state-dir"])
        .arg(&state)
        .env_remove("ORCHESTRATOR_MCP_SECRET")
        .output()
        .unwrap();
    assert!(expose.status.success());
    let token = carrier_webext::Credentials::open_or_create(&state.join("executors")).unwrap().issue("ext-1").unwrap();
    let ready = support::Daemon::start_with(&state, &["--app-label", "Orch", "--allowed-host", "tunnel.example"], &[]);
    let ws = ready.mcp_url().replace("http://", "ws://").replace("/mcp", "/executor");
    let fake = fake_executor::FakeExecutor::start(fake_executor::FakeConfig::new(ws, token, "ext-1"));
    fake.wait_for(|s| s.connections == 1, std::time::Duration::from_secs(10)).await;
    let (url, s) = (ready.mcp_url(), state.clone());
    let (code, text) = tokio::task::spawn_blocking(move || doctor(&url, &s, &[])).await.unwrap();
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("executors  ok   connected: ext-1 (1 paired)"), "{text}");
    assert!(text.contains("exposure   ok   https://tunnel.example/s/<secret>/mcp"), "never the secret itself: {text}");
    fake.stop().await;
}

/// Issue 46: an extension of a protocol version the daemon does not serve
/// is refused naming both builds and which to update; `doctor` fails an
/// `executor version` check with that reason and `status` lists it, until
/// the executor connects speaking the daemon's version.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn doctor_and_status_name_an_executor_refused_for_its_version() {
    use futures_util::{SinkExt, StreamExt};
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let daemon = support::Daemon::start_with(&state, &["--app-label", "Orch"], &[]);
    let token = carrier_webext::Credentials::open_or_create(&state.join("executors")).unwrap().issue("ext-9").unwrap();
    let ws = daemon.mcp_url().replace("http://", "ws://").replace("/mcp", "/executor");
    let newer = protocol::executor::PROTOCOL_VERSION + 1;
    let (mut socket, _) = tokio_tungstenite::connect_async(ws.as_str()).await.unwrap();
    let hello = serde_json::json!({"type": "hello", "protocolVersion": newer, "token": token, "executorId": "ext-9",
        "executorInstanceId": "i-1", "executorKind": "webext", "host": {"os": "linux", "release": "9.1.0"},
        "aFieldOfV5": true});
    socket.send(tokio_tungstenite::tungstenite::Message::text(hello.to_string())).await.unwrap();
    let closed = loop {
        match socket.next().await.expect("a close frame").unwrap() {
            tokio_tungstenite::tungstenite::Message::Close(Some(frame)) => break frame,
            _ => continue,
        }
    };
    let release = env!("CARGO_PKG_VERSION");
    let reason = format!(
        "PROTOCOL_VERSION_MISMATCH: update the daemon: executor 9.1.0 speaks v{newer}, daemon {release} v1-v{}",
        newer - 1
    );
    assert_eq!((u16::from(closed.code), closed.reason.to_string()), (4002, reason.clone()));
    let (url, s) = (daemon.mcp_url(), state.clone());
    let (code, text) = tokio::task::spawn_blocking(move || doctor(&url, &s, &[])).await.unwrap();
    assert_eq!(code, 1, "{text}");
    assert!(text.contains(&format!("executor version FAIL ext-9 was refused: {reason}")), "{text}");
    let status = Command::new(orchestrator()).args(["status", "--state-dir"]).arg(&state).output().unwrap();
    let status = String::from_utf8_lossy(&status.stdout);
    assert!(status.contains(&format!("refused    ext-9: {reason}")), "{status}");
    // Updated, it connects, says its release, and is refused no more.
    let fake = fake_executor::FakeExecutor::start(fake_executor::FakeConfig::new(ws, token, "ext-9"));
    fake.wait_for(|s| s.connections == 1, std::time::Duration::from_secs(10)).await;
    let status = Command::new(orchestrator()).args(["status", "--state-dir"]).arg(&state).output().unwrap();
    let status = String::from_utf8_lossy(&status.stdout);
    assert!(status.contains(&format!("executors  ext-9 ({release}, 0)")) && !status.contains("refused"), "{status}");
    fake.stop().await;
}

#[test]
fn serve_refuses_a_bad_app_label_or_project_url() {
    let dir = tempfile::tempdir().unwrap();
    for args in [
        &["--app-label", " padded"][..],
        &["--app-label", ""][..],
        &["--worker-project-url", "https://chatgpt.com/c/0196b2c4-8e1f-7a3b-9c2d-4e5f60718293"][..],
    ] {
        let out = Command::new(orchestrator())
            .args(["serve", "--listen", "127.0.0.1:0", "--state-dir"])
            .arg(dir.path())
            .args(args)
            .output()
            .unwrap();
        assert!(!out.status.success(), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("--app-label must") || err.contains("--worker-project-url must"), "{args:?}: {err}");
    }
}
