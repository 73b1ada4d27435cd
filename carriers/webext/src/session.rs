//! One executor connection, from `hello` to close.
//!
//! The first frame must be a `hello` carrying this executor's credential
//! (issued for its `executorId` by `orchestrator pair`) and this build's
//! protocol version; anything else closes the connection with a
//! documented reason. After `welcome`, every frame renews the lease; reports
//! go to the control plane in arrival order; commands arrive from the bridge's
//! dispatch loop through the session's outbox. Generic over any
//! `Stream`/`Sink` of WebSocket messages, so tests can drive it in memory
//! on paused time.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::ws::{CloseFrame, Message};
use futures_util::{Sink, SinkExt, Stream, StreamExt};
use protocol::executor::{DaemonFrame, ExecutorFrame, FRAME_MAX, valid_executor_id};
use tokio::sync::mpsc;
use tokio::time::{Instant, sleep_until, timeout};

use crate::bridge::{Bridge, Outgoing};
use crate::close::CloseReason;

/// Frames per second a session may send on average, and the burst it may save up.
const RATE_PER_SEC: f64 = 100.0;
const RATE_BURST: f64 = 200.0;

/// How a session ended.
#[derive(Debug)]
enum End {
    /// The daemon closed it, for this reason.
    Closed(CloseReason),
    /// The executor went away (close frame, reset, EOF).
    PeerGone(String),
}

/// Reads the next text frame; `Ok(None)` when the peer is gone. Every
/// frame (pings and pongs too) is counted against `rate`. A frame the
/// transport refuses (over 1 MiB, or text that is not UTF-8) closes the
/// session with its documented reason.
async fn next_text<S>(stream: &mut S, rate: &mut Rate) -> Result<Option<String>, End>
where
    S: Stream<Item = Result<Message, axum::Error>> + Unpin,
{
    loop {
        let frame = stream.next().await;
        if frame.is_some() && !rate.allow(Instant::now()) {
            return Err(End::Closed(CloseReason::Violation(format!("more than {RATE_PER_SEC} frames per second"))));
        }
        match frame {
            Some(Ok(Message::Text(text))) => {
                if text.len() > FRAME_MAX {
                    return Err(End::Closed(CloseReason::Violation(format!(
                        "frame of {} bytes exceeds {FRAME_MAX}",
                        text.len()
                    ))));
                }
                return Ok(Some(text.to_string()));
            }
            Some(Ok(Message::Binary(_))) => {
                return Err(End::Closed(CloseReason::Violation("binary frames are not accepted".into())));
            }
            Some(Ok(Message::Ping(_) | Message::Pong(_))) => continue,
            Some(Ok(Message::Close(_))) | None => return Ok(None),
            Some(Err(e)) => {
                let text = e.to_string().to_lowercase();
                let why = if text.contains("too long") || text.contains("space limit") || text.contains("capacity") {
                    format!("frame over {} bytes", 4 * FRAME_MAX)
                } else if text.contains("utf-8") || text.contains("utf8") {
                    "a text frame that is not UTF-8".to_owned()
                } else {
                    return Err(End::PeerGone(format!("transport error: {e}")));
                };
                return Err(End::Closed(CloseReason::Violation(why)));
            }
        }
    }
}

/// A frame, parsed and within its bounds; anything else ends the session
/// before any of it is stored.
fn parse(text: &str) -> Result<ExecutorFrame, End> {
    let frame: ExecutorFrame = serde_json::from_str(text).map_err(|e| {
        let mut why = format!("malformed frame: {e}");
        let mut end = why.len().min(90);
        while !why.is_char_boundary(end) {
            end -= 1;
        }
        why.truncate(end);
        End::Closed(CloseReason::Violation(why))
    })?;
    frame.validate().map_err(|refusal| End::Closed(CloseReason::Refused(refusal)))?;
    Ok(frame)
}

/// A `hello` of a protocol newer than this build's, read leniently (it
/// may carry fields this build does not know) and only from a proven
/// credential: the executor and the refusal it gets.
fn newer_hello(text: &str, bridge: &Bridge) -> Option<(String, CloseReason)> {
    let hello: serde_json::Value = serde_json::from_str(text).ok()?;
    let theirs = u32::try_from(hello["protocolVersion"].as_u64()?).ok()?;
    if hello["type"] != "hello" || theirs <= protocol::executor::PROTOCOL_VERSION {
        return None;
    }
    let executor_id = hello["executorId"].as_str()?;
    if bridge.credentials.verify(hello["token"].as_str()?)? != executor_id {
        return None;
    }
    let release = hello["host"]["release"].as_str().filter(|r| protocol::executor::valid_release(r)).map(String::from);
    Some((executor_id.to_owned(), CloseReason::VersionMismatch { theirs, release }))
}

