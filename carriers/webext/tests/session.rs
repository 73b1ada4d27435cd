//! Executor sessions in memory on paused time: the lease, token rotation,
//! supersession and the rate bound, with no socket and no real sleeping.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::extract::ws::Message;
use carrier_webext::session::run_session;
use carrier_webext::{Bridge, BridgeConfig, TokenFile};
use control::store::MemoryStore;
use control::{ControlPlane, Keyring, ManualClock};
use futures_util::{Sink, Stream};
use protocol::EventBody;
use protocol::executor::{DaemonFrame, PROTOCOL_VERSION};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// The daemon's end of an in-memory WebSocket.
struct MemSocket {
    incoming: mpsc::UnboundedReceiver<Result<Message, axum::Error>>,
    outgoing: mpsc::UnboundedSender<Message>,
}

impl Stream for MemSocket {
    type Item = Result<Message, axum::Error>;
    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.incoming.poll_recv(cx)
    }
}

impl Sink<Message> for MemSocket {
    type Error = axum::Error;
    fn poll_ready(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Result<(), axum::Error>> {
        Poll::Ready(Ok(()))
    }
    fn start_send(self: Pin<&mut Self>, item: Message) -> Result<(), axum::Error> {
        self.outgoing.send(item).map_err(axum::Error::new)
    }
    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Result<(), axum::Error>> {
        Poll::Ready(Ok(()))
    }
    fn poll_close(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Result<(), axum::Error>> {
        Poll::Ready(Ok(()))
    }
}

/// The executor's end.
struct Peer {
    to_daemon: mpsc::UnboundedSender<Result<Message, axum::Error>>,
    from_daemon: mpsc::UnboundedReceiver<Message>,
}

impl Peer {
    fn send(&self, json: serde_json::Value) {
        let _ = self.to_daemon.send(Ok(Message::Text(json.to_string().into())));
    }

    async fn next(&mut self) -> Message {
        tokio::time::timeout(Duration::from_secs(3600), self.from_daemon.recv()).await.unwrap().expect("session alive")
    }

    /// The close frame's code and reason, skipping other frames.
    async fn closed(&mut self) -> (u16, String) {
        loop {
            if let Message::Close(Some(close)) = self.next().await {
                return (close.code, close.reason.to_string());
            }
        }
    }
}

struct Rig {
    plane: Arc<ControlPlane>,
    bridge: Arc<Bridge>,
    token: TokenFile,
    _dir: tempfile::TempDir,
}

fn rig() -> Rig {
    let dir = tempfile::tempdir().unwrap();
    let token = TokenFile::open_or_create(&dir.path().join("executor-token")).unwrap();
    let plane = Arc::new(
        ControlPlane::open(Arc::new(MemoryStore::new()), Arc::new(ManualClock::at(1)), Keyring::new([1; 32])).unwrap(),
    );
    let config = BridgeConfig { heartbeat_ms: 300, lease_ms: 1_000, token_check_ms: 250, ..BridgeConfig::default() };
    let bridge = Bridge::start(plane.clone(), config, token.clone(), CancellationToken::new());
    Rig { plane, bridge, token, _dir: dir }
}

impl Rig {
    async fn connect(&self, executor_id: &str) -> Peer {
        let (to_daemon, incoming) = mpsc::unbounded_channel();
        let (outgoing, from_daemon) = mpsc::unbounded_channel();
        tokio::spawn(run_session(MemSocket { incoming, outgoing }, self.bridge.clone()));
        let mut peer = Peer { to_daemon, from_daemon };
        peer.send(serde_json::json!({
            "type": "hello", "protocolVersion": PROTOCOL_VERSION, "token": self.token.current().unwrap(),
            "executorId": executor_id, "executorInstanceId": format!("{executor_id}-1"), "executorKind": "fake"
        }));
        let Message::Text(welcome) = peer.next().await else { panic!("expected welcome") };
        assert!(matches!(serde_json::from_str(&welcome).unwrap(), DaemonFrame::Welcome { lease_ms: 1_000, .. }));
        peer
    }

    /// `(executor, reason)` of every recorded disconnection.
    fn disconnections(&self) -> Vec<(String, String)> {
        self.plane
            .system_events(0, 500)
            .unwrap()
            .into_iter()
            .filter_map(|e| match e.body {
                EventBody::ExecutorDisconnected { executor_id, reason, .. } => Some((executor_id, reason)),
                _ => None,
            })
            .collect()
    }
}

#[tokio::test(start_paused = true)]
async fn a_silent_executor_loses_its_lease_and_a_beating_one_keeps_it() {
    let rig = rig();
    let mut silent = rig.connect("silent").await;
    let beating = rig.connect("beating").await;
    let start = tokio::time::Instant::now();
    let heart = tokio::spawn(async move {
        for seq in 0..20 {
            beating.send(serde_json::json!({"type": "heartbeat", "seq": seq}));
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
        beating
    });
    let (code, reason) = silent.closed().await;
    assert_eq!(code, 4004, "{reason}");
    assert!(reason.contains("lease"));
    assert_eq!(start.elapsed(), Duration::from_millis(1_000), "closed exactly at the lease");
    let _beating = heart.await.unwrap();
    assert_eq!(rig.bridge.connected().await, vec!["beating".to_string()]);
    let recorded = rig.disconnections();
    assert_eq!(recorded.len(), 1);
    assert_eq!(recorded[0].0, "silent");
    assert!(recorded[0].1.contains("no frame within the lease"), "{recorded:?}");
}

#[tokio::test(start_paused = true)]
async fn rotating_the_token_closes_paired_sessions() {
    let rig = rig();
    let mut peer = rig.connect("ext").await;
    rig.token.rotate().unwrap();
    let (code, reason) = peer.closed().await;
    assert_eq!(code, 4001);
    assert!(reason.contains("rotated"), "{reason}");
}

#[tokio::test(start_paused = true)]
async fn a_second_session_of_the_same_executor_supersedes_the_first() {
    let rig = rig();
    let mut first = rig.connect("ext").await;
    let _second = rig.connect("ext").await;
    let (code, _) = first.closed().await;
    assert_eq!(code, 4005);
    assert_eq!(rig.bridge.connected().await, vec!["ext".to_string()]);
}

#[tokio::test(start_paused = true)]
async fn a_flood_of_frames_is_cut_off() {
    let rig = rig();
    let mut peer = rig.connect("ext").await;
    for seq in 0..500 {
        peer.send(serde_json::json!({"type": "heartbeat", "seq": seq}));
    }
    let (code, reason) = peer.closed().await;
    assert_eq!(code, 4003);
    assert!(reason.contains("frames per second"), "{reason}");
}
