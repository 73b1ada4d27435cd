//! Per-executor credentials: `orchestrator pair` issues one credential per
//! executor, bound to that executor's id. An executor proves its id with it
//! in `hello`; a credential for one id never speaks for another, so holding
//! one executor's credential cannot displace or impersonate a second.
//!
//! A credential reads `exc1.<executor id>.<64 hex>` (256 random bits). Only
//! its SHA-256 is stored, in `<state-dir>/executors` (mode 0600, one line per
//! executor: `<id> <sha256 hex> <issued ms>[ operator]`; `operator` grants
//! a person's controls over the whole pool, protocol v3's operator channel,
//! and only `pair --operator` writes it), so the file leaks nothing
//! that connects. It travels in the executor's first frame (browsers cannot
//! set WebSocket headers; URLs get logged) and is never logged by the daemon.
//! Revoking one (`pair --revoke ID`) or all (`pair --rotate`) rewrites the
//! file atomically; live sessions re-check theirs and close when it is gone.

use std::fs::{self, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use protocol::executor::{parse_credential as parse, valid_executor_id};
use sha2::{Digest, Sha256};

/// The credential format's prefix (and version).
pub const PREFIX: &str = "exc1";

/// Why the credential file could not be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Reading or writing the file failed.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The IO error.
        source: std::io::Error,
    },
    /// The file is readable by others: refuse to trust it.
    #[error("{path} is readable by others (mode {mode:o}); chmod 600 it")]
    Exposed {
        /// The file.
        path: String,
        /// Its permission bits.
        mode: u32,
    },
    /// A line of the file is not `<id> <64 hex> <ms>`.
    #[error("{path} line {line} is malformed")]
    Malformed {
        /// The file.
        path: String,
        /// The 1-based line.
        line: usize,
    },
    /// The executor id is not 1–64 of `[A-Za-z0-9_-]`.
    #[error("executor ids are 1-64 of [A-Za-z0-9_-]")]
    InvalidId,
}

/// One issued credential, as `pair --list` shows it (no secret).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Issued {
    /// The executor it speaks for.
    pub executor_id: String,
    /// When it was issued, ms since the epoch.
    pub issued_ms: u64,
    /// Whether it grants the operator channel (`pair --operator`).
    pub operator: bool,
}

/// A line of the file: id, digest, issued ms, operator grant.
type Line = (String, String, u64, bool);

/// The credential file.
#[derive(Debug, Clone)]
pub struct Credentials {
    path: PathBuf,
}

fn digest(secret: &str) -> String {
    Sha256::digest(secret.as_bytes()).iter().map(|b| format!("{b:02x}")).collect()
}

