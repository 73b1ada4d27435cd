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

/// Connects to the session at `endpoint` within `timeout` (one attempt).
pub async fn connect(endpoint: &Endpoint, timeout: Duration) -> Result<Cdp, SetupError> {
    Connector::new(endpoint.clone(), timeout, timeout).connect(true).await
}

/// How long a handshake the browser holds for a person is kept waiting
/// by default: long enough to find the dialog, bounded all the same.
pub const APPROVAL_WAIT: Duration = Duration::from_secs(300);

/// Reaches the session, one handshake at a time. Chrome's own
/// remote-debugging route asks a person to Allow every new DevTools
/// connection (`../shared/RECIPES.md`): a handshake it holds is kept
/// waiting in the background for up to `approval_wait`, so the person's
/// one click answers it and the next [`Connector::connect`] takes it up,
/// where a fresh attempt each time would ask again and again. A dialog the
/// person denied or left unanswered is asked again only for a command,
/// never by a reconnecting loop, unless the browser started again (its
/// endpoint changed: a handshake that failed as the old one went away is
/// no person's Deny).
pub struct Connector {
    endpoint: Endpoint,
    timeout: Duration,
    approval_wait: Duration,
    pending: Option<Pending>,
    /// The endpoint whose last dialog was denied or left unanswered: a
    /// browser started again announces another (its id changes with every
    /// start), which is a new question, not the refused one.
    declined: Option<String>,
    answered: std::sync::Arc<tokio::sync::Notify>,
}

/// A handshake the browser holds, answered in the background; dropped,
/// it is abandoned (its dialog closes with the connection).
struct Pending {
    url: String,
    answer: tokio::sync::oneshot::Receiver<Result<Cdp, Handshake>>,
    task: tokio::task::AbortHandle,
    since: tokio::time::Instant,
    told: bool,
}

impl Drop for Pending {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// How a held handshake ended without a connection.
enum Handshake {
    /// Refused (a person's Deny, or the browser closed it).
    Refused(String),
    /// Not answered within the approval wait.
    Unanswered,
}

impl Connector {
    /// A connector to `endpoint`: each [`Connector::connect`] waits at most
    /// `timeout`; a held handshake stays open for `approval_wait` (at
    /// least `timeout`).
    pub fn new(endpoint: Endpoint, timeout: Duration, approval_wait: Duration) -> Connector {
        let approval_wait = approval_wait.max(timeout);
        Connector { endpoint, timeout, approval_wait, pending: None, declined: None, answered: Default::default() }
    }

    /// Notified when a held handshake is allowed: whoever backs off between
    /// attempts can take the connection up at once, not at its next try.
    pub fn answered(&self) -> std::sync::Arc<tokio::sync::Notify> {
        self.answered.clone()
    }

    /// The session: `BROWSER_CONTROL_UNAVAILABLE` when nothing listens or
    /// the browser refuses, `BROWSER_AUTHORIZATION_REQUIRED` while it holds
    /// the handshake for a person (the same one, kept). A command
    /// (`for_command`) waits up to the timeout and may open a new dialog; a
    /// reconnecting loop only takes up an answer already given and opens
    /// none after a denied or unanswered one.
    pub async fn connect(&mut self, for_command: bool) -> Result<Cdp, SetupError> {
        let url = self.endpoint.resolve()?;
        // A browser started again announces another endpoint: its old handshake is moot.
        if self.pending.as_ref().is_some_and(|p| p.url != url) {
            self.pending = None;
        }
        if self.pending.is_none() {
            if self.declined.as_ref() == Some(&url) && !for_command {
                return Err(SetupError {
                    code: ErrorCode::BrowserAuthorizationRequired,
                    detail:
                        "remote debugging was denied or left unanswered in the browser: the next command asks again"
                            .into(),
                });
            }
            self.declined = None;
            self.pending = Some(self.begin(url).await?);
        }
        let pending = self.pending.as_mut().expect("begun");
        let authority = authority_of(&pending.url);
        let wait = if for_command { self.timeout } else { Duration::ZERO };
        let answer = match tokio::time::timeout(wait, &mut pending.answer).await {
            Ok(answer) => answer,
            Err(_) => {
                let waited = pending.since.elapsed().as_secs();
                if !pending.told {
                    pending.told = true;
                    tracing::warn!(
                        "the browser asks whether to allow remote debugging: click Allow in its dialog, once (this agent keeps the connection it asks for)"
                    );
                }
                return Err(SetupError {
                    code: ErrorCode::BrowserAuthorizationRequired,
                    detail: format!(
                        "the browser at {authority} holds the DevTools connection for a person ({waited} s so far): click Allow in its \"Allow remote debugging?\" dialog"
                    ),
                });
            }
        };
        let told = pending.told;
        let asked = pending.url.clone();
        self.pending = None;
        match answer {
            Ok(Ok(cdp)) if !cdp.is_closed() => {
                if told {
                    tracing::info!("remote debugging allowed: this agent keeps the connection");
                }
                Ok(cdp)
            }
            Ok(Ok(_)) => Err(SetupError::unavailable("the allowed DevTools connection closed before it was used")),
            Ok(Err(Handshake::Refused(e))) => {
                self.declined = Some(asked);
                Err(SetupError::unavailable(format!(
                    "the browser refused the DevTools connection ({e}): a person's Deny in its remote-debugging dialog, or the browser closed it; the next command asks again"
                )))
            }
            Ok(Err(Handshake::Unanswered)) => {
                self.declined = Some(asked);
                Err(SetupError {
                    code: ErrorCode::BrowserAuthorizationRequired,
                    detail: format!(
                        "the browser at {authority} held the DevTools connection unanswered for {:?}; the next command asks again",
                        self.approval_wait
                    ),
                })
            }
            Err(_) => Err(SetupError::unavailable("the DevTools handshake ended without an answer")),
        }
    }

