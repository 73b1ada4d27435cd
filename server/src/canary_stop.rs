//! Stopping the canary (issue 45, hazard 1). Ctrl-C or SIGTERM mid-gate:
//! the runner writes that gate's receipt as stopped by the operator and
//! retires the runs it started (their pools stopped, then each run
//! cancelled, its unfinished workers and their queued commands with it).
//! `orchestrator canary stop` from another terminal: it signals the runner
//! holding the state directory's run lock, waits for it to end, then
//! retires every run the canary started there and has not retired (G5
//! leaves two parked workers by design).
//!
//! Each run's root capability is kept in the canary's state directory
//! (`canary-runs.json`, owner-only, as the daemon's own secrets are) from
//! its creation until it is retired: without it nobody could stop its pool.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::time::Duration;

use anyhow::Context;
use serde::{Deserialize, Serialize};
use serde_json::json;

/// Held by a running `canary run` for its life; holds its process id.
pub const RUN_LOCK: &str = "canary-run.lock";
/// The runs the canary started and has not retired.
pub const RUNS_FILE: &str = "canary-runs.json";
/// What a gate stopped by the operator says.
pub const STOPPED_BY_OPERATOR: &str = "STOPPED_BY_OPERATOR";

/// A run the canary started: its id and root capability.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CanaryRun {
    pub run_id: String,
    pub capability: String,
}

/// The run lock, held while a `canary run` lives (released with the file,
/// its pid cleared first so no later reader takes it for a live runner).
#[derive(Debug)]
pub struct RunLock(File);

impl Drop for RunLock {
    fn drop(&mut self) {
        let _ = self.0.set_len(0);
    }
}

impl RunLock {
    /// Takes the state directory's run lock and writes this process's id
    /// into it; refused while another `canary run` holds it.
    pub fn take(state_dir: &Path) -> anyhow::Result<RunLock> {
        let path = state_dir.join(RUN_LOCK);
        let mut file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .mode(0o600)
            .open(&path)
            .with_context(|| format!("{}: is it the canary's state directory?", path.display()))?;
        if file.try_lock().is_err() {
            anyhow::bail!(
                "a canary run already runs on {}: `orchestrator canary stop --state-dir {}` ends it",
                state_dir.display(),
                state_dir.display()
            );
        }
        file.set_len(0)?;
        write!(file, "{}", std::process::id())?;
        Ok(RunLock(file))
    }
}

/// The process holding the run lock, if a `canary run` holds it: the pid
/// it wrote, taken only if the lock is really held (not merely
/// unsupported) and that process is an `orchestrator canary run`.
fn runner_pid(state_dir: &Path) -> Option<u32> {
    let file = OpenOptions::new().write(true).open(state_dir.join(RUN_LOCK)).ok()?;
    match file.try_lock() {
        Err(std::fs::TryLockError::WouldBlock) => {}
        _ => return None,
    }
    let pid: u32 = std::fs::read_to_string(state_dir.join(RUN_LOCK)).ok()?.trim().parse().ok()?;
    let args = process_args(pid)?;
    (args.contains(" canary run ") && pid > 1 && pid != std::process::id()).then_some(pid)
}

/// A process's command line as `ps` shows it (space-separated, padded), if it lives.
fn process_args(pid: u32) -> Option<String> {
    let out = std::process::Command::new("ps").args(["-o", "args=", "-p", &pid.to_string()]).output().ok()?;
    let args = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    (out.status.success() && !args.is_empty()).then(|| format!(" {args} "))
}

/// The runs kept in `state_dir` (none when the file is absent).
pub fn remembered(state_dir: &Path) -> anyhow::Result<Vec<CanaryRun>> {
    match std::fs::read(state_dir.join(RUNS_FILE)) {
        Ok(bytes) => serde_json::from_slice(&bytes).with_context(|| format!("{RUNS_FILE} is not the canary's")),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(e.into()),
    }
}

/// Keeps `runs` as the state directory's runs (owner-only, replaced whole:
/// a crash leaves the old list or the new one).
fn keep(state_dir: &Path, runs: &[CanaryRun]) -> anyhow::Result<()> {
    let path = state_dir.join(RUNS_FILE);
    if runs.is_empty() {
        return match std::fs::remove_file(&path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e.into()),
            _ => Ok(()),
        };
    }
    crate::exposure::write_private(&path, &serde_json::to_string_pretty(runs)?)
}

/// Adds a run the canary just started.
pub fn remember(state_dir: &Path, run: CanaryRun) -> anyhow::Result<()> {
    let mut runs = remembered(state_dir)?;
    runs.push(run);
    keep(state_dir, &runs)
}

