//! What the agent takes from its operator before it dials anything: the
//! credential file `orchestrator pair` wrote, and the daemon's executor
//! endpoint. Both are checked here, before the credential leaves the
//! process: a credential sent to a wrong URL, or kept where others read
//! it, speaks for this executor to whoever gets it.

use std::path::Path;

/// Why the agent refuses to start.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum Error {
    /// The credential file cannot be read.
    #[error("cannot read {file}: {why}")]
    Unreadable { file: String, why: String },
    /// Other users can read (or write) the credential file.
    #[error(
        "{file} is readable by others (mode {mode:o}): the credential speaks for this executor; chmod 600 it, or \
         write it with `orchestrator pair --executor-id ID --credential-file FILE`"
    )]
    Exposed { file: String, mode: u32 },
    /// The file holds neither a credential nor `pair`'s output.
    #[error(
        "{file} holds no executor credential (expected what `orchestrator pair --executor-id ID --credential-file \
         FILE` writes, or `pair`'s printed output)"
    )]
    NoCredential { file: String },
    /// `--daemon` is neither a loopback `ws://…/executor` URL nor a
    /// `wss://HOST:PORT/executor` one.
    #[error(
        "--daemon {url:?} is not the daemon's executor endpoint: it must be ws://127.0.0.1:PORT/executor (or \
         localhost, [::1]) on the daemon's machine, or wss://HOST:PORT/executor from another one (the daemon's \
         `serve --executor-listen`)"
    )]
    DaemonUrl { url: String },
    /// A remote `--daemon` with a credential that pins no certificate.
    #[error(
        "--daemon {url:?} is a remote endpoint, and the credential file pins no certificate for it: write the \
         credential with `orchestrator pair --executor-id ID --remote HOST:PORT --credential-file FILE` on the \
         daemon's machine and copy that file here"
    )]
    Unpinned { url: String },
    /// The credential file's pin is not of the form `pair --remote` writes.
    #[error("{file}: its \"fingerprint\" is not sha256:<64 hex> as `orchestrator pair --remote` writes it")]
    BadPin { file: String },
}

/// A credential and the executor id it was issued for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Credential {
    /// The secret sent in `hello`.
    pub token: String,
    /// The id `orchestrator pair --executor-id` named.
    pub executor_id: String,
    /// The remote endpoint's certificate, as `pair --remote` pinned it.
    pub pin: Option<executor_tls::Pin>,
}

/// Reads `file`, which must be owner-only, and finds the credential in it:
/// the bare credential (`pair --credential-file`), `pair --json`'s document,
/// or `pair`'s printed text (its `credential:` line).
pub fn read_credential(file: &Path) -> Result<Credential, Error> {
    let name = file.display().to_string();
    let unreadable = |e: std::io::Error| Error::Unreadable { file: name.clone(), why: e.to_string() };
    let metadata = std::fs::metadata(file).map_err(unreadable)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = metadata.permissions().mode() & 0o777;
        if mode & 0o077 != 0 {
            return Err(Error::Exposed { file: name, mode });
        }
    }
    // A credential is ~90 bytes and pair's text about 1 KiB: anything far
    // larger is not pair's output.
    if metadata.len() > 64 << 10 {
        return Err(Error::NoCredential { file: name });
    }
    let text = std::fs::read_to_string(file).map_err(unreadable)?;
    let pinned =
        serde_json::from_str::<serde_json::Value>(text.trim()).ok().and_then(|j| j.get("fingerprint").cloned());
    let pin = match pinned {
        None => None,
        Some(pin) => Some(pin.as_str().and_then(executor_tls::Pin::parse).ok_or(Error::BadPin { file: name.clone() })?),
    };
    let credential = credential_in(&text).ok_or(Error::NoCredential { file: name })?;
    Ok(Credential { pin, ..credential })
}

