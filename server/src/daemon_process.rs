//! A daemon started in the background by another command (`canary
//! deploy`, `setup`): its own process group (it outlives the terminal),
//! its log in the state directory, and a record of how it was started.

/// A daemon started and answering.
pub struct Started {
    /// Its process.
    pub pid: u32,
    /// Where its MCP and admin reads answer (loopback).
    pub addr: std::net::SocketAddr,
    /// Its first admin read (its deployment identity).
    pub status: crate::admin::Status,
}

/// Starts `orchestrator serve` with `serve` (its arguments after `serve`)
/// on `state`, in a process group of its own, logging to `files.0` there;
/// waits (30 s) until it answers at `addr`, then records it in `files.1`
/// (owner-only) with `record` and the arguments.
pub async fn start(
    state: &std::path::Path,
    addr: std::net::SocketAddr,
    serve: &[String],
    files: (&str, &str),
    mut record: serde_json::Value,
) -> anyhow::Result<Started> {
    use anyhow::Context;
    let log_file = state.join(files.0);
    let log = {
        use std::os::unix::fs::OpenOptionsExt;
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&log_file)?
    };
    let mut command = std::process::Command::new(std::env::current_exe()?);
    command.arg("serve").args(serve).stdin(std::process::Stdio::null()).stdout(log.try_clone()?).stderr(log);
    std::os::unix::process::CommandExt::process_group(&mut command, 0);
    let mut child = command.spawn().context("starting the daemon")?;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let status = loop {
        // A daemon that already held the directory answers too: ours must be alive.
        if let Some(exit) = child.try_wait()? {
            anyhow::bail!("the daemon exited ({exit}); see {}", log_file.display());
        }
        if let Ok(status) = crate::admin::fetch(&addr.to_string(), state).await {
            break status;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            anyhow::bail!("the daemon did not answer at {addr} within 30 s; see {}", log_file.display());
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    };
    record["pid"] = child.id().into();
    record["mcp_url"] = format!("http://{addr}/mcp").into();
    record["deployment"] = serde_json::to_value(&status.deployment)?;
    record["serve"] = serde_json::to_value(serve)?;
    // Replaced afresh, owner-only: a link planted in its place is never written through.
    crate::exposure::write_private(&state.join(files.1), &serde_json::to_string_pretty(&record)?)?;
    Ok(Started { pid: child.id(), addr, status })
}