/// Retires `runs`: each one's pool stopped (`runtime_stop`), then the run
/// cancelled (`run_cancel`); each one retired is forgotten. A run the
/// daemon no longer knows, or already ended, counts as retired; every call
/// is bounded (30 s). What was done, a line per run, and whether every run
/// was retired.
pub async fn retire(client: &mut mcp_client::Client, state_dir: &Path, runs: &[CanaryRun]) -> (Vec<String>, bool) {
    const CALL: Duration = Duration::from_secs(30);
    let mut said = Vec::new();
    let mut all = true;
    for run in runs {
        let cap = json!({"capability": run.capability});
        let stopped = tokio::time::timeout(CALL, client.call("runtime_stop", cap.clone())).await;
        let reason = json!({"capability": run.capability, "reason": "the canary was stopped"});
        let cancelled = tokio::time::timeout(CALL, client.call("run_cancel", reason)).await;
        type Called = Result<
            Result<Result<serde_json::Value, mcp_client::ToolError>, mcp_client::Error>,
            tokio::time::error::Elapsed,
        >;
        let done = |r: &Called| match r {
            Ok(Ok(Ok(_))) => Ok(()),
            // Already over, or a run this daemon never had (another deployment's).
            Ok(Ok(Err(e))) if ["RUN_NOT_ACTIVE", "NOT_FOUND", "UNAUTHORIZED"].contains(&e.code.as_str()) => Ok(()),
            Ok(Ok(Err(e))) => Err(e.code.clone()),
            Ok(Err(e)) => Err(e.to_string()),
            Err(_) => Err(format!("no answer within {CALL:?}")),
        };
        match (done(&stopped), done(&cancelled)) {
            (Ok(()), Ok(())) => {
                if let Ok(mut left) = remembered(state_dir) {
                    left.retain(|r| r.run_id != run.run_id);
                    let _ = keep(state_dir, &left);
                }
                said.push(format!("{}: pool stopped, run cancelled", run.run_id));
            }
            (a, b) => {
                all = false;
                said.push(format!("{}: not retired ({:?}, {:?}); run `canary stop` again", run.run_id, a, b));
            }
        }
    }
    (said, all)
}

/// After the operator stopped `canary run` mid-gate: retires the runs this
/// invocation `started`, saying each on stderr; a second Ctrl-C meanwhile
/// ends the process (`canary stop` retires the rest).
pub async fn after_interrupt(
    client: &mut mcp_client::Client,
    state_dir: &Path,
    started: &[String],
) -> anyhow::Result<()> {
    tokio::spawn(async {
        operator_stop().await;
        eprintln!("canary: stopped again: exiting; `orchestrator canary stop` retires what is left");
        std::process::exit(130);
    });
    let mine: Vec<_> = remembered(state_dir)?.into_iter().filter(|r| started.contains(&r.run_id)).collect();
    for line in retire(client, state_dir, &mine).await.0 {
        eprintln!("canary: {line}");
    }
    Ok(())
}

