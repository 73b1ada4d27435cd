//! A small DevTools client over chromiumoxide's connection and typed
//! protocol. chromiumoxide's own `Browser` attaches to every page target it
//! discovers and initialises it; the agent must touch only the targets it
//! opened, so it speaks the protocol itself: browser-level commands, and
//! per-target commands only over sessions it attached to its own targets.
//! One task owns the socket; calls wait for their response (callers bound
//! every wait); events fan out to subscribers.

use std::collections::HashMap;

use chromiumoxide::cdp::browser_protocol::target::SessionId;
use chromiumoxide::types::{Command, EventMessage, Message, Method, MethodId};
use futures_util::StreamExt;
use tokio::sync::{broadcast, mpsc, oneshot};

/// Why a call failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The connection to the browser is gone (or never came up).
    #[error("the browser connection is closed")]
    Closed,
    /// The browser refused the call.
    #[error("the browser refused {method}: {message}")]
    Refused {
        /// The method.
        method: String,
        /// What it said.
        message: String,
    },
    /// The browser answered something this client cannot read.
    #[error("cannot read the browser's answer to {0}")]
    Unreadable(String),
    /// No answer came within the bound.
    #[error("the browser did not answer {0} in time")]
    TimedOut(String),
}

/// The bound on any call that does not name its own.
pub const CALL_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// The last event of every connection: the socket is gone.
pub const CLOSED: &str = "Connection.closed";

/// One DevTools event: its method, the session it came from (none: the
/// browser), and its parameters.
#[derive(Debug, Clone)]
pub struct Event {
    /// `Target.targetDestroyed`, `Runtime.bindingCalled`, …
    pub method: String,
    /// The target session, if the event is a target's.
    pub session: Option<String>,
    /// Its parameters.
    pub params: serde_json::Value,
}

/// An event as the browser sends it. (chromiumoxide's own JSON event type
/// reads no `sessionId`, so every target's event would look like the
/// browser's.)
#[derive(Debug, Clone, serde::Deserialize)]
struct RawEvent {
    method: MethodId,
    #[serde(rename = "sessionId", default)]
    session_id: Option<String>,
    #[serde(default)]
    params: serde_json::Value,
}

impl Method for RawEvent {
    fn identifier(&self) -> MethodId {
        self.method.clone()
    }
}

impl EventMessage for RawEvent {
    fn session_id(&self) -> Option<&str> {
        self.session_id.as_deref()
    }
}

struct Call {
    method: MethodId,
    session: Option<SessionId>,
    params: serde_json::Value,
    reply: oneshot::Sender<Result<serde_json::Value, Error>>,
}

/// A live DevTools connection to one browser.
#[derive(Clone)]
pub struct Cdp {
    calls: mpsc::UnboundedSender<Call>,
    events: broadcast::Sender<Event>,
}

impl std::fmt::Debug for Cdp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cdp").field("closed", &self.is_closed()).finish()
    }
}

impl Cdp {
    /// Connects to the browser's WebSocket (callers bound the wait: an
    /// existing session may hold the handshake until a person allows it).
    pub async fn connect(ws_url: &str) -> Result<Cdp, String> {
        let connection = chromiumoxide::Connection::<RawEvent>::connect(ws_url).await.map_err(|e| e.to_string())?;
        let (calls, rx) = mpsc::unbounded_channel();
        let (events, _) = broadcast::channel(4096);
        tokio::spawn(drive(connection, rx, events.clone()));
        Ok(Cdp { calls, events })
    }

    /// Sends `command` (to the target of `session`, else the browser) and
    /// waits for its answer, at most [`CALL_TIMEOUT`].
    pub async fn call<C: Command>(&self, session: Option<&SessionId>, command: C) -> Result<C::Response, Error> {
        self.call_within(CALL_TIMEOUT, session, command).await
    }

    /// [`Cdp::call`], waiting at most `within`.
    pub async fn call_within<C: Command>(
        &self,
        within: std::time::Duration,
        session: Option<&SessionId>,
        command: C,
    ) -> Result<C::Response, Error> {
        let method = command.identifier().to_string();
        tokio::time::timeout(within, self.call_unbounded(session, command))
            .await
            .map_err(|_| Error::TimedOut(method))?
    }

    async fn call_unbounded<C: Command>(&self, session: Option<&SessionId>, command: C) -> Result<C::Response, Error> {
        let method = command.identifier();
        let params = serde_json::to_value(&command).map_err(|_| Error::Unreadable(method.to_string()))?;
        let (reply, answer) = oneshot::channel();
        let call = Call { method: method.clone(), session: session.cloned(), params, reply };
        self.calls.send(call).map_err(|_| Error::Closed)?;
        let value = answer.await.map_err(|_| Error::Closed)??;
        C::response_from_value(value).map_err(|_| Error::Unreadable(method.to_string()))
    }

    /// Every event from now on.
    pub fn events(&self) -> broadcast::Receiver<Event> {
        self.events.subscribe()
    }

    /// Whether the connection is gone.
    pub fn is_closed(&self) -> bool {
        self.calls.is_closed()
    }
}

async fn drive(
    mut connection: chromiumoxide::Connection<RawEvent>,
    mut calls: mpsc::UnboundedReceiver<Call>,
    events: broadcast::Sender<Event>,
) {
    let mut pending: HashMap<chromiumoxide::types::CallId, (String, oneshot::Sender<_>)> = HashMap::new();
    loop {
        tokio::select! {
            call = calls.recv() => {
                let Some(call) = call else { break };
                match connection.submit_command(call.method.clone(), call.session, call.params) {
                    Ok(id) => {
                        tracing::trace!(?id, method = %call.method, "call");
                        pending.insert(id, (call.method.to_string(), call.reply));
                    }
                    Err(_) => {
                        let _ = call.reply.send(Err(Error::Unreadable(call.method.to_string())));
                    }
                }
            }
            message = connection.next() => match message {
                Some(Ok(Message::Response(response))) => {
                    tracing::trace!(id = ?response.id, error = ?response.error, "response");
                    let Some((method, reply)) = pending.remove(&response.id) else { continue };
                    let answer = match (response.result, response.error) {
                        (_, Some(e)) => Err(Error::Refused { method, message: e.message }),
                        (Some(result), None) => Ok(result),
                        (None, None) => Ok(serde_json::Value::Object(Default::default())),
                    };
                    let _ = reply.send(answer);
                }
                Some(Ok(Message::Event(event))) => {
                    let _ = events.send(Event {
                        method: event.method.to_string(),
                        session: event.session_id,
                        params: event.params,
                    });
                }
                Some(Err(e)) => {
                    tracing::warn!("the browser connection failed: {e}");
                    break;
                }
                None => break,
            },
        }
    }
    // Dropping the senders answers every waiting call with `Closed`, and
    // closing the call channel tells `is_closed`; subscribers hear it as
    // one last event (the channel itself outlives the socket).
    calls.close();
    drop(pending);
    let _ = events.send(Event { method: CLOSED.into(), session: None, params: serde_json::Value::Null });
}
