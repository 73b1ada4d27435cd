//! Daemon memory (run: `cargo bench -p server --bench rss`): the resident set
//! of a real `orchestrator serve` when idle, and after 10,000 events appended
//! through MCP tool calls over HTTP. Baseline in the same run: the RSS of a
//! freshly started daemon. Prints figures, asserts nothing.

#[path = "../tests/support.rs"]
mod support;

use std::time::{Duration, Instant};

use support::{Daemon, request};

fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap()
}

/// The JSON-RPC result object inside an SSE or JSON body.
fn result_of(body: &str) -> serde_json::Value {
    let json = body.lines().filter_map(|l| l.strip_prefix("data: ")).find(|l| l.starts_with('{')).unwrap_or(body);
    let v: serde_json::Value = serde_json::from_str(json).unwrap_or_else(|e| panic!("{e}: {body}"));
    v["result"].clone()
}

fn main() {
    let quick = !std::env::args().any(|a| a == "--bench");
    let events = if quick { 200 } else { 10_000 };
    let dir = tempfile::tempdir().unwrap();
    let daemon = Daemon::start(dir.path());
    let pid = daemon.child.id();
    std::thread::sleep(Duration::from_millis(500));
    let idle = rss_kib(pid);

    let headers = [("Accept", "application/json, text/event-stream"), ("Content-Type", "application/json")];
    let init = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"rss-bench","version":"0"}}}"#;
    let r = request(&daemon.addr, "POST", "/mcp", &headers, init);
    let session = r.header("mcp-session-id").expect("a session id").to_owned();
    let with_session =
        [headers[0], headers[1], ("Mcp-Session-Id", session.as_str()), ("MCP-Protocol-Version", "2025-11-25")];
    request(&daemon.addr, "POST", "/mcp", &with_session, r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
    let call = |id: usize, tool: &str, args: serde_json::Value| {
        let body =
            serde_json::json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":{"name":tool,"arguments":args}});
        let r = request(&daemon.addr, "POST", "/mcp", &with_session, &body.to_string());
        let result = result_of(&r.body);
        assert_ne!(result["isError"], true, "{tool}: {}", r.body);
        result["structuredContent"].clone()
    };
    let run = call(1, "run_create", serde_json::json!({"title": "rss"}));
    let root = run["root_capability"].as_str().unwrap().to_owned();
    let spawn = call(
        2,
        "worker_spawn",
        serde_json::json!({"capability": root, "name": "w", "assignment": {"objective": "grow the log"}}),
    );
    let prompt = spawn["bootstrap_prompt"].as_str().unwrap();
    let attach = prompt.split('"').find(|s| s.starts_with("att_")).unwrap();
    let cap = call(3, "worker_attach", serde_json::json!({"attach_identity": attach}))["capability"]
        .as_str()
        .unwrap()
        .to_owned();
    let start = Instant::now();
    for i in 0..events {
        call(
            10 + i,
            "worker_progress",
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