/// Stops the daemon answering at `mcp_url` on `state_dir` (SIGTERM to the
/// pid its admin read names, once that pid is this state directory's
/// `orchestrator serve`), waiting up to `wait` for it to end; its pid, or
/// none when nothing answers there.
pub async fn stop_daemon(state_dir: &Path, mcp_url: Option<&str>, wait: Duration) -> anyhow::Result<Option<u32>> {
    let Some(url) = mcp_url else { return Ok(None) };
    let status = crate::admin::fetch(&crate::admin::authority_of(url), state_dir).await?;
    let pid = status.deployment.as_ref().map(|d| d.pid).filter(|p| *p > 1).context("the daemon names no pid")?;
    let state = std::path::absolute(state_dir)?;
    let args = process_args(pid).unwrap_or_default();
    anyhow::ensure!(
        args.contains(" serve ") && args.contains(&format!(" {} ", state.display())),
        "pid {pid} is not this state directory's `orchestrator serve` ({}): stop it yourself",
        args.trim()
    );
    let sent = std::process::Command::new("kill").args(["-TERM", &pid.to_string()]).status()?;
    anyhow::ensure!(sent.success(), "kill -TERM {pid}");
    let deadline = std::time::Instant::now() + wait;
    while crate::state_dir::running_endpoint(state_dir).is_some() {
        anyhow::ensure!(std::time::Instant::now() < deadline, "the canary daemon (pid {pid}) did not stop in {wait:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok(Some(pid))
}

/// Resolves when the operator asks the run to stop: Ctrl-C (SIGINT) or SIGTERM.
pub async fn operator_stop() {
    let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(term) => term,
        Err(_) => return std::future::pending().await,
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}

/// `orchestrator canary stop`: ends the `canary run` on `state_dir`, if one
/// runs (SIGTERM, then up to `wait` for it to end), then retires every run
/// the canary started there through the daemon at `mcp_url`, if one runs.
pub async fn stop(state_dir: &Path, mcp_url: Option<&str>, wait: Duration) -> anyhow::Result<Vec<String>> {
    let mut said = Vec::new();
    if let Some(pid) = runner_pid(state_dir) {
        let status = std::process::Command::new("kill").args(["-TERM", &pid.to_string()]).status()?;
        anyhow::ensure!(status.success(), "kill -TERM {pid}");
        let deadline = std::time::Instant::now() + wait;
        while runner_pid(state_dir).is_some() {
            anyhow::ensure!(
                std::time::Instant::now() < deadline,
                "the canary run (pid {pid}) did not end within {wait:?}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        said.push(format!("the canary run (pid {pid}) stopped"));
    }
    // Held while retiring: no new run starts (and remembers a run) meanwhile.
    let _held = RunLock::take(state_dir)?;
    let runs = remembered(state_dir)?;
    match (mcp_url, runs.is_empty()) {
        (_, true) => said.push("no canary run left to retire".into()),
        (None, false) => anyhow::bail!(
            "{} canary runs are not retired and no daemon runs on {}: start it (`canary deploy`) and stop again",
            runs.len(),
            state_dir.display()
        ),
        (Some(url), false) => {
            let secret = crate::exposure::load_secret(state_dir)?;
            let mut client = mcp_client::Client::connect_bearing(url, secret.as_deref()).await?;
            let (lines, all) = retire(&mut client, state_dir, &runs).await;
            said.extend(lines);
            anyhow::ensure!(all, "{}", said.join("\n"));
        }
    }
    Ok(said)
}

/// `orchestrator canary teardown`: what `canary stop` does, then every
/// carrier's credential revoked (a CDP agent or an extension still paired
/// can no longer connect), the MCP secret rotated (the URL pasted into
/// ChatGPT stops working even if the daemon starts again), and the daemon
/// stopped: SIGTERM to the pid the daemon answering the admin read (with
/// this state directory's admin token) names, once `ps` shows it is an
/// `orchestrator serve` of this state directory; then its lock awaited.
/// Nothing is revoked or stopped while a run is left unretired. What it
/// did, and last what only the person can undo.
pub async fn teardown(state_dir: &Path, wait: Duration) -> anyhow::Result<Vec<String>> {
    let mcp_url = crate::state_dir::running_endpoint(state_dir);
    let mut said = stop(state_dir, mcp_url.as_deref(), wait).await?;
    let credentials = carrier_webext::Credentials::open_or_create(&state_dir.join("executors"))?;
    said.push(format!("carriers revoked: {}", credentials.revoke_all()?));
    if crate::exposure::stored_secret(state_dir)?.is_some() {
        crate::exposure::create_secret(state_dir, true)?;
        said.push("MCP secret rotated: the URL given to ChatGPT no longer works".into());
    }
    if let Some(pid) = stop_daemon(state_dir, mcp_url.as_deref(), wait).await? {
        said.push(format!("the canary daemon (pid {pid}) stopped"));
    }
    let label = std::fs::read(state_dir.join("canary.json"))
        .ok()
        .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
        .and_then(|r| r["app_label"].as_str().map(str::to_owned));
    said.push(format!(
        "left for you: delete the app {} in ChatGPT (Settings → Apps), stop the tunnel you pointed at it, and stop \
         any CDP agent you started for it (its credential is revoked); the canary's conversations stay in your history",
        label.map_or("you created for the canary".to_owned(), |l| format!("{l:?}"))
    ));
    Ok(said)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_are_kept_owner_only_and_forgotten_when_none_is_left() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(remembered(dir.path()).unwrap(), []);
        let run = |id: &str| CanaryRun { run_id: id.into(), capability: format!("cap-{id}") };
        remember(dir.path(), run("a")).unwrap();
        remember(dir.path(), run("b")).unwrap();
        assert_eq!(remembered(dir.path()).unwrap(), [run("a"), run("b")]);
        let mode = std::fs::metadata(dir.path().join(RUNS_FILE)).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        keep(dir.path(), &[]).unwrap();
        assert!(!dir.path().join(RUNS_FILE).exists());
    }

    #[test]
    fn one_runner_holds_the_lock_names_itself_and_clears_its_name() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(runner_pid(dir.path()), None);
        let held = RunLock::take(dir.path()).unwrap();
        let written = std::fs::read_to_string(dir.path().join(RUN_LOCK)).unwrap();
        assert_eq!(written, std::process::id().to_string());
        assert!(RunLock::take(dir.path()).unwrap_err().to_string().contains("canary stop"));
        // Held, but by a process that is no `orchestrator canary run`: never signalled.
        assert_eq!(runner_pid(dir.path()), None);
        drop(held);
        assert_eq!(std::fs::read_to_string(dir.path().join(RUN_LOCK)).unwrap(), "", "no stale pid left");
    }
}
