//! The CDP carrier end to end: the real daemon, fakechat as chatgpt.com,
//! a headless Chromium the test started with remote debugging on a fresh
//! profile (standing in for a session its user authorized), and the CDP
//! host agent driving it through exact targets with the extension's own
//! page adapter.

mod support;

use std::time::Duration;

use e2e::cdp::CdpWorld;
use serde_json::Value;

fn orchestrator() -> &'static std::path::Path {
    std::path::Path::new(env!("CARGO_BIN_EXE_orchestrator"))
}

fn conversations(oracle: &Value) -> serde_json::Map<String, Value> {
    oracle["conversations"].as_object().cloned().unwrap_or_default()
}

/// The two-worker flow through the CDP carrier: each worker gets its own
/// target and conversation, bootstraps once, talks to root, and the
/// follow-up wakes the same conversation.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_workers_through_exact_targets_and_every_prompt_lands_once() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
    let world = CdpWorld::start(orchestrator(), &[]).await.unwrap();
    let out = e2e::scenario::two_workers(&world.daemon.mcp_url(), Duration::from_secs(60))
        .await
        .unwrap_or_else(|e| panic!("{e:#}\n{:#}", world.fake.hub.oracle()));
    eprintln!("{}", out.trace.join("\n"));
    let oracle = world.fake.hub.oracle();
    let conversations = conversations(&oracle);
    assert_eq!(conversations.len(), 2, "{oracle:#}");
    let turns: Vec<usize> = conversations.values().map(|c| c["user_turns"].as_array().map_or(0, Vec::len)).collect();
    let mut sorted = turns.clone();
    sorted.sort();
    assert_eq!(sorted, [1, 2], "B: its bootstrap; A: its bootstrap and the wake: {oracle:#}");
    assert_eq!(world.agent.targets().len(), 2);
}
