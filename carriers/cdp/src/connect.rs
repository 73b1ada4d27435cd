//! Reaching an authorized browser session, bounded, with what went wrong
//! classified as a setup state (never a worker's failure):
//! - no `DevToolsActivePort`, an unreadable one, nothing listening, or a
//!   refused handshake: `BROWSER_CONTROL_UNAVAILABLE`;
//! - a listener that takes the connection but holds the WebSocket
//!   handshake (Chrome waiting for a person to click "Allow" in its
//!   remote-debugging prompt): `BROWSER_AUTHORIZATION_REQUIRED`, after at
//!   most the timeout, with nothing done.
//!
//! The agent never starts or restarts the user's browser with
//! `--remote-debugging-port`; it only reads where an already authorized
//! session listens.

use std::path::PathBuf;
use std::time::Duration;

use protocol::ErrorCode;

use crate::cdp::Cdp;
use crate::discovery::{active_port_file, parse_active_port};

/// Where the browser session is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Endpoint {
    /// Its user-data directory: the WebSocket URL is read from its
    /// `DevToolsActivePort` at every connect (it changes with each start).
    UserDataDir(PathBuf),
    /// An explicit `ws://127.0.0.1:<port>/devtools/browser/<id>`.
    WebSocket(String),
}

/// Why no connection came up.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{code}: {detail}")]
pub struct SetupError {
    /// `BROWSER_CONTROL_UNAVAILABLE` or `BROWSER_AUTHORIZATION_REQUIRED`.
    pub code: ErrorCode,
    /// What was seen, without secrets.
    pub detail: String,
}

impl SetupError {
    fn unavailable(detail: impl Into<String>) -> SetupError {
        SetupError { code: ErrorCode::BrowserControlUnavailable, detail: detail.into() }
    }
}

/// Why the operator's choice of browser does not name one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ChoiceError {
    /// Nothing named, or a channel this OS does not know.
    #[error(
        "name the browser: --user-data-dir DIR, --channel chrome|chrome-beta|chromium, or --cdp-endpoint ws://127.0.0.1:PORT/devtools/browser/ID"
    )]
    Nothing,
    /// The channel is not one of chrome, chrome-beta, chromium.
    #[error("unknown channel {0:?}: chrome, chrome-beta or chromium")]
    Channel(String),
    /// An endpoint that is not a loopback browser socket.
    #[error("--cdp-endpoint must be ws://127.0.0.1:PORT/devtools/browser/ID (loopback, the browser's socket)")]
    Endpoint,
    /// This OS or home directory is unknown.
    #[error("cannot find the default user-data directory here: pass --user-data-dir")]
    NoHome,
}

impl Endpoint {
    /// The endpoint an operator named: a user-data directory, a channel's
    /// default directory on this OS, or an explicit loopback browser socket.
    pub fn choose(
        user_data_dir: Option<PathBuf>,
        channel: Option<&str>,
        ws: Option<String>,
    ) -> Result<Endpoint, ChoiceError> {
        use crate::discovery::{Channel, Os, user_data_dir as default_dir};
        if let Some(url) = ws {
            // The same shape the DevToolsActivePort file gives, and loopback only.
            let ok = url.strip_prefix("ws://127.0.0.1:").and_then(|rest| rest.split_once('/')).is_some_and(
                |(port, path)| {
                    port.parse::<u16>().is_ok_and(|p| p != 0)
                        && crate::discovery::parse_active_port(&format!("{port}\n/{path}")).is_ok()
                },
            );
            return if ok { Ok(Endpoint::WebSocket(url)) } else { Err(ChoiceError::Endpoint) };
        }
        if let Some(dir) = user_data_dir {
            return Ok(Endpoint::UserDataDir(dir));
        }
        let channel = channel.ok_or(ChoiceError::Nothing)?;
        let channel = Channel::parse(channel).ok_or_else(|| ChoiceError::Channel(channel.to_owned()))?;
        let os = Os::current().ok_or(ChoiceError::NoHome)?;
        let home = std::env::var_os("HOME").map(PathBuf::from).ok_or(ChoiceError::NoHome)?;
        let config = std::env::var_os("XDG_CONFIG_HOME").map(PathBuf::from);
        Ok(Endpoint::UserDataDir(default_dir(os, channel, &home, config.as_deref())))
    }

    /// The browser's WebSocket URL now.
    pub fn resolve(&self) -> Result<String, SetupError> {
        match self {
            Endpoint::WebSocket(url) => Ok(url.clone()),
            Endpoint::UserDataDir(dir) => {
                let file = active_port_file(dir);
                let text = std::fs::read_to_string(&file).map_err(|_| {
                    SetupError::unavailable(format!(
                        "no {} (allow remote debugging in the browser: chrome://inspect/#remote-debugging)",
                        file.display()
                    ))
                })?;
                parse_active_port(&text).map_err(|e| SetupError::unavailable(format!("{}: {e}", file.display())))
            }
        }
    }
}

