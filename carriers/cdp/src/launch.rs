//! The bounded fallback: a dedicated browser profile the agent starts
//! itself, only when the operator configures one explicitly. It exists for
//! hosts where no existing session can be authorized; the user's own
//! profile is never launched or relaunched with remote debugging, so a
//! directory that is any channel's default profile on this machine is
//! refused.
//!
//! The browser runs with `--remote-debugging-port=0` on that directory and
//! is reached like any authorized session, through its `DevToolsActivePort`.
//! The agent starts it when it first reaches for the browser (at its start,
//! to name it in `hello`), starts it again (at the supervisor's backoff)
//! only if it exited, waits for it at most the connect timeout, and stops
//! it (SIGTERM, then SIGKILL) when the agent stops; on Linux it also dies
//! with the agent's process.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use protocol::ErrorCode;

use crate::connect::SetupError;
use crate::discovery::{Channel, Os, active_port_file, parse_active_port, user_data_dir};

/// A dedicated profile for the agent to launch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dedicated {
    /// The browser executable (Chrome or Chromium).
    pub browser: PathBuf,
    /// The profile directory, the agent's own; created if missing.
    pub profile: PathBuf,
    /// Extra browser flags (for example `--headless=new`).
    pub args: Vec<String>,
}

/// Why a dedicated profile cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DedicatedError {
    /// The directory is a browser's default profile on this machine.
    #[error("{0} is a browser's default profile; the agent launches only a dedicated one (pick a new directory)")]
    UsersProfile(PathBuf),
    /// A flag that would change what the agent controls.
    #[error("--launch-arg {0:?} is set by the agent itself")]
    Reserved(String),
}

impl Dedicated {
    /// Checks the configuration against `home`'s default profiles (and
    /// `config_home`, `$XDG_CONFIG_HOME`), so the user's own browser
    /// profile can never be the one launched.
    pub fn check(&self, home: Option<&Path>, config_home: Option<&Path>) -> Result<(), DedicatedError> {
        if let Some(reserved) =
            self.args.iter().find(|a| a.starts_with("--user-data-dir") || a.starts_with("--remote-debugging"))
        {
            return Err(DedicatedError::Reserved(reserved.clone()));
        }
        let chosen = canonical(&self.profile);
        let defaults = [Os::MacOs, Os::Linux]
            .into_iter()
            .flat_map(|os| Channel::ALL.map(|c| (os, c)))
            .filter_map(|(os, channel)| home.map(|h| user_data_dir(os, channel, h, config_home)));
        for default in defaults {
            let default = canonical(&default);
            if chosen == default || chosen.starts_with(&default) {
                return Err(DedicatedError::UsersProfile(self.profile.clone()));
            }
        }
        Ok(())
    }
}

/// The path with symlinks resolved as far as it exists.
fn canonical(path: &Path) -> PathBuf {
    let mut existing = path.to_path_buf();
    let mut rest = Vec::new();
    while !existing.exists() {
        let Some(name) = existing.file_name().map(ToOwned::to_owned) else { break };
        rest.push(name);
        existing.pop();
    }
    let mut out = existing.canonicalize().unwrap_or(existing);
    out.extend(rest.into_iter().rev());
    out
}

/// The browser the agent launched, if it runs.
#[derive(Debug, Default)]
pub struct Launched {
    child: Option<Child>,
}

