//! The WebExtension executor end to end in headless Chromium: the real
//! daemon, fakechat as chatgpt.com, `dist/chromium` loaded and paired
//! through its options page. Root is the Python MCP SDK.

mod support;

use std::time::Duration;

use e2e::World;

fn orchestrator() -> &'static std::path::Path {
    std::path::Path::new(env!("CARGO_BIN_EXE_orchestrator"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rust_root_two_workers() {
    let world = World::start(orchestrator(), &[]).await.unwrap();
    let out = e2e::scenario::two_workers(&world.daemon.mcp_url(), Duration::from_secs(60)).await;
    let oracle = world.fake.hub.oracle();
    match out {
        Ok(out) => println!("{}\n{oracle:#}", out.trace.join("\n")),
        Err(e) => panic!("{e}\n{oracle:#}"),
    }
}
