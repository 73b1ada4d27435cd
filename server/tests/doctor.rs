//! `orchestrator doctor` against a real daemon, and the host settings'
//! validation: a bad app label or Project URL stops `serve` with a clear
//! error instead of creating workers that can never be bound.

use std::path::Path;
use std::process::Command;

fn orchestrator() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_orchestrator"))
}

fn doctor(mcp_url: &str, extra: &[&str]) -> (bool, String) {
    let out = Command::new(orchestrator()).args(["doctor", "--mcp-url", mcp_url]).args(extra).output().unwrap();
    (out.status.success(), String::from_utf8_lossy(&out.stdout).into_owned())
}

#[test]
fn doctor_reads_the_daemons_identity_and_catalog_and_lists_the_setup() {
    let dir = tempfile::tempdir().unwrap();
    let daemon = e2e::Daemon::start(orchestrator(), &dir.path().join("state"), "127.0.0.1:0", &[]).unwrap();
    let project = "https://chatgpt.com/g/g-p-0123456789abcdef0123456789abcdef-workers/project";
    let (ok, text) = doctor(&daemon.mcp_url(), &["--app-label", "Orchestrator", "--worker-project-url", project]);
    assert!(ok, "{text}");
    assert!(text.contains("chatgpt-orchestrator"), "{text}");
    assert!(text.contains("(same as this binary)"), "{text}");
    assert!(text.contains("name it exactly \"Orchestrator\""), "{text}");
    assert!(text.contains("worker Project"), "{text}");

    let (ok, text) = doctor(&daemon.mcp_url(), &[]);
    assert!(!ok, "no label is a missing setup step: {text}");
    assert!(text.contains("app label  FAIL"), "{text}");

    let (ok, text) =
        doctor(&daemon.mcp_url(), &["--app-label", "x", "--worker-project-url", "https://evil.example/g/x"]);
    assert!(!ok && text.contains("--worker-project-url must look like"), "{text}");

    let (ok, text) = doctor("http://127.0.0.1:9/mcp", &["--app-label", "x"]);
    assert!(!ok && text.contains("not reachable"), "{text}");
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
