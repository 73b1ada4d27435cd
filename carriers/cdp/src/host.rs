//! Facts about the machine the agent runs on, for `hello` and for telling
//! an operator why the browser went out of reach: its name (`nix`), and
//! whether the browser process the session belonged to still runs
//! (`sysinfo`). The agent always runs on the browser's own machine (a
//! DevTools socket is loopback only), so the browser's pid is local.

use protocol::executor::FACT_MAX;
use sysinfo::{Pid, ProcessStatus, ProcessesToUpdate, System};

/// This machine's name, as `hello`'s `host.name`; `None` if the OS gives
/// none that fits the bound.
pub fn machine_name() -> Option<String> {
    let name = nix::unistd::gethostname().ok()?.into_string().ok()?;
    (!name.is_empty() && name.len() <= FACT_MAX && !name.chars().any(char::is_control)).then_some(name)
}

/// Whether process `pid` runs (a zombie, exited but not yet reaped by its
/// parent, does not); `None` where this OS's process table cannot be read.
pub fn process_alive(pid: u32) -> Option<bool> {
    let pid = Pid::from_u32(pid);
    let mut system = System::new().ok()?;
    system.refresh_processes(ProcessesToUpdate::Some(&[pid]), true);
    Some(system.process(pid).is_some_and(|p| !matches!(p.status(), ProcessStatus::Zombie | ProcessStatus::Dead)))
}

/// What to tell the daemon when the browser connection is lost, given the
/// browser process the session was in (when DevTools named it). A browser
/// that is quitting closes DevTools before it exits, so it gets `grace` to
/// go.
pub async fn loss_detail(browser_pid: Option<u32>, grace: std::time::Duration) -> String {
    let alive = match browser_pid {
        Some(pid) => {
            let until = tokio::time::Instant::now() + grace;
            while process_alive(pid) == Some(true) && tokio::time::Instant::now() < until {
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
            process_alive(pid)
        }
        None => None,
    };
    match (browser_pid, alive) {
        (Some(pid), Some(true)) => format!(
            "the browser (pid {pid}) still runs but closed its DevTools connection (remote debugging turned off?); \
             the agent is reaching it again"
        ),
        (Some(pid), Some(false)) => {
            format!("the browser (pid {pid}) exited; the agent reaches it again once it is back")
        }
        _ => "this host's browser connection is lost; the agent is reaching it again".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_running_process_is_alive_and_a_reaped_one_is_not() {
        assert_eq!(process_alive(std::process::id()), Some(true));
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        assert_eq!(process_alive(pid), Some(false));
        let grace = std::time::Duration::from_millis(200);
        assert!(loss_detail(Some(pid), grace).await.contains("exited"));
        assert!(loss_detail(Some(std::process::id()), grace).await.contains("still runs"));
        // A zombie (killed, not yet reaped) has exited.
        let mut zombie = std::process::Command::new("sleep").arg("30").spawn().unwrap();
        zombie.kill().unwrap();
        assert!(loss_detail(Some(zombie.id()), std::time::Duration::from_secs(2)).await.contains("exited"));
        zombie.wait().unwrap();
    }

    #[test]
    fn the_machine_has_a_bounded_name() {
        let name = machine_name().expect("a host name");
        assert!(!name.is_empty() && name.len() <= FACT_MAX);
    }
}
