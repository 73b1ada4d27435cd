//! `orchestrator canary deploy`'s serve flags: the room the gates need,
//! set or checked before the canary daemon starts.

/// Active workers a canary daemon makes room for by default: G5 scales the
/// pool to `--workers` + 2 (five for the seed's three), and a run may ask
/// up to six.
pub const ACTIVE_WORKERS: usize = 8;

/// The fewest active workers G5 can pass with: the seed's three, plus two.
pub const ACTIVE_WORKERS_MIN: usize = 5;

/// `orchestrator canary deploy`'s serve flags: `--max-active-workers`
/// [`ACTIVE_WORKERS`] unless given; refused when given too small for G5.
pub fn serve_args(mut serve_args: Vec<String>) -> anyhow::Result<Vec<String>> {
    const FLAG: &str = "--max-active-workers";
    let given = serve_args.iter().enumerate().find_map(|(i, a)| match a.strip_prefix(FLAG) {
        Some("") => Some(serve_args.get(i + 1).cloned().unwrap_or_default()),
        Some(rest) => rest.strip_prefix('=').map(str::to_owned),
        None => None,
    });
    match given.map(|v| v.parse::<usize>()) {
        None => serve_args.extend([FLAG.to_owned(), ACTIVE_WORKERS.to_string()]),
        Some(Ok(n)) if n >= ACTIVE_WORKERS_MIN => {}
        Some(_) => anyhow::bail!(
            "{FLAG} must be at least {ACTIVE_WORKERS_MIN} for the canary (G5 scales three workers to five); leave it out and deploy sets {ACTIVE_WORKERS}"
        ),
    }
    Ok(serve_args)
}

pub use crate::daemon_process::Started;

/// Starts `orchestrator serve` with `serve` as the canary daemon on
/// `state` (`crate::daemon_process::start`), logging to
/// `canary-daemon.log` and recorded in `canary.json`, so it can be
/// restarted as it was started.
pub async fn start(
    state: &std::path::Path,
    addr: std::net::SocketAddr,
    serve: &[String],
    record: serde_json::Value,
) -> anyhow::Result<Started> {
    crate::daemon_process::start(state, addr, serve, ("canary-daemon.log", "canary.json"), record).await
}

/// Restarts the canary daemon `canary deploy` started on `state` as it was
/// started (G6: the host's lifecycle, then a fresh identity to bind): the
/// one answering there is stopped (SIGTERM, within `wait`), then started
/// again with the arguments `canary.json` kept. None when `canary deploy`
/// did not start it (no arguments kept): whoever did must restart it.
pub async fn restart(state: &std::path::Path, wait: std::time::Duration) -> anyhow::Result<Option<Started>> {
    let Ok(bytes) = std::fs::read(state.join("canary.json")) else { return Ok(None) };
    let record: serde_json::Value = serde_json::from_slice(&bytes)?;
    let Some(serve) = serde_json::from_value::<Vec<String>>(record["serve"].clone()).ok() else { return Ok(None) };
    let Some(addr) =
        record["mcp_url"].as_str().and_then(|u| u.strip_prefix("http://")?.strip_suffix("/mcp")?.parse().ok())
    else {
        return Ok(None);
    };
    let running = crate::state_dir::running_endpoint(state);
    crate::canary_stop::stop_daemon(state, running.as_deref(), wait).await?;
    start(state, addr, &serve, record).await.map(Some)
}

/// Where the canary daemon listens: `given`, else the loopback port it
/// had when last deployed on `state` (the tunnel and the pairings point
/// there), else a port free now. One port, which every hint names.
pub fn listen_address(
    state: &std::path::Path,
    given: Option<std::net::SocketAddr>,
) -> anyhow::Result<std::net::SocketAddr> {
    if let Some(addr) = given {
        return Ok(addr);
    }
    let before = std::fs::read(state.join("canary.json"))
        .ok()
        .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
        .and_then(|r| r["mcp_url"].as_str().map(str::to_owned))
        .and_then(|url| url.strip_prefix("http://")?.strip_suffix("/mcp")?.parse::<std::net::SocketAddr>().ok())
        .filter(|addr| addr.ip().is_loopback());
    match before {
        Some(addr) => Ok(addr),
        None => Ok(std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?),
    }
}

