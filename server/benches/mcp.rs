//! The MCP path real clients use (run: `cargo bench -p server --bench mcp`):
//! stateless requests of the 2026-07-28 revision (no handshake; `_meta`,
//! `Mcp-Method`/`Mcp-Name`), the form ChatGPT's connector and current SDKs
//! use, against a bare rmcp echo server answering the same form in the same
//! run: the limit for an MCP server on this machine. Prints req/s, p50 and
//! p99 for `run_get` and `message_send` at 1 and 16 concurrent clients, the
//! same over a kept session, their ratios to the echo; the daemon's peak
//! resident memory after `MCP_BENCH_LOAD_SECONDS` (default 60) of 16
//! concurrent stateless clients alternating the two; then `run_get`,
//! `events_list` (limit 10) and `message_send` again after a run's history
//! grew by `MCP_BENCH_MESSAGES` messages (default 100,000), as ratios to the
//! fresh run, and the peak memory again. `MCP_BENCH_SECONDS` (default 3)
//! sets each measurement's length. Asserts nothing. Run without `--bench`
//! (as `cargo test` does) it is a quick pass of the same steps.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use mcp_client::Client;
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{ServerCapabilities, ServerConfig};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ServerHandler, tool, tool_handler, tool_router};
use serde_json::{Value, json};