/// The identity an executor proved in its `hello`.
struct Peer {
    credential: String,
    executor_id: String,
    instance_id: String,
    /// The protocol version it speaks, which `welcome` echoes.
    version: u32,
}

/// Waits for and checks the `hello`.
async fn handshake<S>(stream: &mut S, bridge: &Bridge, remote: bool) -> Result<(Peer, ExecutorFrame), End>
where
    S: Stream<Item = Result<Message, axum::Error>> + Unpin,
{
    let wait = Duration::from_millis(bridge.config.hello_timeout_ms);
    let mut rate = Rate { tokens: RATE_BURST, at: Instant::now() };
    let text = match timeout(wait, next_text(stream, &mut rate)).await {
        Err(_) => return Err(End::Closed(CloseReason::Violation("no hello before the deadline".into()))),
        Ok(Ok(None)) => return Err(End::PeerGone("closed before hello".into())),
        Ok(Ok(Some(text))) => text,
        Ok(Err(end)) => return Err(end),
    };
    let hello = match parse(&text) {
        Ok(hello) => hello,
        // A newer executor's hello may hold fields this build does not
        // know: its version is then the refusal to give.
        Err(end) => match newer_hello(&text, bridge) {
            Some((executor_id, reason)) => {
                bridge.refused(&executor_id, &reason);
                return Err(End::Closed(reason));
            }
            None => return Err(end),
        },
    };
    let ExecutorFrame::Hello { protocol_version, token, executor_id, executor_instance_id, host, .. } = &hello else {
        return Err(End::Closed(CloseReason::Violation("the first frame must be hello".into())));
    };
    let Some(owner) = bridge.credentials.verify(token) else {
        return Err(End::Closed(CloseReason::Unauthorized("unknown or revoked executor credential")));
    };
    if owner != *executor_id {
        return Err(End::Closed(CloseReason::Unauthorized("the credential was issued to another executor id")));
    }
    if remote && bridge.credentials.grants_operator(token) {
        return Err(End::Closed(CloseReason::Unauthorized(
            "a person's credential (pair --operator) is for this machine only: pair a host agent with --remote",
        )));
    }
    if hello.check_version().is_err() {
        let release = host.release.clone();
        let reason = CloseReason::VersionMismatch { theirs: *protocol_version, release };
        bridge.refused(executor_id, &reason);
        return Err(End::Closed(reason));
    }
    if !valid_executor_id(executor_id) || !valid_executor_id(executor_instance_id) {
        return Err(End::Closed(CloseReason::Violation("executor ids must be 1-64 of [A-Za-z0-9_-]".into())));
    }
    let peer = Peer {
        credential: token.clone(),
        executor_id: executor_id.clone(),
        instance_id: executor_instance_id.clone(),
        version: *protocol_version,
    };
    Ok((peer, hello))
}

/// A token bucket on session frames.
struct Rate {
    tokens: f64,
    at: Instant,
}

impl Rate {
    fn allow(&mut self, now: Instant) -> bool {
        self.tokens = (self.tokens + (now - self.at).as_secs_f64() * RATE_PER_SEC).min(RATE_BURST);
        self.at = now;
        if self.tokens < 1.0 {
            return false;
        }
        self.tokens -= 1.0;
        true
    }
}

async fn send_frame<K>(sink: &mut K, frame: &DaemonFrame) -> Result<(), End>
where
    K: Sink<Message, Error = axum::Error> + Unpin,
{
    let text = serde_json::to_string(frame).expect("daemon frames serialize");
    sink.send(Message::Text(text.into())).await.map_err(|e| End::PeerGone(format!("send failed: {e}")))
}

/// Serves one executor connection until it ends.
pub async fn run_session<S>(socket: S, bridge: Arc<Bridge>)
where
    S: Stream<Item = Result<Message, axum::Error>> + Sink<Message, Error = axum::Error> + Unpin + Send + 'static,
{
    serve(socket, bridge, false).await;
}

/// [`run_session`] for a connection to the remote endpoint (`serve
/// --executor-listen`): a credential granting a person's controls (`pair
/// --operator`, a browser's) is refused there.
pub async fn run_remote_session<S>(socket: S, bridge: Arc<Bridge>)
where
    S: Stream<Item = Result<Message, axum::Error>> + Sink<Message, Error = axum::Error> + Unpin + Send + 'static,
{
    serve(socket, bridge, true).await;
}