/// What to do next with a canary daemon at `addr` on `state`: pair the
/// extension, or pair and start a CDP agent whose journal lives in the
/// canary's state directory (never the everyday one's), then run.
pub fn next_steps(state: &std::path::Path, addr: std::net::SocketAddr) -> String {
    let s = state.display();
    format!(
        "next: pair a carrier for it:
      the extension: orchestrator pair --state-dir {s} --listen {addr}
      a CDP agent:   orchestrator pair --state-dir {s} --listen {addr} --executor-id canary-cdp --credential-file {s}/cdp-credential
                     orchestrator carrier-agent --cdp --daemon ws://{addr}/executor --credential-file {s}/cdp-credential --state-dir {s} --channel chrome
      rehearse (fakechat): orchestrator canary run --state-dir {s} --receipts <new dir>
      live (chatgpt.com):  orchestrator canary run --state-dir {s} --receipts <new dir> --target live"
    )
}

/// What G1D refuses of a build a live run would prove: one with
/// uncommitted changes (its tree stamped `+dirty`: no commit names what
/// runs), and an executor of another build than the daemon's (its
/// `host.release`, protocol v4; one that says none is refused too). A
/// rehearsal notes the same and goes on. The reason, if refused.
pub fn build_refusal(tree: &str, daemon_release: &str, executor_releases: &[Option<String>]) -> Option<String> {
    if tree.ends_with("+dirty") {
        return Some(format!(
            "DIRTY_BUILD: the daemon was built from uncommitted changes (tree {tree}): commit, rebuild and deploy again"
        ));
    }
    let other = executor_releases.iter().find(|r| r.as_deref() != Some(daemon_release))?;
    Some(format!(
        "EXECUTOR_BUILD_MISMATCH: an executor of build {} beside daemon {daemon_release}: install the extension or agent of the daemon's bundle",
        other.as_deref().unwrap_or("(unsaid)")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_port_given_or_kept_or_free_and_the_agent_journal_in_the_canarys_state() {
        let dir = tempfile::tempdir().unwrap();
        let given: std::net::SocketAddr = "127.0.0.1:7801".parse().unwrap();
        assert_eq!(listen_address(dir.path(), Some(given)).unwrap(), given);
        let free = listen_address(dir.path(), None).unwrap();
        assert!(free.ip().is_loopback() && free.port() != 0, "{free}");
        std::fs::write(dir.path().join("canary.json"), r#"{"mcp_url": "http://127.0.0.1:7802/mcp"}"#).unwrap();
        assert_eq!(listen_address(dir.path(), None).unwrap(), "127.0.0.1:7802".parse().unwrap(), "kept");
        let steps = next_steps(dir.path(), given);
        let s = dir.path().display();
        assert!(steps.contains(&format!("--daemon ws://{given}/executor")) && !steps.contains("7777"), "{steps}");
        assert!(
            steps.contains(&format!("--state-dir {s} --channel chrome")),
            "the agent's journal is the canary's: {steps}"
        );
    }

    #[test]
    fn a_live_build_is_clean_and_its_executors_are_of_the_daemons_build() {
        let same = [Some("0.1.0".to_owned()), Some("0.1.0".to_owned())];
        assert_eq!(build_refusal("abc", "0.1.0", &same), None);
        assert!(build_refusal("abc+dirty", "0.1.0", &same).unwrap().starts_with("DIRTY_BUILD: "));
        let other = [Some("0.1.0".to_owned()), Some("0.0.9".to_owned())];
        assert!(build_refusal("abc", "0.1.0", &other).unwrap().contains("build 0.0.9 beside daemon 0.1.0"));
        assert!(build_refusal("abc", "0.1.0", &[None]).unwrap().contains("(unsaid)"));
    }

    #[test]
    fn deploy_makes_room_for_g5_and_refuses_less() {
        let args = |a: &[&str]| serve_args(a.iter().map(|s| (*s).to_owned()).collect());
        assert_eq!(args(&["--pool-pacing-ms", "40"]).unwrap(), ["--pool-pacing-ms", "40", "--max-active-workers", "8"]);
        assert_eq!(args(&["--max-active-workers", "6"]).unwrap(), ["--max-active-workers", "6"]);
        assert_eq!(args(&["--max-active-workers=12"]).unwrap(), ["--max-active-workers=12"]);
        for small in [&["--max-active-workers", "4"][..], &["--max-active-workers=2"], &["--max-active-workers"]] {
            assert!(args(small).unwrap_err().to_string().contains("at least 5"), "{small:?}");
        }
    }
}
