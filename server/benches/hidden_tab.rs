//! Background-tab latency (run: `cargo bench -p server --bench hidden_tab`):
//! how long a fakechat state change in a *hidden* managed tab takes to reach
//! the daemon as a `conversation.state_changed` event (page render →
//! MutationObserver in the content script → background → WebSocket →
//! event log). Baseline in the same run: the same measurement with the tab
//! brought to the front. Target: hidden p95 ≤ 100 ms. Prints, asserts nothing.

use std::path::Path;
use std::time::Duration;

use e2e::World;
use mcp_client::Client;
use serde_json::{Value, json};

async fn call(root: &mut Client, tool: &str, args: Value) -> Value {
    root.call(tool, args).await.unwrap().unwrap_or_else(|e| panic!("{tool}: {e}"))
}

/// Toggles the conversation busy/idle `samples` times; returns each change's
/// delay until the daemon recorded it, in ms.
async fn sample(
    world: &World,
    root: &mut Client,
    cap: &str,
    cursor: &mut u64,
    conversation: &str,
    samples: usize,
) -> Vec<u64> {
    let mut delays = Vec::new();
    for i in 0..samples {
        let busy = i % 2 == 0;
        let started = fakechat::hub::now_ms();
        world.fake.hub.update(conversation, |c| c.generating = busy);
        let wanted = if busy { "generating" } else { "idle" };
        loop {
            let page =
                call(root, "events_wait", json!({"capability": cap, "after_cursor": *cursor, "timeout_ms": 5000}))
                    .await;
            *cursor = page["cursor"].as_u64().unwrap();
            let seen = page["events"]
                .as_array()
                .unwrap()
                .iter()
                .find(|e| e["type"] == "conversation.state_changed" && e["data"]["state"] == wanted);
            if let Some(event) = seen {
                delays.push(event["at_ms"].as_u64().unwrap().saturating_sub(started));
                break;
            }
        }
    }
    delays
}

fn percentile(sorted: &[u64], p: f64) -> u64 {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

fn summary(mut delays: Vec<u64>) -> (u64, u64) {
    delays.sort_unstable();
    (percentile(&delays, 0.5), percentile(&delays, 0.95))
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let quick = !std::env::args().any(|a| a == "--bench");
    let samples = if quick { 6 } else { 60 };
    let world = World::start(Path::new(env!("CARGO_BIN_EXE_orchestrator")), &[]).await.unwrap();
    let mut root = Client::connect(&world.daemon.mcp_url()).await.unwrap();
    let run = call(&mut root, "run_create", json!({"title": "hidden tab"})).await;
    let cap = run["root_capability"].as_str().unwrap().to_owned();
    let spawn = json!({"capability": cap, "name": "w", "assignment": {"objective": "idle\nscenario: complete \"ok\""}});
    let worker = call(&mut root, "worker_spawn", spawn).await["worker"]["worker_id"].as_str().unwrap().to_owned();
    let mut cursor = 0;
    let conversation = loop {
        let page =
            call(&mut root, "events_wait", json!({"capability": cap, "after_cursor": cursor, "timeout_ms": 5000}))
                .await;
        cursor = page["cursor"].as_u64().unwrap();
        let events = page["events"].as_array().unwrap();
        if events.iter().any(|e| e["type"] == "worker.completed" && e["data"]["worker_id"] == worker.as_str()) {
            break world.fake.hub.oracle()["conversations"].as_object().unwrap().keys().next().unwrap().clone();
        }
    };
    // Let the agent's turn end before measuring.
    while world.fake.hub.oracle()["conversations"][&conversation]["state"] != "idle" {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let tabs = world.fake.hub.oracle()["tabs"].clone();
    let hidden_now =
        tabs.as_object().unwrap().values().any(|t| t["conversation"] == conversation.as_str() && t["visible"] == false);
    let hidden = sample(&world, &mut root, &cap, &mut cursor, &conversation, samples).await;

    // Baseline: the same tab in front.
    let pages = world.chromium.browser.pages().await.unwrap();
    for page in pages {
        if page.url().await.ok().flatten().is_some_and(|u| u.contains(&conversation)) {
            page.bring_to_front().await.unwrap();
        }
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let visible = sample(&world, &mut root, &cap, &mut cursor, &conversation, samples).await;

    let (h50, h95) = summary(hidden);
    let (v50, v95) = summary(visible);
    println!("hidden-tab state latency ({samples} changes each; tab hidden at start: {hidden_now})");
    println!("  hidden : p50 {h50} ms, p95 {h95} ms (target p95 <= 100 ms)");
    println!("  visible: p50 {v50} ms, p95 {v95} ms (baseline)");
    println!("  ratio hidden/visible p95: {:.2}x", h95 as f64 / v95.max(1) as f64);
}
