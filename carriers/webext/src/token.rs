//! The executor pairing token: 256 random bits as 64 hex digits in
//! `<state-dir>/executor-token`, mode 0600. It is sent in the executor's
//! first frame (browsers cannot set WebSocket headers; URLs get logged), and
//! never logged by the daemon. Rotation replaces the file atomically; live
//! sessions re-check it and close when it changes.

use std::fs::{self, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};

/// The token file.
#[derive(Debug, Clone)]
pub struct TokenFile {
    path: PathBuf,
}

fn fresh_token() -> String {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).expect("the OS random source is available");
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

impl TokenFile {
    /// Opens the token file at `path`, creating it with a fresh token if absent.
    pub fn open_or_create(path: &Path) -> anyhow::Result<Self> {
        let file = Self { path: path.to_owned() };
        if !path.exists() {
            file.write(&fresh_token())?;
        }
        file.current()?;
        Ok(file)
    }

    /// The token in force now. Fails closed on a file others can read or a
    /// malformed token.
    pub fn current(&self) -> anyhow::Result<String> {
        let mode =
            fs::metadata(&self.path).with_context(|| format!("reading {}", self.path.display()))?.permissions().mode();
        if mode & 0o077 != 0 {
            bail!("{} is readable by others (mode {:o}); chmod 600 it", self.path.display(), mode & 0o777);
        }
        let token = fs::read_to_string(&self.path)?.trim().to_owned();
        if token.len() != 64 || !token.bytes().all(|b| b.is_ascii_hexdigit()) {
            bail!("{} does not hold a 64-digit hex token", self.path.display());
        }
        Ok(token)
    }

    /// Whether `given` is the token in force (constant-time over its length).
    pub fn matches(&self, given: &str) -> bool {
        let Ok(token) = self.current() else { return false };
        given.len() == token.len() && given.bytes().zip(token.bytes()).fold(0u8, |acc, (a, b)| acc | (a ^ b)) == 0
    }

    /// Replaces the token with a fresh one and returns it.
    pub fn rotate(&self) -> anyhow::Result<String> {
        let token = fresh_token();
        self.write(&token)?;
        Ok(token)
    }

    fn write(&self, token: &str) -> anyhow::Result<()> {
        let tmp = self.path.with_extension("tmp");
        let _ = fs::remove_file(&tmp);
        let mut f = OpenOptions::new().create_new(true).write(true).mode(0o600).open(&tmp)?;
        f.write_all(token.as_bytes())?;
        f.sync_all()?;
        fs::rename(&tmp, &self.path)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_created_private_checked_and_rotated() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("executor-token");
        let file = TokenFile::open_or_create(&path).unwrap();
        let first = file.current().unwrap();
        assert_eq!(first.len(), 64);
        assert_eq!(fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
        assert!(file.matches(&first));
        assert!(!file.matches(&first[..63]));
        assert!(!file.matches(""));
        let second = file.rotate().unwrap();
        assert_ne!(first, second);
        assert!(!file.matches(&first) && file.matches(&second));
        assert_eq!(TokenFile::open_or_create(&path).unwrap().current().unwrap(), second);
        fs::set_permissions(&path, fs::Permissions::from_mode(0o644)).unwrap();
        assert!(file.current().is_err() && !file.matches(&second));
    }
}
