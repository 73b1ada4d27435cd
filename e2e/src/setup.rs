//! `orchestrator setup --yes` driven as a first-time person runs it (issue
//! 46): a fresh state directory, the extension's package from the bundle
//! as `cargo xtask dist` packs it, Chromium started by the person once
//! setup says so, fakechat as chatgpt.com. Only the binary's own output and
//! the browser's own pages are read.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::Context;

use crate::Chromium;

/// What a setup run printed and how long it took.
pub struct SetupRun {
    /// Its exit code.
    pub code: Option<i32>,
    /// Every line it printed.
    pub lines: Vec<String>,
    /// From its start to its exit.
    pub took: Duration,
    /// The browser it installed into, still running.
    pub chromium: Chromium,
}

/// The daemon's default address: the pairing page asks there by itself.
const DEFAULT_LISTEN: &str = "127.0.0.1:7777";

/// Runs `orchestrator setup --yes` with the extension packages in `bundle`
/// on a fresh state directory under `dir`
/// with fakechat at `site_port` as chatgpt.com; starts Chromium on the
/// profile setup named the package in once it says so (with the pairing
/// page it opens left open, as a person would), and waits (3 min) for
/// setup to end. With `default_port` setup listens where the pairing page
/// asks by itself (unless another program holds that port); otherwise on
/// another port, whose endpoint is typed into the pairing page and its
/// button pressed, as a person would.
pub async fn setup_yes(
    orchestrator: &Path,
    bundle: &Path,
    dir: &Path,
    site_port: u16,
    default_port: bool,
    extra: &[&str],
) -> anyhow::Result<SetupRun> {
    let listen = match default_port.then(|| std::net::TcpListener::bind(DEFAULT_LISTEN)) {
        Some(Ok(_)) => DEFAULT_LISTEN.to_owned(),
        _ => std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.to_string(),
    };
    let state = dir.join("state");
    let profile = dir.join("chromium");
    let started = Instant::now();
    let mut child = Command::new(orchestrator)
        .args(["setup", "--yes", "--browser", "chromium", "--wait-s", "120", "--listen", &listen])
        .arg("--state-dir")
        .arg(&state)
        .arg("--chromium-user-data-dir")
        .arg(profile.join("profile"))
        .arg("--bundle")
        .arg(bundle)
        .args(extra)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .context("starting `orchestrator setup`")?;
    let (lines_tx, lines_rx) = std::sync::mpsc::channel();
    let stdout = child.stdout.take().context("setup's stdout")?;
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            eprintln!("setup| {line}");
            if lines_tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut lines = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(180);
    // The person starts Chromium once setup named the package for it.
    let extension_id = loop {
        let line = lines_rx.recv_timeout(deadline.saturating_duration_since(Instant::now())).with_context(|| {
            format!("setup never said the extension was named for Chromium; it printed:\n{}", lines.join("\n"))
        })?;
        let id = line.starts_with("  ok    extension").then(|| line.split("id ").nth(1)).flatten();
        let id = id.map(|rest| rest.chars().take_while(char::is_ascii_lowercase).collect::<String>());
        lines.push(line);
        if let Some(id) = id {
            break id;
        }
    };
    let chromium = Chromium::relaunch_installed(&extension_id, site_port, &profile, false).await?;
    if listen != DEFAULT_LISTEN {
        chromium.pair_with_setup(&format!("ws://{listen}/executor")).await?;
    }
    let status = loop {
        while let Ok(line) = lines_rx.try_recv() {
            lines.push(line);
        }
        if let Some(status) = child.try_wait()? {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            anyhow::bail!("setup did not end within 3 min; it printed:\n{}", lines.join("\n"));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let took = started.elapsed();
    // The reader thread ends with the pipe; take what it still holds.
    while let Ok(line) = lines_rx.recv_timeout(Duration::from_secs(2)) {
        lines.push(line);
    }
    Ok(SetupRun { code: status.code(), lines, took, chromium })
}

/// Stops the daemon a setup started on its state directory when dropped
/// (its pid in `setup.json`), however the test ends.
pub struct StopDaemon(pub PathBuf);

impl Drop for StopDaemon {
    fn drop(&mut self) {
        let _ = stop_daemon(&self.0);
    }
}

/// Stops the daemon a setup started on `state` (its pid in `setup.json`).
fn stop_daemon(state: &Path) -> anyhow::Result<()> {
    let record: serde_json::Value = serde_json::from_slice(&std::fs::read(state.join("setup.json"))?)?;
    let pid = record["pid"].as_u64().context("setup.json names no pid")?;
    let _ = Command::new("kill").arg(pid.to_string()).status();
    for _ in 0..100 {
        if !PathBuf::from(format!("/proc/{pid}")).exists() {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
    Ok(())
}