/// Equal, in time that depends on the length only.
fn same(a: &str, b: &str) -> bool {
    a.len() == b.len() && a.bytes().zip(b.bytes()).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn now_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

impl Credentials {
    /// Opens the file at `path`, creating it empty (mode 0600) if absent.
    pub fn open_or_create(path: &Path) -> Result<Self, Error> {
        let file = Self { path: path.to_owned() };
        if !path.exists() {
            file.write(&[])?;
        }
        file.read()?;
        Ok(file)
    }

    fn io(&self, source: std::io::Error) -> Error {
        Error::Io { path: self.path.display().to_string(), source }
    }

    /// Every line: `(id, digest, issued ms, operator)`. Fails closed on a
    /// file others can read or a malformed line.
    fn read(&self) -> Result<Vec<Line>, Error> {
        let mode = fs::metadata(&self.path).map_err(|e| self.io(e))?.permissions().mode();
        if mode & 0o077 != 0 {
            return Err(Error::Exposed { path: self.path.display().to_string(), mode: mode & 0o777 });
        }
        let text = fs::read_to_string(&self.path).map_err(|e| self.io(e))?;
        text.lines()
            .enumerate()
            .filter(|(_, l)| !l.trim().is_empty())
            .map(|(n, line)| {
                let malformed = || Error::Malformed { path: self.path.display().to_string(), line: n + 1 };
                let mut parts = line.split(' ');
                let (Some(id), Some(hash), Some(ms), grant, None) =
                    (parts.next(), parts.next(), parts.next(), parts.next(), parts.next())
                else {
                    return Err(malformed());
                };
                let operator = match grant {
                    None => false,
                    Some("operator") => true,
                    Some(_) => return Err(malformed()),
                };
                let ms = ms.parse().map_err(|_| malformed())?;
                let hash_ok = hash.len() == 64 && hash.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
                if !valid_executor_id(id) || !hash_ok {
                    return Err(malformed());
                }
                Ok((id.to_owned(), hash.to_owned(), ms, operator))
            })
            .collect()
    }

    fn write(&self, lines: &[Line]) -> Result<(), Error> {
        // A temporary name of this writer's own: two `pair` runs at once never
        // rename each other's half-written file into place.
        let mut nonce = [0u8; 8];
        getrandom::fill(&mut nonce).expect("the OS random source is available");
        let suffix: String = nonce.iter().map(|b| format!("{b:02x}")).collect();
        let tmp = self.path.with_extension(format!("tmp-{suffix}"));
        let mut f = OpenOptions::new().create_new(true).write(true).mode(0o600).open(&tmp).map_err(|e| self.io(e))?;
        let text: String = lines
            .iter()
            .map(|(id, hash, ms, operator)| format!("{id} {hash} {ms}{}\n", if *operator { " operator" } else { "" }))
            .collect();
        f.write_all(text.as_bytes()).and_then(|()| f.sync_all()).map_err(|e| self.io(e))?;
        fs::rename(&tmp, &self.path).map_err(|e| self.io(e))
    }

    /// Issues a credential for `executor_id`, replacing (revoking) any
    /// earlier one for that id. The credential is shown once; only its
    /// digest is kept.
    pub fn issue(&self, executor_id: &str) -> Result<String, Error> {
        self.issue_with(executor_id, false)
    }

    /// [`Self::issue`], granting the operator channel when `operator`.
    pub fn issue_with(&self, executor_id: &str, operator: bool) -> Result<String, Error> {
        if !valid_executor_id(executor_id) {
            return Err(Error::InvalidId);
        }
        let mut bytes = [0u8; 32];
        getrandom::fill(&mut bytes).expect("the OS random source is available");
        let secret: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        let mut lines: Vec<_> = self.read()?.into_iter().filter(|(id, ..)| id != executor_id).collect();
        lines.push((executor_id.to_owned(), digest(&secret), now_ms(), operator));
        self.write(&lines)?;
        Ok(format!("{PREFIX}.{executor_id}.{secret}"))
    }

    /// The executor id `credential` speaks for, if it is issued and not revoked.
    pub fn verify(&self, credential: &str) -> Option<String> {
        let (id, secret) = parse(credential)?;
        let lines = self.read().ok()?;
        let (_, hash, ..) = lines.iter().find(|(known, ..)| known == id)?;
        same(hash, &digest(secret)).then(|| id.to_owned())
    }

    /// Whether `credential` is issued and grants the operator channel.
    pub fn grants_operator(&self, credential: &str) -> bool {
        let Some((id, secret)) = parse(credential) else { return false };
        let Ok(lines) = self.read() else { return false };
        lines.iter().any(|(known, hash, _, operator)| known == id && *operator && same(hash, &digest(secret)))
    }

    /// Whether `credential` is still issued to `executor_id`: `Some(false)`
    /// once revoked or replaced, `None` when the file cannot be read right
    /// now (a live session is not closed for a passing IO error).
    pub fn still_issued(&self, credential: &str, executor_id: &str) -> Option<bool> {
        let (id, secret) = parse(credential)?;
        let lines = self.read().ok()?;
        let issued =
            lines.iter().find(|(known, ..)| known == id).is_some_and(|(_, hash, ..)| same(hash, &digest(secret)));
        Some(issued && id == executor_id)
    }

    /// Revokes `executor_id`'s credential; whether there was one.
    pub fn revoke(&self, executor_id: &str) -> Result<bool, Error> {
        let lines = self.read()?;
        let kept: Vec<_> = lines.iter().filter(|(id, ..)| id != executor_id).cloned().collect();
        let found = kept.len() != lines.len();
        if found {
            self.write(&kept)?;
        }
        Ok(found)
    }

    /// Revokes every credential: every executor must be paired again.
    pub fn revoke_all(&self) -> Result<usize, Error> {
        let n = self.read()?.len();
        self.write(&[])?;
        Ok(n)
    }

    /// The issued credentials, oldest first.
    pub fn list(&self) -> Result<Vec<Issued>, Error> {
        let mut out: Vec<Issued> = self
            .read()?
            .into_iter()
            .map(|(executor_id, _, issued_ms, operator)| Issued { executor_id, issued_ms, operator })
            .collect();
        out.sort_by_key(|i| i.issued_ms);
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_are_bound_to_one_executor_private_and_revocable_one_by_one() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("executors");
        let file = Credentials::open_or_create(&path).unwrap();
        assert_eq!(fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
        let a = file.issue("laptop").unwrap();
        let b = file.issue("desktop").unwrap();
        assert!(a.starts_with("exc1.laptop.") && a.len() == "exc1.laptop.".len() + 64);
        assert_eq!(file.verify(&a).as_deref(), Some("laptop"));
        assert_eq!(file.verify(&b).as_deref(), Some("desktop"));
        // Another id with laptop's secret, a truncated or upper-cased secret: nothing.
        assert_eq!(file.verify(&a.replace("laptop", "desktop")), None);
        assert_eq!(file.verify(&a[..a.len() - 1]), None);
        assert_eq!(file.verify(&a.to_uppercase()), None);
        assert_eq!(file.verify(""), None);
        // Only digests are stored.
        let stored = fs::read_to_string(&path).unwrap();
        assert!(!stored.contains(a.rsplit('.').next().unwrap()));
        // Re-issuing replaces; revoking one leaves the other.
        let a2 = file.issue("laptop").unwrap();
        assert_eq!(file.verify(&a), None);
        assert!(file.revoke("laptop").unwrap());
        assert_eq!(file.verify(&a2), None);
        assert_eq!(file.verify(&b).as_deref(), Some("desktop"));
        assert_eq!(file.list().unwrap().iter().map(|i| i.executor_id.as_str()).collect::<Vec<_>>(), ["desktop"]);
        // The operator channel only where `pair --operator` granted it.
        assert!(!file.grants_operator(&b));
        let op = file.issue_with("popup", true).unwrap();
        assert!(file.grants_operator(&op) && !file.grants_operator(&op.replace("popup", "desktop")));
        assert_eq!(file.list().unwrap().iter().filter(|i| i.operator).count(), 1);
        assert!(file.revoke("popup").unwrap());
        assert!(!file.grants_operator(&op));
        assert_eq!(file.revoke_all().unwrap(), 1);
        assert_eq!(file.verify(&b), None);
        assert!(file.issue("bad id").is_err());
        fs::set_permissions(&path, fs::Permissions::from_mode(0o644)).unwrap();
        assert!(Credentials::open_or_create(&path).is_err());
        assert_eq!(file.verify(&b), None);
    }
}