async fn serve<S>(socket: S, bridge: Arc<Bridge>, remote: bool)
where
    S: Stream<Item = Result<Message, axum::Error>> + Sink<Message, Error = axum::Error> + Unpin + Send + 'static,
{
    let (mut sink, mut stream) = socket.split();
    let (peer, hello) = match handshake(&mut stream, &bridge, remote).await {
        Ok(ok) => ok,
        Err(end) => {
            close(&mut sink, &end).await;
            tracing::info!(reason = ?end, "executor refused at handshake");
            if matches!(end, End::Closed(_)) {
                linger(sink, stream).await;
            }
            return;
        }
    };
    // A person's interface (protocol v3): it hears the pool and sends
    // controls, if its pairing granted that (`pair --operator`).
    let operator = peer.version >= 3
        && matches!(&hello, ExecutorFrame::Hello { capabilities, .. }
            if capabilities.iter().any(|c| c == protocol::executor::OPERATOR_CAPABILITY))
        && bridge.credentials.grants_operator(&peer.credential);
    // Registered before the welcome: a refused claimant hears nothing but its
    // close reason; replayed commands wait in the outbox behind the welcome.
    let (tx, mut outbox) = mpsc::unbounded_channel();
    let (serial, heard) = match bridge.register(&peer.executor_id, &peer.instance_id, peer.version, tx, hello).await {
        Ok(registered) => (registered.serial, registered.heard),
        Err(reason) => {
            tracing::info!(executor = %peer.executor_id, reason = %reason.text(), "executor refused at registration");
            close(&mut sink, &End::Closed(reason)).await;
            linger(sink, stream).await;
            return;
        }
    };
    let welcome = DaemonFrame::Welcome {
        protocol_version: peer.version,
        heartbeat_ms: bridge.config.heartbeat_ms,
        lease_ms: bridge.config.lease_ms,
        release: if peer.version >= 4 { crate::close::RELEASE.into() } else { String::new() },
    };
    if let Err(end) = send_frame(&mut sink, &welcome).await {
        tracing::info!(reason = ?end, "executor left before welcome");
        bridge.unregister(&peer.executor_id, &peer.instance_id, serial, "left before welcome".into()).await;
        return;
    }
    tracing::info!(executor = %peer.executor_id, instance = %peer.instance_id, "executor connected");

    let lease = Duration::from_millis(bridge.config.lease_ms);
    let mut deadline = Instant::now() + lease;
    let mut rate = Rate { tokens: RATE_BURST, at: Instant::now() };
    let mut credential_check = tokio::time::interval(Duration::from_millis(bridge.config.credential_check_ms));
    let mut changes = bridge.plane.subscribe_changes();
    // When the next `operatorView` is due: now, then a moment after a change
    // (bursts of commits coalesce into one view).
    let mut view_due = operator.then(Instant::now);
    let end = loop {
        tokio::select! {
            frame = next_text(&mut stream, &mut rate) => {
                let text = match frame {
                    Ok(Some(text)) => text,
                    Ok(None) => break End::PeerGone("closed by executor".into()),
                    Err(end) => break end,
                };
                deadline = Instant::now() + lease;
                heard.store(bridge.now_ms(), std::sync::atomic::Ordering::SeqCst);
                match parse(&text) {
                    Ok(ExecutorFrame::Heartbeat { .. }) => {}
                    Ok(ExecutorFrame::Hello { .. }) => break End::Closed(CloseReason::Violation("hello sent twice".into())),
                    Ok(frame) if frame.since_version() > peer.version => {
                        break End::Closed(CloseReason::Violation(format!(
                            "a frame of protocol version {} in a version {} session",
                            frame.since_version(),
                            peer.version
                        )));
                    }
                    Ok(seen @ ExecutorFrame::CallerSeen { .. }) => bridge.caller_seen(&peer.executor_id, seen),
                    Ok(read @ ExecutorFrame::PageInspected { .. }) => bridge.page_inspected(&peer.executor_id, read),
                    Ok(ExecutorFrame::OperatorAct { .. }) if !operator => {
                        break End::Closed(CloseReason::Violation(format!(
                            "operatorAct needs the {} capability in hello and a pairing that grants it \
                             (orchestrator pair --operator)",
                            protocol::executor::OPERATOR_CAPABILITY
                        )));
                    }
                    Ok(ExecutorFrame::OperatorAct { act_id, action, worker_id, run_id, text }) => {
                        let key = Some(format!("exec:{}:{act_id}", peer.executor_id));
                        let control = control::operator::Control { action, worker_id, run_id, text, key };
                        let plane = bridge.plane.clone();
                        let done = tokio::task::spawn_blocking(move || control::operator::apply(&plane, &control)).await;
                        let (changed, error, detail) = match done {
                            Ok(Ok(changed)) => (changed, None, String::new()),
                            Ok(Err((code, detail))) => (0, Some(code), detail),
                            Err(_) => (0, Some(protocol::ErrorCode::Internal), "the control failed".into()),
                        };
                        let acted = DaemonFrame::OperatorActed { act_id, changed, error, detail };
                        if let Err(end) = send_frame(&mut sink, &acted).await {
                            break end;
                        }
                    }
                    Ok(report) => bridge.report(&peer.executor_id, report).await,
                    Err(end) => break end,
                }
            }
            out = outbox.recv() => match out {
                Some(Outgoing::Frame(frame)) => {
                    // A peer that stops reading must not stall the session past its lease.
                    match timeout(lease, send_frame(&mut sink, &frame)).await {
                        Ok(Ok(())) => {}
                        Ok(Err(end)) => break end,
                        Err(_) => break End::PeerGone("the executor stopped reading".into()),
                    }
                }
                Some(Outgoing::Close(reason)) => break End::Closed(reason),
                None => break End::Closed(CloseReason::Shutdown),
            },
            Ok(()) = changes.changed(), if operator => {
                view_due.get_or_insert(Instant::now() + VIEW_COALESCE);
            }
            _ = sleep_until(view_due.unwrap_or(deadline)), if view_due.is_some() => {
                view_due = None;
                let live = bridge.connected().await;
                let plane = bridge.plane.clone();
                let view = tokio::task::spawn_blocking(move || control::operator::view(&plane, &live)).await;
                let Ok(view) = view else { continue };
                match timeout(lease, send_frame(&mut sink, &DaemonFrame::OperatorView(view))).await {
                    Ok(Ok(())) => {}
                    Ok(Err(end)) => break end,
                    Err(_) => break End::PeerGone("the executor stopped reading".into()),
                }
            }
            _ = sleep_until(deadline) => break End::Closed(CloseReason::LeaseExpired),
            _ = credential_check.tick() => {
                if bridge.credentials.still_issued(&peer.credential, &peer.executor_id) == Some(false) {
                    break End::Closed(CloseReason::CredentialRevoked);
                }
            }
            _ = bridge.shutdown.cancelled() => break End::Closed(CloseReason::Shutdown),
        }
    };
    let reason = match &end {
        End::Closed(reason) => reason.text(),
        End::PeerGone(why) => why.clone(),
    };
    tracing::info!(executor = %peer.executor_id, %reason, "executor disconnected");
    bridge.unregister(&peer.executor_id, &peer.instance_id, serial, reason).await;
    close(&mut sink, &end).await;
    if matches!(end, End::Closed(_)) {
        linger(sink, stream).await;
    }
}

