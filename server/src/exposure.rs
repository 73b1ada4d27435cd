//! How ChatGPT reaches the tools: through a tunnel to the loopback daemon,
//! at a secret path. ChatGPT apps authenticate with OAuth or not at all (no
//! static header), so the secret is in the URL: `https://<tunnel host>/s/
//! <secret>/mcp`. `orchestrator expose` creates the secret in the state
//! directory (owner-only) and prints that URL; `serve` reads it (or
//! `ORCHESTRATOR_MCP_SECRET`, which wins) and refuses any extra Host without
//! one. `/executor` never answers a non-loopback Host (see `carrier_webext`).

use std::fs::OpenOptions;
use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::Path;

use anyhow::{Context, bail};

/// The secret's file in the state directory.
pub const SECRET_FILE: &str = "mcp-secret";
/// The environment variable that overrides the file.
pub const SECRET_ENV: &str = "ORCHESTRATOR_MCP_SECRET";

/// The fewest distinct characters an MCP secret may hold.
const SECRET_MIN_DISTINCT: usize = 12;
/// The least entropy an MCP secret may be estimated to carry, in bits.
const SECRET_MIN_BITS: f64 = 128.0;

/// Whether `secret` may be an MCP secret: at least 32 URL-safe characters
/// carrying real randomness (128 bits by [`estimated_bits`], at least
/// [`SECRET_MIN_DISTINCT`] distinct characters, no 12 characters twice, so
/// no repeated block either). Anyone can guess a run, a pattern or a word;
/// 32 random bytes fail with odds of about 2^-63 ([`create_secret`] draws
/// again then).
pub fn check_secret(secret: &str) -> anyhow::Result<()> {
    const MAKE_ONE: &str = "let `orchestrator expose --host <hostname>` create one, or make one with \
                            `openssl rand -base64 32 | tr '+/' '-_' | tr -d '='`";
    if secret.len() < 32 || !secret.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_') {
        bail!("the MCP secret must be at least 32 URL-safe characters [A-Za-z0-9_-]: {MAKE_ONE}");
    }
    let distinct = secret.bytes().collect::<std::collections::HashSet<_>>().len();
    let mut seen = std::collections::HashSet::new();
    let repeats = !secret.as_bytes().windows(12).all(|twelve| seen.insert(twelve));
    if distinct < SECRET_MIN_DISTINCT || repeats || estimated_bits(secret) < SECRET_MIN_BITS {
        bail!(
            "the MCP secret is guessable (runs, repeats or few distinct characters); it needs 128 random bits: {MAKE_ONE}"
        );
    }
    Ok(())
}

/// A rough entropy estimate: every character that does not just repeat or
/// step from the one before (`aaaa`, `abcd`, `4321`) counts the bits of the
/// character classes the secret draws from.
fn estimated_bits(secret: &str) -> f64 {
    let bytes = secret.as_bytes();
    let pool: u32 = [
        (bytes.iter().any(u8::is_ascii_digit), 10),
        (bytes.iter().any(u8::is_ascii_lowercase), 26),
        (bytes.iter().any(u8::is_ascii_uppercase), 26),
        (bytes.iter().any(|b| b"-_".contains(b)), 2),
    ]
    .iter()
    .filter(|(used, _)| *used)
    .map(|(_, size)| size)
    .sum();
    let fresh = bytes.len().min(1) + bytes.windows(2).filter(|pair| pair[0].abs_diff(pair[1]) > 1).count();
    fresh as f64 * f64::from(pool).log2()
}

/// The secret `serve` uses: the environment's, else the state directory's
/// ([`stored_secret`]), else none.
pub fn load_secret(state_dir: &Path) -> anyhow::Result<Option<String>> {
    if let Some(secret) = std::env::var(SECRET_ENV).ok().filter(|s| !s.is_empty()) {
        check_secret(&secret).context(SECRET_ENV)?;
        return Ok(Some(secret));
    }
    stored_secret(state_dir)
}

/// The state directory's secret, which must be owner-only.
pub fn stored_secret(state_dir: &Path) -> anyhow::Result<Option<String>> {
    let path = state_dir.join(SECRET_FILE);
    let Some(secret) = load_file_only(&path)? else { return Ok(None) };
    let mode = std::fs::metadata(&path)?.permissions().mode();
    if mode & 0o077 != 0 {
        bail!("{} is readable by others (mode {:o}); chmod 600 it", path.display(), mode & 0o777);
    }
    Ok(Some(secret))
}

/// The state directory's secret, created (owner-only) when absent or when
/// `rotate` asks for a new one.
pub fn create_secret(state_dir: &Path, rotate: bool) -> anyhow::Result<String> {
    std::fs::create_dir_all(state_dir)?;
    std::fs::set_permissions(state_dir, std::fs::Permissions::from_mode(0o700))?;
    let path = state_dir.join(SECRET_FILE);
    if !rotate && let Some(secret) = load_file_only(&path)? {
        // serve refuses a secret others can read: make it owner-only again.
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))?;
        return Ok(secret);
    }
    let secret = loop {
        let secret = random_token()?;
        if check_secret(&secret).is_ok() {
            break secret;
        }
    };
    write_private(&path, &secret)?;
    Ok(secret)
}

