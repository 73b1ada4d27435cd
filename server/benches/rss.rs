//! Daemon memory (run: `cargo bench -p server --bench rss`): the resident set
//! of a real `orchestrator serve` when idle, and after 10,000 events appended
//! through MCP tool calls over HTTP. Baseline in the same run: the RSS of a
//! freshly started daemon. Prints figures, asserts nothing.

#[path = "../tests/support.rs"]
mod support;

use std::time::{Duration, Instant};

use support::Daemon;

fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap()
}

fn main() {
    let quick = !std::env::args().any(|a| a == "--bench");
    let events = if quick { 200 } else { 10_000 };
    let dir = tempfile::tempdir().unwrap();
    let daemon = Daemon::start(dir.path());
    let pid = daemon.child.id();
    std::thread::sleep(Duration::from_millis(500));
    let idle = rss_kib(pid);

    let mcp = support::Mcp::connect(&daemon.addr);
    // The bench plays its worker by hand (no executor): capability-only identity.
    let run = mcp.ok("run_create", serde_json::json!({"title": "rss", "attribution": "capability_only"}));
    let root = run["root_capability"].as_str().unwrap().to_owned();
    let spawn = mcp.ok(
        "worker_spawn",
        serde_json::json!({"capability": root, "name": "w", "assignment": {"objective": "grow the log"}}),
    );
    let prompt = spawn["bootstrap_prompt"].as_str().unwrap();
    let attach = prompt.split('"').find(|s| s.starts_with("att_")).unwrap();
    let cap = mcp.ok("worker_attach", serde_json::json!({"attach_identity": attach}))["capability"]
        .as_str()
        .unwrap()
        .to_owned();
    let start = Instant::now();
    for i in 0..events {
        mcp.ok("worker_progress",
            serde_json::json!({"capability": cap, "summary": format!("progress report number {i} with a realistic sentence of text")}),
        );
    }
    let elapsed = start.elapsed();
    std::thread::sleep(Duration::from_millis(500));
    let loaded = rss_kib(pid);
    println!(
        "daemon RSS    idle {:.1} MiB   after {events} events {:.1} MiB   ratio {:.2}x  ({:.0} tool calls/s over HTTP)",
        idle as f64 / 1024.0,
        loaded as f64 / 1024.0,
        loaded as f64 / idle as f64,
        events as f64 / elapsed.as_secs_f64()
    );
}