/// How long after a change the next `operatorView` goes: at most four a second.
const VIEW_COALESCE: Duration = Duration::from_millis(250);

/// How long a closing session keeps reading for the executor's answering
/// close frame before it drops the connection.
const CLOSE_LINGER: Duration = Duration::from_secs(2);

/// Sends the close frame, if the daemon is the one closing; an executor
/// that stopped reading gets [`CLOSE_LINGER`] to take it, no more.
async fn close<K>(sink: &mut K, end: &End)
where
    K: Sink<Message, Error = axum::Error> + Unpin,
{
    if let End::Closed(reason) = end {
        let frame = CloseFrame { code: reason.code(), reason: reason.text().into() };
        let _ = timeout(CLOSE_LINGER, sink.send(Message::Close(Some(frame)))).await;
    }
}

/// Reads (and discards) what the executor still had in flight until its
/// answering close, EOF or [`CLOSE_LINGER`], then drops the connection:
/// closing a socket with unread input makes the kernel send a reset, which
/// can destroy the close frame (and its reason) before the executor reads it.
async fn linger<K, S>(mut sink: K, mut stream: S)
where
    K: Sink<Message, Error = axum::Error> + Unpin,
    S: Stream<Item = Result<Message, axum::Error>> + Unpin,
{
    let drain = async {
        while let Some(Ok(message)) = stream.next().await {
            if matches!(message, Message::Close(_)) {
                break;
            }
        }
    };
    let _ = timeout(CLOSE_LINGER, drain).await;
    let _ = timeout(CLOSE_LINGER, sink.close()).await;
}