/// 32 random bytes, base64url (43 characters).
pub fn random_token() -> anyhow::Result<String> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).map_err(|e| anyhow::anyhow!("no randomness: {e}"))?;
    Ok(base64url(&bytes))
}

/// Replaces `path` with `text`, owner-only, atomically.
pub fn write_private(path: &Path, text: &str) -> anyhow::Result<()> {
    let fresh = path.with_extension("new");
    let _ = std::fs::remove_file(&fresh);
    let mut f = OpenOptions::new().create_new(true).write(true).mode(0o600).open(&fresh)?;
    f.write_all(text.as_bytes())?;
    f.sync_all()?;
    std::fs::rename(&fresh, path)?;
    Ok(())
}

fn load_file_only(path: &Path) -> anyhow::Result<Option<String>> {
    match std::fs::read_to_string(path) {
        Ok(text) => {
            let secret = text.trim().to_owned();
            check_secret(&secret).with_context(|| path.display().to_string())?;
            Ok(Some(secret))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e).with_context(|| format!("reading {}", path.display())),
    }
}

/// The URL to paste into ChatGPT for a tunnel reaching the daemon at `host`.
pub fn paste_url(host: &str, secret: &str) -> String {
    format!("https://{host}/s/{secret}/mcp")
}

/// The same URL with the secret elided, for banners and logs.
pub fn shown_url(host: &str) -> String {
    format!("https://{host}/s/<secret>/mcp")
}

fn base64url(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk.iter().enumerate().fold(0u32, |n, (i, b)| n | (u32::from(*b) << (16 - 8 * i)));
        for i in 0..=chunk.len() {
            out.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_created_secret_is_owner_only_kept_and_rotated_on_request() {
        let dir = tempfile::tempdir().unwrap();
        let state = dir.path().join("state");
        let first = create_secret(&state, false).unwrap();
        check_secret(&first).unwrap();
        assert_eq!(first.len(), 43);
        assert_eq!(create_secret(&state, false).unwrap(), first, "kept");
        let mode = std::fs::metadata(state.join(SECRET_FILE)).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let second = create_secret(&state, true).unwrap();
        assert_ne!(second, first, "rotated");
        std::fs::set_permissions(state.join(SECRET_FILE), std::fs::Permissions::from_mode(0o644)).unwrap();
        assert!(load_file_only(&state.join(SECRET_FILE)).is_ok());
        assert!(stored_secret(&state).is_err(), "serve refuses a secret others can read");
        assert_eq!(create_secret(&state, false).unwrap(), second, "expose keeps it and makes it owner-only again");
        assert_eq!(stored_secret(&state).unwrap(), Some(second));
    }

    /// Issue 43: a link planted where a private file goes (`canary.json`,
    /// the secret), or where its fresh copy is made, is replaced, never
    /// written through: the link's target is untouched, and the file is
    /// regular and owner-only.
    #[test]
    fn a_private_file_is_never_written_through_a_planted_link() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        std::fs::write(&victim, "theirs").unwrap();
        let path = dir.path().join("canary.json");
        std::os::unix::fs::symlink(&victim, &path).unwrap();
        std::os::unix::fs::symlink(&victim, path.with_extension("new")).unwrap();
        write_private(&path, "ours").unwrap();
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "theirs");
        let meta = std::fs::symlink_metadata(&path).unwrap();
        assert!(meta.file_type().is_file(), "a regular file, not the link");
        assert_eq!(meta.permissions().mode() & 0o777, 0o600);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "ours");
    }

    /// Issue 29 item 9b: a secret must carry real entropy. Runs, repeats
    /// and few distinct characters are refused, with how to make one; the
    /// secret `expose` creates always passes.
    #[test]
    fn a_guessable_secret_is_refused_and_a_created_one_always_passes() {
        for weak in [
            "a".repeat(32),
            "ab".repeat(16),
            "0123456789abcdef0123456789abcdef".to_owned(),
            "abcdefghijklmnopqrstuvwxyzABCDEF".to_owned(),
            "s3cr3t-0123456789abcdef0123456789abcdef".to_owned(),
            "Kq3x9Zp_Lm2Rt7Wy".repeat(2),
            "password-password-password-passw".to_owned(),
            "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaBcDeFgHiJkLmNoP"
                .to_owned(),
        ] {
            let refused = check_secret(&weak).expect_err(&weak).to_string();
            assert!(refused.contains("orchestrator expose --host") && refused.contains("openssl rand"), "{refused}");
        }
        assert!(check_secret("Vq3-hZ8rT0kLw_2nB7xYc5m").is_err(), "too short");
        assert!(check_secret("Vq3-hZ8rT0kLw_2nB7xYc5mJ9dFp4sGa1uEi6oRt8y+").is_err(), "not URL-safe");
        assert!(check_secret("Vq3-hZ8rT0kLw_2nB7xYc5mJ9dFp4sGa1uEi6oRt8yQ").is_ok());
        for _ in 0..10_000 {
            let created = random_token().unwrap();
            check_secret(&created).unwrap_or_else(|e| panic!("{created}: {e}"));
        }
    }

    #[test]
    fn base64url_matches_the_rfc_vectors() {
        assert_eq!(base64url(b"f"), "Zg");
        assert_eq!(base64url(b"fo"), "Zm8");
        assert_eq!(base64url(b"foo"), "Zm9v");
        assert_eq!(base64url(&[0xfb, 0xff]), "-_8");
    }
}
