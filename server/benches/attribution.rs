//! Caller attribution's cost (run: `cargo bench -p server --bench
//! attribution`): the latency of a worker's `worker_progress` call whose
//! request id is already in its page (fakechat puts the turn's request id
//! in the page's data when the call starts, with no delay; each sample is
//! a new turn's first call, the one that waits), proven through the
//! real path (the page script in Chromium → the extension's content script
//! and background → `callerSeen` → the daemon's wait), against the same
//! call in a capability-only run (no attribution) in the same run of the
//! bench. Prints p50/p95 and their ratios; asserts nothing.

use std::path::Path;
use std::time::{Duration, Instant};

use e2e::World;
use mcp_client::Client;
use serde_json::{Value, json};

async fn call(root: &mut Client, tool: &str, args: Value) -> Value {
    root.call(tool, args).await.unwrap().unwrap_or_else(|e| panic!("{tool}: {e}"))
}

/// A worker of a new run (`attribution` its policy) that reported progress
/// once and waits: its conversation and capability.
async fn worker(world: &World, root: &mut Client, attribution: &str) -> (String, String) {
    let run = call(root, "run_create", json!({"title": "attribution bench", "attribution": attribution})).await;
    let cap = run["root_capability"].as_str().unwrap().to_owned();
    let assignment = json!({"objective": "wait\nscenario: progress \"parked\""});
    let spawned = call(root, "worker_spawn", json!({"capability": cap, "name": "w", "assignment": assignment})).await;
    let id = spawned["worker"]["worker_id"].as_str().unwrap().to_owned();
    let mut cursor = 0;
    let conversation = loop {
        let page =
            call(root, "events_wait", json!({"capability": cap, "after_cursor": cursor, "timeout_ms": 5000})).await;
        cursor = page["cursor"].as_u64().unwrap();
        let events = page["events"].as_array().unwrap();
        let progressed = events.iter().any(|e| e["type"] == "worker.progress" && e["data"]["worker_id"] == id.as_str());
        if progressed {
            let bound = call(root, "events_list", json!({"capability": cap, "limit": 500})).await;
            let conv = bound["events"].as_array().unwrap().iter().find_map(|e| {
                (e["type"] == "conversation.bound" && e["data"]["worker_id"] == id.as_str())
                    .then(|| e["data"]["conversation_id"].as_str().unwrap().to_owned())
            });
            break conv.unwrap();
        }
    };
    while world.fake.hub.oracle()["conversations"][&conversation]["state"] != "idle" {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let capability =
        world.fake.hub.read(&conversation, |c| c.agent.as_ref().map(|m| m.capability.clone())).flatten().unwrap();
    (conversation, capability)
}

/// How the sampled calls' request ids come.
#[derive(Clone, Copy, PartialEq)]
enum Ids {
    /// Each call a new turn's first (its id new in the page).
    NewTurns,
    /// All calls of one turn (one id, attributed by the first).
    OneTurn,
    /// No page shows them (a capability-only run).
    Unshown,
}

/// `samples` progress calls as the worker of `conversation`; each one's
/// latency in µs, from the moment its request id is in the page's data.
async fn sample(world: &World, mcp_url: &str, conversation: &str, cap: &str, ids: Ids, samples: usize) -> Vec<u64> {
    let mut out = Vec::new();
    let mut client = Client::stateless(mcp_url).unwrap();
    let shown = ids != Ids::Unshown;
    for i in 0..samples {
        let id = match ids {
            Ids::NewTurns => format!("wfr_bencha{i:06}"),
            Ids::OneTurn => "wfr_benchturn".to_owned(),
            Ids::Unshown => format!("wfr_benchc{i:06}"),
        };
        if shown {
            world.fake.hub.tool_call(conversation, Some(&id), "worker_progress", "Orchestrator");
        }
        let header = format!("{id}/b{i}");
        let started = Instant::now();
        let args = json!({"capability": cap, "summary": format!("sample {i}")});
        let answer = client.call_with("worker_progress", args, &[("x-request-id", &header)]).await.unwrap();
        answer.unwrap_or_else(|e| panic!("sample {i} ({id}): {e}"));
        out.push(started.elapsed().as_micros() as u64);
    }
    out
}

fn percentile(sorted: &[u64], p: f64) -> u64 {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

fn summary(mut v: Vec<u64>) -> (u64, u64) {
    v.sort_unstable();
    (percentile(&v, 0.5), percentile(&v, 0.95))
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let quick = !std::env::args().any(|a| a == "--bench");
    let samples = if quick { 5 } else { 60 };
    let world = World::start(Path::new(env!("CARGO_BIN_EXE_orchestrator")), &[]).await.unwrap();
    world.fake.hub.call_delay.send_replace(Duration::ZERO);
    let url = world.daemon.mcp_url();
    let mut root = Client::connect(&url).await.unwrap();
    let (attributed_conv, attributed_cap) = worker(&world, &mut root, "required").await;
    let (plain_conv, plain_cap) = worker(&world, &mut root, "capability_only").await;
    let attributed = sample(&world, &url, &attributed_conv, &attributed_cap, Ids::NewTurns, samples).await;
    let one_turn = sample(&world, &url, &attributed_conv, &attributed_cap, Ids::OneTurn, samples).await;
    let plain = sample(&world, &url, &plain_conv, &plain_cap, Ids::Unshown, samples).await;
    let (p50, p95) = summary(plain);
    println!("caller attribution: worker_progress latency, {samples} calls each (the id already in the page)");
    for (what, v) in [("each a new turn  ", attributed), ("calls of one turn", one_turn)] {
        let (a50, a95) = summary(v);
        println!(
            "  attributed, {what}: p50 {:.1} ms, p95 {:.1} ms; ratio to baseline p50 {:.1}x, p95 {:.1}x",
            a50 as f64 / 1e3,
            a95 as f64 / 1e3,
            a50 as f64 / p50.max(1) as f64,
            a95 as f64 / p95.max(1) as f64
        );
    }
    println!("  capability-only (baseline)   : p50 {:.1} ms, p95 {:.1} ms", p50 as f64 / 1e3, p95 as f64 / 1e3);
}
