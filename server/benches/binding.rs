//! App-binding cost (run: `cargo bench -p server --bench binding`): for a new
//! pool worker in headless Chromium through the extension, the time from the
//! executor acknowledging the create to fakechat recording the bootstrap
//! turn, per binding route. Baseline in the same run: the Project route,
//! where the app is inherited and binding is one read of the pill. The `+`
//! route runs after a mention popover that lists no apps. Prints, asserts
//! nothing.

use std::path::Path;
use std::time::Duration;

use e2e::World;
use mcp_client::Client;
use serde_json::{Value, json};

const PROJECT: &str = "g-p-0123456789abcdef0123456789abcdef-bench";

async fn call(root: &mut Client, tool: &str, args: Value) -> Value {
    root.call(tool, args).await.unwrap().unwrap_or_else(|e| panic!("{tool}: {e}"))
}

/// One fresh run with one pool worker: ms from the create's ack to the bootstrap turn.
async fn one(world: &World) -> u64 {
    let mut root = Client::connect(&world.daemon.mcp_url()).await.unwrap();
    let cap =
        call(&mut root, "run_create", json!({"title": "bench"})).await["root_capability"].as_str().unwrap().to_owned();
    let before: Vec<String> = world.fake.hub.oracle()["conversations"].as_object().unwrap().keys().cloned().collect();
    call(&mut root, "runtime_ensure", json!({"capability": cap, "desired_workers": 1})).await;
    for _ in 0..600 {
        let oracle = world.fake.hub.oracle();
        let fresh = oracle["conversations"].as_object().unwrap().iter().find(|(id, _)| !before.contains(id));
        if let Some((_, conversation)) = fresh {
            let submitted = conversation["user_turns"][0]["at_ms"].as_u64().unwrap();
            let events = call(&mut root, "events_list", json!({"capability": cap, "limit": 500})).await;
            let acked = events["events"]
                .as_array()
                .unwrap()
                .iter()
                .find(|e| e["type"] == "executor.command_acked")
                .and_then(|e| e["at_ms"].as_u64())
                .unwrap();
            return submitted.saturating_sub(acked);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("no bootstrap turn within 30 s");
}

async fn route(name: &str, samples: usize, args: &[&str], setup: impl Fn(&World)) -> u64 {
    let world = World::start(Path::new(env!("CARGO_BIN_EXE_orchestrator")), args).await.unwrap();
    setup(&world);
    let mut delays = Vec::new();
    for _ in 0..samples {
        delays.push(one(&world).await);
    }
    world.shutdown().await;
    delays.sort_unstable();
    let median = delays[delays.len() / 2];
    println!(
        "  {name:<9}: median {median} ms, min {} ms, max {} ms ({samples} workers)",
        delays[0],
        delays[delays.len() - 1]
    );
    median
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let quick = !std::env::args().any(|a| a == "--bench");
    let samples = if quick { 1 } else { 5 };
    println!("create ack -> bootstrap turn, per binding route");
    let project_url = format!("https://chatgpt.com/g/{PROJECT}/project");
    let base = route("project", samples, &["--worker-project-url", &project_url], |w| {
        assert!(w.fake.hub.set_project_app(PROJECT, Some(e2e::APP_LABEL)));
    })
    .await;
    let mention = route("mention", samples, &[], |_| {}).await;
    let plus = route("plus menu", samples, &[], |w| w.fake.hub.set_app_mentions(false)).await;
    let ratio = |x: u64| x as f64 / base.max(1) as f64;
    println!("  ratios to the project baseline: mention {:.2}x, plus menu {:.2}x", ratio(mention), ratio(plus));
}
