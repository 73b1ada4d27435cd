//! The state directory: `state.db` (SQLite), `server-secret` (the keyring
//! secret, mode 0600), `lock` (held for the daemon's lifetime so two
//! daemons never share one store) and `daemon-endpoint` (where the daemon
//! holding the lock serves MCP, so `mcp-stdio` can relay to it).

use std::fs::{self, File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use control::Keyring;
use control::keys::SECRET_LEN;

/// An opened, locked state directory.
pub struct StateDir {
    path: PathBuf,
    _lock: File,
}

impl StateDir {
    /// The default location: `$XDG_STATE_HOME/chatgpt-orchestrator`, else
    /// `~/.local/state/chatgpt-orchestrator`.
    pub fn default_path() -> anyhow::Result<PathBuf> {
        if let Some(dir) = std::env::var_os("XDG_STATE_HOME").filter(|v| !v.is_empty()) {
            return Ok(PathBuf::from(dir).join("chatgpt-orchestrator"));
        }
        let home = std::env::var_os("HOME").context("neither XDG_STATE_HOME nor HOME is set; pass --state-dir")?;
        Ok(PathBuf::from(home).join(".local/state/chatgpt-orchestrator"))
    }

    /// Whether `dir` is, or would be once created, the everyday state
    /// directory ([`StateDir::default_path`]): both resolved as the file
    /// system will resolve them, links and `..` included, whether they exist
    /// yet or not (nothing is created here). The canary never runs there.
    pub fn is_everyday(dir: &Path) -> anyhow::Result<bool> {
        let Ok(everyday) = StateDir::default_path() else { return Ok(false) };
        Ok(resolved(dir)? == resolved(&std::path::absolute(everyday)?)?)
    }

    /// Creates (mode 0700) and locks the directory. Fails if another daemon
    /// holds it.
    pub fn open(path: &Path) -> anyhow::Result<Self> {
        fs::create_dir_all(path).with_context(|| format!("creating state dir {}", path.display()))?;
        fs::set_permissions(path, fs::Permissions::from_mode(0o700))?;
        let lock = OpenOptions::new().create(true).truncate(false).write(true).mode(0o600).open(path.join("lock"))?;
        if lock.try_lock().is_err() {
            bail!("state dir {} is in use by another orchestrator process", path.display());
        }
        Ok(Self { path: path.to_owned(), _lock: lock })
    }

    /// Where the SQLite database lives.
    pub fn database(&self) -> PathBuf {
        self.path.join("state.db")
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Records where this daemon serves MCP (`http://127.0.0.1:P/mcp`), for
    /// the `mcp-stdio` relay. Owner-only like the rest of the directory.
    pub fn record_endpoint(&self, mcp_url: &str) -> anyhow::Result<()> {
        crate::exposure::write_private(&self.path.join(ENDPOINT_FILE), mcp_url)
    }

    /// Forgets the recorded endpoint (on a clean stop).
    pub fn forget_endpoint(&self) {
        let _ = fs::remove_file(self.path.join(ENDPOINT_FILE));
    }

    /// The daemon's keyring, created with a fresh secret on first start.
    pub fn keyring(&self) -> anyhow::Result<Keyring> {
        let secret = read_or_create_secret(&self.path.join("server-secret"))?;
        Ok(Keyring::new(secret))
    }
}

const ENDPOINT_FILE: &str = "daemon-endpoint";

/// The MCP URL of the daemon serving `path`, if one holds its lock and
/// recorded where it listens; `None` when no daemon runs there.
pub fn running_endpoint(path: &Path) -> Option<String> {
    let lock = OpenOptions::new().write(true).open(path.join("lock")).ok()?;
    if lock.try_lock().is_ok() {
        // Nobody holds it: a recorded endpoint is a crashed daemon's.
        return None;
    }
    let url = fs::read_to_string(path.join(ENDPOINT_FILE)).ok()?;
    Some(url.trim().to_owned()).filter(|u| u.starts_with("http://"))
}

/// Reads a hex secret file, creating it (0600) with fresh random bytes if absent.
pub fn read_or_create_secret(path: &Path) -> anyhow::Result<[u8; SECRET_LEN]> {
    match File::open(path) {
        Ok(mut f) => {
            let mode = f.metadata()?.permissions().mode();
            if mode & 0o077 != 0 {
                bail!("{} is readable by others (mode {:o}); chmod 600 it", path.display(), mode & 0o777);
            }
            let mut text = String::new();
            f.read_to_string(&mut text)?;
            parse_secret(text.trim()).with_context(|| format!("{} does not hold a 64-digit hex secret", path.display()))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let keys = Keyring::generate();
            let mut f = OpenOptions::new().create_new(true).write(true).mode(0o600).open(path)?;
            let hex: String = keys.secret().iter().map(|b| format!("{b:02x}")).collect();
            f.write_all(hex.as_bytes())?;
            f.sync_all()?;
            Ok(*keys.secret())
        }
        Err(e) => Err(e).with_context(|| format!("reading {}", path.display())),
    }
}

fn parse_secret(text: &str) -> Option<[u8; SECRET_LEN]> {
    if text.len() != SECRET_LEN * 2 {
        return None;
    }
    let mut out = [0u8; SECRET_LEN];
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(text.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(out)
}

/// An absolute path as the file system resolves it: its nearest existing
/// ancestor canonicalised (links followed), the rest applied after it by
/// its text (components that do not exist yet can be no links).
fn resolved(path: &Path) -> anyhow::Result<PathBuf> {
    let mut existing = path.to_path_buf();
    let mut rest = Vec::new();
    while fs::symlink_metadata(&existing).is_err() {
        let Some(last) = existing.components().next_back() else { bail!("{} cannot be resolved", path.display()) };
        rest.push(last.as_os_str().to_os_string());
        if !existing.pop() {
            bail!("{} cannot be resolved", path.display());
        }
    }
    let mut base = fs::canonicalize(&existing)?;
    for name in rest.into_iter().rev() {
        if name == ".." {
            base.pop();
        } else if name != "." {
            base.push(name);
        }
    }
    Ok(base)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_daemon_cannot_open_a_locked_state_dir() {
        let dir = tempfile::tempdir().unwrap();
        let first = StateDir::open(dir.path()).unwrap();
        let err = StateDir::open(dir.path()).err().unwrap();
        assert!(err.to_string().contains("in use"), "{err}");
        drop(first);
        StateDir::open(dir.path()).unwrap();
    }

    #[test]
    fn the_endpoint_is_the_lock_holders_only() {
        let dir = tempfile::tempdir().unwrap();
        let state = StateDir::open(dir.path()).unwrap();
        assert_eq!(running_endpoint(dir.path()), None, "nothing recorded yet");
        state.record_endpoint("http://127.0.0.1:7777/mcp").unwrap();
        assert_eq!(running_endpoint(dir.path()).as_deref(), Some("http://127.0.0.1:7777/mcp"));
        drop(state);
        assert_eq!(running_endpoint(dir.path()), None, "a record without a lock holder is stale");
    }

    #[test]
    fn the_secret_is_created_once_owner_only_and_reused() {
        let dir = tempfile::tempdir().unwrap();
        let state = StateDir::open(dir.path()).unwrap();
        let a = state.keyring().unwrap();
        let b = state.keyring().unwrap();
        assert_eq!(a.secret(), b.secret());
        let mode = fs::metadata(dir.path().join("server-secret")).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        fs::set_permissions(dir.path().join("server-secret"), fs::Permissions::from_mode(0o644)).unwrap();
        assert!(state.keyring().is_err());
    }
}
