//! The demo: the two-worker scenario end to end on this machine. The real
//! daemon (`ORCHESTRATOR_BIN`, else the one beside this binary) on a temporary state dir, fakechat as
//! chatgpt.com, headless Chromium with the extension from `dist/chromium`.
//! Prints the event trace and fakechat's per-conversation turn counts.
//! `cargo xtask demo` builds everything first. It lives in the test rig, not
//! in the product: the shipped `orchestrator` links no fakechat or browser driver.

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let started = std::time::Instant::now();
    // `cargo xtask demo` names the daemon of the same dev build.
    let daemon = match std::env::var_os("ORCHESTRATOR_BIN") {
        Some(named) => std::path::PathBuf::from(named),
        None => std::env::current_exe()?.with_file_name("orchestrator"),
    };
    anyhow::ensure!(daemon.is_file(), "no orchestrator binary at {}: run `cargo xtask demo`", daemon.display());
    let world = e2e::World::start(&daemon, &[]).await?;
    println!(
        "demo: daemon {} · fakechat https://chatgpt.com -> {} · Chromium with extension {} (ready in {:.1} s)\n",
        world.daemon.addr,
        world.fake.addr,
        world.chromium.extension_id,
        started.elapsed().as_secs_f64()
    );
    let outcome = e2e::scenario::two_workers(&world.daemon.mcp_url(), std::time::Duration::from_secs(60)).await?;
    println!("event trace (root's view):");
    for line in &outcome.trace {
        println!("{line}");
    }
    println!("\nfakechat oracle, per conversation:");
    let oracle = world.fake.hub.oracle();
    for (id, conversation) in oracle["conversations"].as_object().into_iter().flatten() {
        let turns = conversation["user_turns"].as_array().map_or(0, Vec::len);
        let bootstraps =
            conversation["user_turns"].as_array().into_iter().flatten().filter(|t| t["bootstrap"] == true).count();
        let worker = outcome.bound.iter().find(|(_, c)| c == id).map_or("?", |(w, _)| w.as_str());
        let worker = if outcome.workers.first().is_some_and(|a| a == worker) { "alpha" } else { "beta" };
        println!(
            "  {id}  worker {worker}  app via {}  user turns {turns} (bootstrap {bootstraps}, wakes {})  retry clicks {}",
            conversation["binding"]["route"].as_str().unwrap_or("none"),
            turns - bootstraps,
            conversation["retry_clicks"]
        );
    }
    println!("\ndemo finished in {:.1} s", started.elapsed().as_secs_f64());
    world.shutdown().await;
    Ok(())
}