impl Launched {
    /// Makes sure the dedicated browser runs, starting it if it never did
    /// or exited, and waits at most `within` for its `DevToolsActivePort`.
    pub async fn ensure(&mut self, dedicated: &Dedicated, within: Duration) -> Result<(), SetupError> {
        if let Some(child) = &mut self.child
            && child.try_wait().ok().flatten().is_none()
        {
            return Ok(());
        }
        std::fs::create_dir_all(&dedicated.profile).map_err(|e| unavailable(format!("the dedicated profile: {e}")))?;
        // A file left by an earlier browser names a dead port.
        let file = active_port_file(&dedicated.profile);
        let _ = std::fs::remove_file(&file);
        let mut command = Command::new(&dedicated.browser);
        // On Linux the browser dies with the agent, however the agent ends
        // (an orphan would hold the profile and turn every relaunch away).
        #[cfg(target_os = "linux")]
        unsafe {
            std::os::unix::process::CommandExt::pre_exec(&mut command, || {
                nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGTERM).map_err(std::io::Error::from)
            });
        }
        let child = command
            .arg("--remote-debugging-port=0")
            .arg(format!("--user-data-dir={}", dedicated.profile.display()))
            .args(["--no-first-run", "--no-default-browser-check"])
            .args(&dedicated.args)
            .arg("about:blank")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| unavailable(format!("cannot start {}: {e}", dedicated.browser.display())))?;
        tracing::info!(pid = child.id(), profile = %dedicated.profile.display(), "started the dedicated browser");
        self.child = Some(child);
        let until = tokio::time::Instant::now() + within;
        loop {
            if std::fs::read_to_string(&file).is_ok_and(|t| parse_active_port(&t).is_ok()) {
                return Ok(());
            }
            if let Some(child) = &mut self.child
                && let Ok(Some(status)) = child.try_wait()
            {
                self.child = None;
                return Err(unavailable(format!("the dedicated browser exited at start ({status})")));
            }
            if tokio::time::Instant::now() >= until {
                self.stop().await;
                return Err(unavailable(format!(
                    "the dedicated browser wrote no DevToolsActivePort within {within:?}"
                )));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The launched browser's process id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Stops the browser: SIGTERM, then SIGKILL after five seconds.
    pub async fn stop(&mut self) {
        let Some(mut child) = self.child.take() else { return };
        if let Ok(pid) = i32::try_from(child.id()) {
            let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::Signal::SIGTERM);
        }
        for _ in 0..100 {
            if child.try_wait().ok().flatten().is_some() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let _ = child.kill();
        let _ = child.wait();
    }
}

fn unavailable(detail: String) -> SetupError {
    SetupError { code: ErrorCode::BrowserControlUnavailable, detail }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dedicated(profile: &Path, args: &[&str]) -> Dedicated {
        Dedicated {
            browser: "chromium".into(),
            profile: profile.to_owned(),
            args: args.iter().map(|a| a.to_string()).collect(),
        }
    }

    #[test]
    fn the_users_own_profile_is_never_the_dedicated_one() {
        let home = Path::new("/home/ada");
        for users in [
            "/home/ada/.config/google-chrome",
            "/home/ada/.config/chromium/Default",
            "/home/ada/Library/Application Support/Google/Chrome",
            "/home/ada/.config/google-chrome/../google-chrome-beta",
        ] {
            let refused = dedicated(Path::new(users), &[]).check(Some(home), None);
            assert!(matches!(refused, Err(DedicatedError::UsersProfile(_))), "{users}");
        }
        // $XDG_CONFIG_HOME moves Chrome's default on Linux.
        let xdg = Path::new("/data/cfg");
        assert!(dedicated(Path::new("/data/cfg/chromium"), &[]).check(Some(home), Some(xdg)).is_err());
        assert_eq!(dedicated(Path::new("/home/ada/.cache/orchestrator/profile"), &[]).check(Some(home), None), Ok(()));
        assert_eq!(
            dedicated(Path::new("/tmp/p"), &["--user-data-dir=/home/ada/.config/chromium"]).check(Some(home), None),
            Err(DedicatedError::Reserved("--user-data-dir=/home/ada/.config/chromium".into()))
        );
    }

    #[tokio::test]
    async fn a_browser_that_never_says_where_it_listens_is_stopped_within_the_bound() {
        let dir = tempfile::tempdir().unwrap();
        // A browser that starts and never writes its file.
        let browser = dir.path().join("silent-browser");
        std::fs::write(&browser, "#!/bin/sh\nexec sleep 30\n").unwrap();
        std::fs::set_permissions(&browser, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
        let d = Dedicated { browser, profile: dir.path().join("p"), args: vec![] };
        let mut launched = Launched::default();
        let started = std::time::Instant::now();
        let err = launched.ensure(&d, Duration::from_millis(300)).await.unwrap_err();
        assert_eq!(err.code, ErrorCode::BrowserControlUnavailable);
        assert!(started.elapsed() < Duration::from_secs(6), "bounded");
        assert_eq!(launched.pid(), None, "stopped, not left running");
    }
}
