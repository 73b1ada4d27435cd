//! The two carriers side by side (run: `cargo bench -p server --bench
//! carriers`): for each, in one run against the same fakechat setup, the
//! time from `worker_spawn` to fakechat recording the bootstrap turn, and
//! from `worker_followup` to the wake turn, over several workers; then the
//! CDP host agent's resident memory, run as its own `orchestrator
//! carrier-agent` process, against the daemon's in the same run. The
//! extension's figures are the baseline. Prints, asserts nothing.

use std::path::Path;
use std::time::{Duration, Instant};

use mcp_client::Client;
use serde_json::{Value, json};

fn orchestrator() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_orchestrator"))
}

async fn call(root: &mut Client, tool: &str, args: Value) -> Value {
    root.call(tool, args).await.unwrap().unwrap_or_else(|e| panic!("{tool}: {e}"))
}

/// When fakechat recorded the `n`th user turn (from 0) of the conversation
/// that is not in `before`, once it did (bounded).
async fn turn_at(hub: &fakechat::hub::Hub, before: &[String], n: usize) -> (String, Instant) {
    let until = Instant::now() + Duration::from_secs(60);
    loop {
        let oracle = hub.oracle();
        let conversations = oracle["conversations"].as_object().unwrap();
        if let Some((id, c)) = conversations.iter().find(|(id, _)| !before.contains(id))
            && c["user_turns"].as_array().is_some_and(|t| t.len() > n)
        {
            return (id.clone(), Instant::now());
        }
        assert!(Instant::now() < until, "no turn {n} within 60 s");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Spawn → bootstrap turn and follow-up → wake turn, in ms, per worker.
async fn latencies(mcp_url: &str, hub: &fakechat::hub::Hub, workers: usize) -> (Vec<u64>, Vec<u64>) {
    let mut root = Client::connect(mcp_url).await.unwrap();
    let cap =
        call(&mut root, "run_create", json!({"title": "bench"})).await["root_capability"].as_str().unwrap().to_owned();
    let (mut spawn, mut wake) = (Vec::new(), Vec::new());
    for i in 0..workers {
        let before: Vec<String> = hub.oracle()["conversations"].as_object().unwrap().keys().cloned().collect();
        let assignment = json!({"objective": "Bench\nscenario: complete \"done\""});
        let started = Instant::now();
        let spawned = call(
            &mut root,
            "worker_spawn",
            json!({"capability": cap, "name": format!("w{i}"), "assignment": assignment}),
        )
        .await;
        let (conversation, at) = turn_at(hub, &before, 0).await;
        spawn.push(at.duration_since(started).as_millis() as u64);
        // The wake goes in once the first turn ended.
        let worker = spawned["worker"]["worker_id"].clone();
        let until = Instant::now() + Duration::from_secs(60);
        while hub.oracle()["conversations"][&conversation]["state"] != "idle" {
            assert!(Instant::now() < until, "the first turn never ended");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let others: Vec<String> = before.into_iter().collect();
        let started = Instant::now();
        let args =
            json!({"capability": cap, "worker_id": worker, "instructions": "again\nscenario: complete \"again\""});
        call(&mut root, "worker_followup", args).await;
        let (_, at) = turn_at(hub, &others, 1).await;
        wake.push(at.duration_since(started).as_millis() as u64);
    }
    (spawn, wake)
}

fn median(mut v: Vec<u64>) -> u64 {
    v.sort_unstable();
    v[v.len() / 2]
}

/// Resident memory of a process, in KiB.
fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    // Under `cargo test` (CI), one worker each: it runs, it is not measured.
    let workers = if std::env::args().any(|a| a == "--bench") { 5 } else { 1 };
    let world = e2e::World::start(orchestrator(), &[]).await.unwrap();
    let (ext_spawn, ext_wake) = latencies(&world.daemon.mcp_url(), &world.fake.hub, workers).await;
    world.shutdown().await;

    // The CDP agent as its own process, as an operator runs it.
    let dir = tempfile::tempdir().unwrap();
    let (daemon, fake) = e2e::daemon_and_site(orchestrator(), dir.path(), &[]).await.unwrap();
    let chromium = e2e::cdp::AuthorizedChromium::launch(fake.addr.port(), &dir.path().join("chromium")).unwrap();
    let credential = dir.path().join("bench.credential");
    daemon.credential_file(&credential).unwrap();
    let bundle = e2e::chromium_dist().unwrap().join("pkg");
    let mut agent = std::process::Command::new(orchestrator())
        .args(["carrier-agent", "--cdp", "--daemon", &daemon.executor_url()])
        .arg("--credential-file")
        .arg(&credential)
        .arg("--user-data-dir")
        .arg(&chromium.user_data_dir)
        .arg("--bundle")
        .arg(&bundle)
        .arg("--state-file")
        .arg(dir.path().join("bench-agent.json"))
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let world = (daemon, fake);
    let (cdp_spawn, cdp_wake) = latencies(&world.0.mcp_url(), &world.1.hub, workers).await;
    let (agent_rss, daemon_rss) = (rss_kib(agent.id()), rss_kib(world.0.pid()));
    let _ = agent.kill();
    let _ = agent.wait();

    let ratio = |a: u64, b: u64| a as f64 / b.max(1) as f64;
    let (es, ew, cs, cw) = (median(ext_spawn), median(ext_wake), median(cdp_spawn), median(cdp_wake));
    println!("carriers ({workers} workers each, medians; both through fakechat and the same page adapter):");
    println!("  spawn -> bootstrap turn: extension {es} ms, CDP agent {cs} ms ({:.2}x the extension)", ratio(cs, es));
    println!("  follow-up -> wake turn:  extension {ew} ms, CDP agent {cw} ms ({:.2}x the extension)", ratio(cw, ew));
    println!(
        "  resident memory: CDP agent {} MiB, daemon {} MiB in the same run ({:.2}x the daemon)",
        agent_rss / 1024,
        daemon_rss / 1024,
        ratio(agent_rss, daemon_rss)
    );
}