    /// Checks something listens at `url` (a file that outlived its browser
    /// is told apart from a handshake held for a person), then starts the
    /// handshake in the background.
    async fn begin(&self, url: String) -> Result<Pending, SetupError> {
        let authority = authority_of(&url);
        match tokio::time::timeout(self.timeout, tokio::net::TcpStream::connect(&authority)).await {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => return Err(SetupError::unavailable(format!("nothing listens at {authority}: {e}"))),
            Err(_) => {
                return Err(SetupError::unavailable(format!("{authority} did not answer within {:?}", self.timeout)));
            }
        }
        let (tell, answer) = tokio::sync::oneshot::channel();
        let (target, wait, answered) = (url.clone(), self.approval_wait, self.answered.clone());
        let task = tokio::spawn(async move {
            let shaken = match tokio::time::timeout(wait, Cdp::connect(&target)).await {
                Ok(Ok(cdp)) => {
                    answered.notify_one();
                    Ok(cdp)
                }
                Ok(Err(e)) => Err(Handshake::Refused(e)),
                Err(_) => Err(Handshake::Unanswered),
            };
            let _ = tell.send(shaken);
        });
        Ok(Pending { url, answer, task: task.abort_handle(), since: tokio::time::Instant::now(), told: false })
    }
}

/// `host:port` of a `ws://` URL.
fn authority_of(url: &str) -> String {
    url.strip_prefix("ws://").and_then(|rest| rest.split('/').next()).unwrap_or_default().to_owned()
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

    /// A handshake refused (a person's Deny closes the connection) is not
    /// asked again by a reconnecting loop at the same browser; a browser
    /// started again (another endpoint: its id changes with every start)
    /// is, since a handshake that failed as the old one went away was
    /// nobody's Deny.
    #[tokio::test]
    async fn a_refusal_holds_for_its_browser_only_and_a_restarted_browser_is_asked_again() {
        let dir = tempfile::tempdir().unwrap();
        let refusing = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = refusing.local_addr().unwrap().port();
        let closing = tokio::spawn(async move {
            while let Ok((socket, _)) = refusing.accept().await {
                drop(socket);
            }
        });
        let file = dir.path().join("DevToolsActivePort");
        std::fs::write(&file, format!("{port}\n/devtools/browser/first\n")).unwrap();
        let endpoint = Endpoint::UserDataDir(dir.path().to_owned());
        let mut connector = Connector::new(endpoint, Duration::from_secs(2), Duration::from_secs(2));
        let refused = connector.connect(true).await.unwrap_err();
        assert_eq!(refused.code, ErrorCode::BrowserControlUnavailable, "{}", refused.detail);
        let again = connector.connect(false).await.unwrap_err();
        assert!(again.detail.contains("denied or left unanswered"), "the loop opens no new dialog: {}", again.detail);
        // The browser started again: the loop asks it (and is refused anew).
        std::fs::write(&file, format!("{port}\n/devtools/browser/second\n")).unwrap();
        let restarted = connector.connect(false).await.unwrap_err();
        assert!(!restarted.detail.contains("denied or left unanswered"), "a handshake began: {}", restarted.detail);
        closing.abort();
    }
}