/// Connects to the session at `endpoint` within `timeout`.
pub async fn connect(endpoint: &Endpoint, timeout: Duration) -> Result<Cdp, SetupError> {
    let url = endpoint.resolve()?;
    let authority = url.strip_prefix("ws://").and_then(|rest| rest.split('/').next()).unwrap_or_default().to_owned();
    // Nothing listening (the file outlived its browser) is told apart from
    // a handshake held for a person's approval.
    match tokio::time::timeout(timeout, tokio::net::TcpStream::connect(&authority)).await {
        Ok(Ok(_)) => {}
        Ok(Err(e)) => return Err(SetupError::unavailable(format!("nothing listens at {authority}: {e}"))),
        Err(_) => return Err(SetupError::unavailable(format!("{authority} did not answer within {timeout:?}"))),
    }
    match tokio::time::timeout(timeout, Cdp::connect(&url)).await {
        Ok(Ok(cdp)) => Ok(cdp),
        Ok(Err(e)) => Err(SetupError::unavailable(format!("the browser refused the DevTools connection: {e}"))),
        Err(_) => Err(SetupError {
            code: ErrorCode::BrowserAuthorizationRequired,
            detail: format!(
                "the browser at {authority} holds the DevTools connection (waiting for \"Allow remote debugging\"?) past {timeout:?}"
            ),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_operator_names_one_browser_and_an_endpoint_must_be_a_loopback_browser_socket() {
        let ws = "ws://127.0.0.1:9222/devtools/browser/4b6c0f5e-9a1d-4c1e-8d3a-2f7e3b9c1d20";
        assert_eq!(Endpoint::choose(None, None, Some(ws.into())), Ok(Endpoint::WebSocket(ws.into())));
        for bad in [
            "ws://10.0.0.2:9222/devtools/browser/x",
            "ws://127.0.0.1:9222/devtools/page/x",
            "ws://127.0.0.1:0/devtools/browser/x",
            "ws://127.0.0.1@evil.com:9222/devtools/browser/x",
        ] {
            assert_eq!(Endpoint::choose(None, None, Some(bad.into())), Err(ChoiceError::Endpoint), "{bad}");
        }
        let dir = PathBuf::from("/p");
        assert_eq!(Endpoint::choose(Some(dir.clone()), None, None), Ok(Endpoint::UserDataDir(dir)));
        assert_eq!(Endpoint::choose(None, None, None), Err(ChoiceError::Nothing));
        assert_eq!(Endpoint::choose(None, Some("edge"), None), Err(ChoiceError::Channel("edge".into())));
    }

    #[tokio::test]
    async fn a_missing_file_or_a_dead_port_is_unavailable_and_a_held_handshake_is_authorization() {
        let dir = tempfile::tempdir().unwrap();
        let missing = connect(&Endpoint::UserDataDir(dir.path().to_owned()), Duration::from_secs(1)).await;
        assert_eq!(missing.unwrap_err().code, ErrorCode::BrowserControlUnavailable);
        // A file that outlived its browser: nothing listens on its port.
        let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = closed.local_addr().unwrap().port();
        drop(closed);
        std::fs::write(dir.path().join("DevToolsActivePort"), format!("{port}\n/devtools/browser/abc\n")).unwrap();
        let dead = connect(&Endpoint::UserDataDir(dir.path().to_owned()), Duration::from_secs(1)).await;
        assert_eq!(dead.unwrap_err().code, ErrorCode::BrowserControlUnavailable);
        // Chrome waiting for a person to allow remote debugging: it takes the
        // connection and holds the WebSocket handshake.
        let held = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = held.local_addr().unwrap().port();
        let holding = tokio::spawn(async move {
            let mut open = Vec::new();
            while let Ok((socket, _)) = held.accept().await {
                open.push(socket);
            }
        });
        std::fs::write(dir.path().join("DevToolsActivePort"), format!("{port}\n/devtools/browser/abc\n")).unwrap();
        let started = std::time::Instant::now();
        let pending = connect(&Endpoint::UserDataDir(dir.path().to_owned()), Duration::from_millis(300)).await;
        assert_eq!(pending.unwrap_err().code, ErrorCode::BrowserAuthorizationRequired);
        assert!(started.elapsed() < Duration::from_secs(2), "within the timeout");
        holding.abort();
    }
}