/// The credential in what `pair` printed, in any of its three forms.
pub fn credential_in(text: &str) -> Option<Credential> {
    let text = text.trim();
    let token = if text.starts_with('{') {
        let json: serde_json::Value = serde_json::from_str(text).ok()?;
        json.get("credential")?.as_str()?.to_owned()
    } else if let Some(line) = text.lines().find_map(|l| l.trim().strip_prefix("credential:")) {
        line.trim().to_owned()
    } else {
        text.to_owned()
    };
    let executor_id = executor_id_of(&token)?;
    let well_formed = token.bytes().all(|b| b.is_ascii_graphic());
    well_formed.then_some(Credential { token, executor_id, pin: None })
}

/// The executor id a credential names (`exc1.<id>.<secret>`).
pub fn executor_id_of(token: &str) -> Option<String> {
    let (id, secret) = token.strip_prefix("exc1.")?.rsplit_once('.')?;
    (!id.is_empty() && !secret.is_empty()).then(|| id.to_owned())
}

/// Accepts only the daemon's executor endpoint: on a loopback address,
/// `ws://HOST[:PORT]/executor` with HOST `127.x.x.x`, `localhost` or
/// `[::1]`; from another machine, `wss://HOST:PORT/executor` (`serve
/// --executor-listen`) and only with `pin`, the certificate the credential
/// pins. No user-info, query or fragment.
pub fn check_daemon_url(url: &str, pin: Option<executor_tls::Pin>) -> Result<(), Error> {
    let refused = || Error::DaemonUrl { url: url.chars().take(200).collect() };
    if url.starts_with("wss://") {
        check_remote_url(url)?;
        return pin.map(drop).ok_or_else(|| Error::Unpinned { url: url.chars().take(200).collect() });
    }
    let rest = url.strip_prefix("ws://").ok_or_else(refused)?;
    let (authority, path) = rest.split_once('/').ok_or_else(refused)?;
    if path != "executor" || authority.contains('@') {
        return Err(refused());
    }
    let host = match authority.strip_prefix('[') {
        Some(v6) => {
            let (host, port) = v6.split_once(']').ok_or_else(refused)?;
            if !(port.is_empty() || port.strip_prefix(':').is_some_and(is_port)) {
                return Err(refused());
            }
            host
        }
        None => match authority.split_once(':') {
            Some((host, port)) if is_port(port) => host,
            Some(_) => return Err(refused()),
            None => authority,
        },
    };
    let loopback =
        host.eq_ignore_ascii_case("localhost") || host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback());
    loopback.then_some(()).ok_or_else(refused)
}

/// Whether `url` is `wss://HOST:PORT/executor` with a host one can dial
/// (not a wildcard address such as `0.0.0.0`), no user-info, query or
/// fragment: the remote endpoint `serve --executor-listen` serves.
pub fn check_remote_url(url: &str) -> Result<(), Error> {
    let refused = || Error::DaemonUrl { url: url.chars().take(200).collect() };
    let rest = url.strip_prefix("wss://").ok_or_else(refused)?;
    let (authority, path) = rest.split_once('/').ok_or_else(refused)?;
    let (host, port) = authority.rsplit_once(':').ok_or_else(refused)?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let wildcard = host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_unspecified());
    let named = !host.is_empty() && host.bytes().all(|b| b.is_ascii_alphanumeric() || b".-:".contains(&b));
    (path == "executor" && is_port(port) && named && !wildcard).then_some(()).ok_or_else(refused)
}

