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
    /// The pairing page the endpoint was typed into (not on the default port).
    pub pairing_page: Option<chromiumoxide::Page>,
}

/// The daemon's default address: the pairing page asks there by itself.
const DEFAULT_LISTEN: &str = "127.0.0.1:7777";

/// A free loopback address, or the daemon's default where the pairing
/// page asks by itself when `default_port` and no other program holds it.
pub fn listen_address(default_port: bool) -> anyhow::Result<String> {
    Ok(match default_port.then(|| std::net::TcpListener::bind(DEFAULT_LISTEN)) {
        Some(Ok(_)) => DEFAULT_LISTEN.to_owned(),
        _ => std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.to_string(),
    })
}

/// `orchestrator setup --yes` running, its lines read as it prints them.
pub struct Running {
    child: std::process::Child,
    lines_rx: std::sync::mpsc::Receiver<String>,
    /// Every line printed so far.
    pub lines: Vec<String>,
    started: Instant,
    deadline: Instant,
}

impl Running {
    /// Starts `orchestrator setup --yes --browser <browser>` with the
    /// packages in `bundle`, its state under `dir`, listening at `listen`.
    pub fn start(
        orchestrator: &Path,
        bundle: &Path,
        dir: &Path,
        browser: &str,
        listen: &str,
        extra: &[&str],
    ) -> anyhow::Result<Running> {
        let mut child = Command::new(orchestrator)
            .args(["setup", "--yes", "--browser", browser, "--wait-s", "120", "--listen", listen])
            .arg("--state-dir")
            .arg(dir.join("state"))
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
        let started = Instant::now();
        Ok(Running { child, lines_rx, lines: Vec::new(), started, deadline: started + Duration::from_secs(180) })
    }

    /// Waits for the first line starting with `prefix`, and returns it.
    pub fn line(&mut self, prefix: &str) -> anyhow::Result<String> {
        loop {
            let line = self
                .lines_rx
                .recv_timeout(self.deadline.saturating_duration_since(Instant::now()))
                .with_context(|| format!("setup never printed {prefix:?}; it printed:\n{}", self.lines.join("\n")))?;
            self.lines.push(line.clone());
            if line.starts_with(prefix) {
                return Ok(line);
            }
        }
    }

    /// Waits (3 min from the start) for setup to end: its exit code, every
    /// line, and how long it ran.
    pub async fn finish(mut self) -> anyhow::Result<(Option<i32>, Vec<String>, Duration)> {
        let status = loop {
            while let Ok(line) = self.lines_rx.try_recv() {
                self.lines.push(line);
            }
            if let Some(status) = self.child.try_wait()? {
                break status;
            }
            if Instant::now() > self.deadline {
                let _ = self.child.kill();
                anyhow::bail!("setup did not end within 3 min; it printed:\n{}", self.lines.join("\n"));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        let took = self.started.elapsed();
        // The reader thread ends with the pipe; take what it still holds.
        while let Ok(line) = self.lines_rx.recv_timeout(Duration::from_secs(2)) {
            self.lines.push(line);
        }
        Ok((status.code(), self.lines, took))
    }
}

/// Runs `orchestrator setup --yes` with the extension packages in `bundle`
/// on a fresh state directory under `dir` with fakechat at `site_port` as
/// chatgpt.com; starts Chromium on the profile setup named the package in
/// once it says so (with the pairing page it opens left open, as a person
/// would), and waits for setup to end. With `default_port` setup listens
/// where the pairing page asks by itself (unless another program holds
/// that port); otherwise on another port, whose endpoint is typed into the
/// pairing page and its button pressed, as a person would.
pub async fn setup_yes(
    orchestrator: &Path,
    bundle: &Path,
    dir: &Path,
    site_port: u16,
    default_port: bool,
    extra: &[&str],
) -> anyhow::Result<SetupRun> {
    let listen = listen_address(default_port)?;
    let profile = dir.join("chromium");
    let user_data = profile.join("profile");
    let mut args = vec!["--chromium-user-data-dir", user_data.to_str().context("a UTF-8 path")?];
    args.extend_from_slice(extra);
    let mut setup = Running::start(orchestrator, bundle, dir, "chromium", &listen, &args)?;
    // The person starts Chromium once setup named the package for it.
    let named = setup.line("  ok    extension")?;
    let id = named.split("id ").nth(1).map(|rest| rest.chars().take_while(char::is_ascii_lowercase).collect());
    let extension_id: String = id.context("setup named no extension id")?;
    let chromium = Chromium::relaunch_installed(&extension_id, site_port, &profile, false).await?;
    let pairing_page = match listen == DEFAULT_LISTEN {
        true => None,
        false => Some(chromium.pair_with_setup(&format!("ws://{listen}/executor")).await?),
    };
    let (code, lines, took) = setup.finish().await?;
    Ok(SetupRun { code, lines, took, chromium, pairing_page })
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