/// The bare server: one tool that returns its argument.
#[derive(Clone)]
struct Echo {
    tool_router: ToolRouter<Echo>,
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct EchoArgs {
    /// What to echo.
    text: String,
}

#[tool_router]
impl Echo {
    /// Echo the text.
    #[tool]
    async fn echo(&self, Parameters(args): Parameters<EchoArgs>) -> String {
        args.text
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for Echo {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }
}

async fn echo_server() -> String {
    let router = Echo::tool_router();
    let config = StreamableHttpServerConfig::default().with_allowed_hosts(vec!["127.0.0.1".to_owned()]);
    let service: StreamableHttpService<Echo, LocalSessionManager> = StreamableHttpService::new(
        move || Ok(Echo { tool_router: router.clone() }),
        Arc::new(LocalSessionManager::default()),
        config,
    );
    let app = axum::Router::new().nest_service("/mcp", service);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    format!("http://{addr}/mcp")
}

/// One measurement: req/s, p50 and p99 in ms.
struct Rate {
    per_sec: f64,
    p50: f64,
    p99: f64,
}

/// `clients` concurrent clients calling `tool` with `args` for `length`.
async fn measure(url: &str, stateless: bool, clients: usize, tool: &str, args: Value, length: Duration) -> Rate {
    let until = Instant::now() + length;
    let mut tasks = Vec::new();
    for _ in 0..clients {
        let (url, tool, args) = (url.to_owned(), tool.to_owned(), args.clone());
        tasks.push(tokio::spawn(async move {
            let mut client =
                if stateless { Client::stateless(&url).unwrap() } else { Client::connect(&url).await.unwrap() };
            let mut took = Vec::new();
            while Instant::now() < until {
                let started = Instant::now();
                client.call(&tool, args.clone()).await.unwrap().unwrap_or_else(|e| panic!("{tool}: {e}"));
                took.push(started.elapsed().as_secs_f64() * 1000.0);
            }
            took
        }));
    }
    let mut all = Vec::new();
    for task in tasks {
        all.extend(task.await.unwrap());
    }
    all.sort_by(f64::total_cmp);
    let at = |q: f64| all.get(((all.len() as f64 * q) as usize).min(all.len().saturating_sub(1))).copied();
    Rate { per_sec: all.len() as f64 / length.as_secs_f64(), p50: at(0.5).unwrap_or(0.0), p99: at(0.99).unwrap_or(0.0) }
}

/// `clients` concurrent stateless clients, each calling `calls` in turn
/// for `length`; the rate of all their calls.
async fn sustain(url: &str, clients: usize, calls: &[(&str, &Value)], length: Duration) -> f64 {
    let until = Instant::now() + length;
    let calls: Vec<(String, Value)> = calls.iter().map(|(t, a)| ((*t).to_owned(), (*a).clone())).collect();
    let mut tasks = Vec::new();
    for _ in 0..clients {
        let (url, calls) = (url.to_owned(), calls.clone());
        tasks.push(tokio::spawn(async move {
            let mut client = Client::stateless(&url).unwrap();
            let mut made = 0u64;
            while Instant::now() < until {
                let (tool, args) = &calls[made as usize % calls.len()];
                client.call(tool, args.clone()).await.unwrap().unwrap_or_else(|e| panic!("{tool}: {e}"));
                made += 1;
            }
            made
        }));
    }
    let mut made = 0;
    for task in tasks {
        made += task.await.unwrap();
    }
    made as f64 / length.as_secs_f64()
}

fn line(what: &str, rate: &Rate, against: Option<&Rate>) {
    let ratio = against.map_or(String::new(), |a| format!("  ({:.3}× echo)", rate.per_sec / a.per_sec));
    println!("{what:<44} {:>9.0} req/s  p50 {:>7.2} ms  p99 {:>7.2} ms{ratio}", rate.per_sec, rate.p50, rate.p99);
}

fn peak_rss_mib(pid: u32) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let kib =
        status.lines().find_map(|l| l.strip_prefix("VmHWM:")).and_then(|v| v.split_whitespace().next()?.parse().ok());
    kib.unwrap_or(0.0) / 1024.0
}

fn env_number(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    let quick = !std::env::args().any(|a| a == "--bench");
    let length =
        if quick { Duration::from_millis(200) } else { Duration::from_secs(env_number("MCP_BENCH_SECONDS", 3)) };
    let load =
        if quick { Duration::from_secs(1) } else { Duration::from_secs(env_number("MCP_BENCH_LOAD_SECONDS", 60)) };
    let history = if quick { 200 } else { env_number("MCP_BENCH_MESSAGES", 100_000) };
    let echo = echo_server().await;
    let state = tempfile::tempdir().unwrap();
    let daemon = Path::new(env!("CARGO_BIN_EXE_orchestrator"));
    let mut daemon = e2e::Daemon::start(daemon, state.path(), "127.0.0.1:0", &[]).unwrap();
    let url = daemon.mcp_url();

    let mut root = Client::connect(&url).await.unwrap();
    let run = root.call("run_create", json!({"title": "mcp bench", "attribution": "capability_only"})).await;
    let cap = run.unwrap().unwrap()["root_capability"].as_str().unwrap().to_owned();
    let assignment = json!({"objective": "be messaged"});
    let spawned = root.call("worker_spawn", json!({"capability": cap, "name": "w", "assignment": assignment})).await;
    let worker = spawned.unwrap().unwrap()["worker"]["worker_id"].as_str().unwrap().to_owned();
    let run_get = json!({"capability": cap});
    let events = json!({"capability": cap, "limit": 10});
    let send = json!({"capability": cap, "to": worker, "kind": "information", "body": "a note"});

    println!("MCP bench: {length:?} per measurement; the same machine, the same run");
    let mut fresh = Vec::new();
    for clients in [1, 16] {
        let bare = measure(&echo, true, clients, "echo", json!({"text": "hello"}), length).await;
        line(&format!("bare rmcp echo, stateless, c={clients}"), &bare, None);
        for (tool, args) in [("run_get", &run_get), ("message_send", &send)] {
            let rate = measure(&url, true, clients, tool, args.clone(), length).await;
            line(&format!("{tool}, stateless, c={clients}"), &rate, Some(&bare));
            let session = measure(&url, false, clients, tool, args.clone(), length).await;
            line(&format!("{tool}, session, c={clients}"), &session, Some(&bare));
            if clients == 1 {
                fresh.push((tool, rate));
            }
        }
    }
    let events_fresh = measure(&url, true, 1, "events_list", events.clone(), length).await;
    let sustained = sustain(&url, 16, &[("run_get", &run_get), ("message_send", &send)], load).await;
    println!(
        "{:.0} s of 16 stateless clients alternating run_get and message_send: {:.0} req/s; peak RSS {:.1} MiB",
        load.as_secs_f64(),
        sustained,
        peak_rss_mib(daemon.pid())
    );

    // History: many more messages in the run, then the same calls again.
    let started = Instant::now();
    let mut senders = Vec::new();
    for _ in 0..4 {
        let (url, send) = (url.clone(), send.clone());
        senders.push(tokio::spawn(async move {
            let mut client = Client::stateless(&url).unwrap();
            for _ in 0..history / 4 {
                client.call("message_send", send.clone()).await.unwrap().unwrap();
            }
        }));
    }
    for s in senders {
        s.await.unwrap();
    }
    let logged = root.call("run_get", run_get.clone()).await.unwrap().unwrap()["run"]["cursor"].clone();
    println!(
        "{history} more messages in {:.1} s (the run's log now holds {logged} events)",
        started.elapsed().as_secs_f64()
    );
    for (tool, before) in &fresh {
        let args = if *tool == "run_get" { &run_get } else { &send };
        let after = measure(&url, true, 1, tool, args.clone(), length).await;
        println!(
            "{tool:<14} after the history: {:.0} req/s, {:.2}× its fresh rate",
            after.per_sec,
            after.per_sec / before.per_sec
        );
    }
    let events_after = measure(&url, true, 1, "events_list", events, length).await;
    println!(
        "events_list    after the history: {:.0} req/s, {:.2}× its fresh rate",
        events_after.per_sec,
        events_after.per_sec / events_fresh.per_sec
    );
    println!("peak RSS: {:.1} MiB", peak_rss_mib(daemon.pid()));
    daemon.kill();
}