fn is_port(text: &str) -> bool {
    !text.is_empty() && text.len() <= 5 && text.parse::<u16>().is_ok_and(|p| p > 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOKEN: &str = "exc1.cdp-laptop.Zm9vYmFyYmF6cXV4";

    #[test]
    fn every_form_pair_prints_yields_the_credential() {
        let want = Some(Credential { token: TOKEN.into(), executor_id: "cdp-laptop".into(), pin: None });
        assert_eq!(credential_in(&format!("{TOKEN}\n")), want, "--credential-file");
        let json = format!(
            r#"{{"endpoint":"ws://127.0.0.1:7777/executor","executorId":"cdp-laptop","credential":"{TOKEN}"}}"#
        );
        assert_eq!(credential_in(&json), want, "--json");
        let human = format!(
            "endpoint:   ws://127.0.0.1:7777/executor\nexecutor:   cdp-laptop\ncredential: {TOKEN}\n\nTo pair the browser \
             extension:\n  1. Open ..."
        );
        assert_eq!(credential_in(&human), want, "the printed text");
        assert_eq!(credential_in("To pair the browser extension"), None);
        assert_eq!(credential_in(r#"{"credential": 3}"#), None);
        assert_eq!(credential_in("exc1.a.b c"), None, "no spaces in a credential");
    }

    #[test]
    fn a_credential_file_others_can_read_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("cdp.credential");
        std::fs::write(&file, TOKEN).unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert!(matches!(read_credential(&file), Err(Error::Exposed { mode: 0o644, .. })));
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(read_credential(&file).unwrap().executor_id, "cdp-laptop");
        std::fs::write(&file, "hello").unwrap();
        assert!(matches!(read_credential(&file), Err(Error::NoCredential { .. })));
        assert!(matches!(read_credential(&dir.path().join("absent")), Err(Error::Unreadable { .. })));
    }

    #[test]
    fn only_a_loopback_executor_endpoint_is_dialled() {
        for ok in [
            "ws://127.0.0.1:7777/executor",
            "ws://localhost:7777/executor",
            "ws://[::1]:7777/executor",
            "ws://127.0.0.2/executor",
            "ws://LOCALHOST:1/executor",
        ] {
            assert_eq!(check_daemon_url(ok, None), Ok(()), "{ok}");
        }
        for bad in [
            "wss://127.0.0.1/executor",
            "wss://0.0.0.0:7443/executor",
            "wss://[::]:7443/executor",
            "wss://:7443/executor",
            "wss://10.0.0.1:7443/",
            "wss://user@10.0.0.1:7443/executor",
            "http://127.0.0.1:7777/executor",
            "ws://evil.example:7777/executor",
            "ws://127.0.0.1.evil.example/executor",
            "ws://10.0.0.1:7777/executor",
            "ws://user@127.0.0.1:7777/executor",
            "ws://evil.example@127.0.0.1:7777/executor",
            "ws://127.0.0.1:7777/",
            "ws://127.0.0.1:7777/executor?x=1",
            "ws://127.0.0.1:7777/executor#f",
            "ws://127.0.0.1:99999/executor",
            "ws://127.0.0.1:/executor",
            "ws://[::1]x/executor",
            "127.0.0.1:7777/executor",
            "",
        ] {
            assert!(check_daemon_url(bad, None).is_err(), "{bad}");
            assert!(matches!(check_daemon_url(bad, Some(executor_tls::Pin::of(b"x"))), Err(Error::DaemonUrl { .. })));
        }
        // Another machine's endpoint: only over TLS, and only pinned.
        let remote = "wss://10.0.0.1:7443/executor";
        assert!(matches!(check_daemon_url(remote, None), Err(Error::Unpinned { .. })));
        assert_eq!(check_daemon_url(remote, Some(executor_tls::Pin::of(b"cert"))), Ok(()));
        assert!(check_daemon_url("ws://10.0.0.1:7443/executor", Some(executor_tls::Pin::of(b"cert"))).is_err());
    }

    #[test]
    fn a_remote_credential_carries_its_pin_and_a_bad_one_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("remote.json");
        let pin = executor_tls::Pin::of(b"cert");
        let doc = |fingerprint: &str| {
            format!(
                r#"{{"endpoint":"wss://10.0.0.1:7443/executor","credential":"{TOKEN}","fingerprint":"{fingerprint}"}}"#
            )
        };
        std::fs::write(&file, doc(&pin.to_string())).unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(read_credential(&file).unwrap().pin, Some(pin));
        std::fs::write(&file, doc("sha256:nothex")).unwrap();
        assert!(matches!(read_credential(&file), Err(Error::BadPin { .. })));
    }

    #[test]
    fn a_credential_names_its_executor() {
        assert_eq!(executor_id_of("exc1.laptop.0123abcd").as_deref(), Some("laptop"));
        assert_eq!(executor_id_of("exc1.a.b.c").as_deref(), Some("a.b"));
        assert_eq!(executor_id_of("exc1..x"), None);
        assert_eq!(executor_id_of("tok.laptop.x"), None);
    }
}
