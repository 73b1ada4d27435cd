//! Executor sessions in memory on paused time: the lease, token rotation,
//! supersession and the rate bound, with no socket and no real sleeping.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::ws::Message;
use carrier_webext::session::run_session;
use carrier_webext::{Bridge, BridgeConfig, Credentials};
use control::store::MemoryStore;
use control::{ControlPlane, Keyring, ManualClock};
use protocol::EventBody;
use protocol::executor::{DaemonFrame, PROTOCOL_VERSION};
use tokio::sync::mpsc;

mod common;
use common::MemSocket;
use tokio_util::sync::CancellationToken;

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
    credentials: Credentials,
    issued: std::sync::Mutex<std::collections::HashMap<String, String>>,
    _dir: tempfile::TempDir,
}

fn rig() -> Rig {
    let dir = tempfile::tempdir().unwrap();
    let credentials = Credentials::open_or_create(&dir.path().join("executors")).unwrap();
    let plane = Arc::new(
        ControlPlane::open(Arc::new(MemoryStore::new()), Arc::new(ManualClock::at(1)), Keyring::new([1; 32])).unwrap(),
    );
    let config =
        BridgeConfig { heartbeat_ms: 300, lease_ms: 1_000, credential_check_ms: 250, ..BridgeConfig::default() };
    let bridge = Bridge::start(plane.clone(), config, credentials.clone(), CancellationToken::new());
    Rig { plane, bridge, credentials, issued: Default::default(), _dir: dir }
}

impl Rig {
    /// `executor_id`'s credential, issued on first use.
    fn credential(&self, executor_id: &str) -> String {
        let mut issued = self.issued.lock().unwrap();
        issued.entry(executor_id.to_owned()).or_insert_with(|| self.credentials.issue(executor_id).unwrap()).clone()
    }

    /// A session that sent `hello` as `executor_id` (instance `instance`) with `credential`.
    fn hello(&self, executor_id: &str, instance: &str, credential: &str) -> Peer {
        let (to_daemon, incoming) = mpsc::unbounded_channel();
        let (outgoing, from_daemon) = mpsc::unbounded_channel();
        tokio::spawn(run_session(MemSocket { incoming, outgoing }, self.bridge.clone()));
        let peer = Peer { to_daemon, from_daemon };
        peer.send(serde_json::json!({
            "type": "hello", "protocolVersion": PROTOCOL_VERSION, "token": credential,
            "executorId": executor_id, "executorInstanceId": instance, "executorKind": "fake"
        }));
        peer
    }

    async fn connect(&self, executor_id: &str) -> Peer {
        let mut peer = self.hello(executor_id, &format!("{executor_id}-1"), &self.credential(executor_id));
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
async fn revoking_one_credential_closes_that_session_only_and_rotation_closes_all() {
    let rig = rig();
    let mut a = rig.connect("a").await;
    let mut b = rig.connect("b").await;
    assert!(rig.credentials.revoke("a").unwrap());
    let (code, reason) = a.closed().await;
    assert_eq!(code, 4001);
    assert!(reason.contains("revoked"), "{reason}");
    assert_eq!(rig.bridge.connected().await, vec!["b".to_string()]);
    rig.credentials.revoke_all().unwrap();
    assert_eq!(b.closed().await.0, 4001);
}

/// The attack: a holder of one executor's credential says hello as another
/// executor (to receive its queued commands, which carry attach
/// identities). Refused before anything is sent, whoever holds the victim's
/// id now; and a second instance claiming a live id is refused, not preferred.
#[tokio::test(start_paused = true)]
async fn an_executor_credential_never_speaks_for_another_executor_id() {
    let rig = rig();
    let mut victim = rig.connect("victim").await;
    let mut impostor = rig.hello("victim", "impostor-1", &rig.credential("attacker"));
    let (code, reason) = impostor.closed().await;
    assert_eq!(code, 4001, "{reason}");
    assert!(reason.contains("another executor id"), "{reason}");
    // The victim's own credential, from another instance, while the victim is live: refused.
    let mut second = rig.hello("victim", "victim-2", &rig.credential("victim"));
    let (code, reason) = second.closed().await;
    assert_eq!(code, 4006, "{reason}");
    assert_eq!(rig.bridge.connected().await, vec!["victim".to_string()]);
    victim.send(serde_json::json!({"type": "heartbeat", "seq": 1}));
    // A credential nobody issued: refused.
    let forged = format!("exc1.victim.{}", "0".repeat(64));
    let (code, _) = rig.hello("victim", "victim-3", &forged).closed().await;
    assert_eq!(code, 4001);
    let _ = &mut victim;
}

/// A paired executor of another protocol version is refused with 4002 and
/// a reason naming both builds and which to update, even when its newer
/// `hello` holds fields this build does not know; the daemon keeps the
/// refusal for status and `doctor` until that executor connects. An
/// unproven credential's hello leaves no trace there.
#[tokio::test(start_paused = true)]
async fn an_executor_of_another_protocol_version_is_refused_naming_both_builds() {
    let rig = rig();
    let speak = |version: u32, executor_id: &str, credential: &str, extra: serde_json::Value| {
        let (to_daemon, incoming) = mpsc::unbounded_channel();
        let (outgoing, from_daemon) = mpsc::unbounded_channel();
        tokio::spawn(run_session(MemSocket { incoming, outgoing }, rig.bridge.clone()));
        let peer = Peer { to_daemon, from_daemon };
        let mut hello = serde_json::json!({
            "type": "hello", "protocolVersion": version, "token": credential,
            "executorId": executor_id, "executorInstanceId": "i-1", "executorKind": "webext",
            "host": {"os": "linux", "release": "9.0.0"}
        });
        hello.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        peer.send(hello);
        peer
    };
    let release = carrier_webext::close::RELEASE;
    // Newer, with a field this build has never heard of.
    let newer = PROTOCOL_VERSION + 1;
    let mut peer = speak(newer, "ahead", &rig.credential("ahead"), serde_json::json!({"futureField": 1}));
    let (code, reason) = peer.closed().await;
    assert_eq!(code, 4002, "{reason}");
    assert_eq!(
        reason,
        format!(
            "PROTOCOL_VERSION_MISMATCH: update the daemon: executor 9.0.0 speaks v{newer}, daemon {release} v1-v{PROTOCOL_VERSION}"
        )
    );
    // Older than the daemon serves (v0 knows no release).
    let mut peer = speak(0, "behind", &rig.credential("behind"), serde_json::json!({"host": {"os": "linux"}}));
    let (code, reason) = peer.closed().await;
    assert_eq!(code, 4002, "{reason}");
    assert!(
        reason.starts_with("PROTOCOL_VERSION_MISMATCH: update the executor: executor (unsaid) speaks v0"),
        "{reason}"
    );
    // A newer hello with a forged credential: refused as unauthorized, not recorded.
    let forged = format!("exc1.ghost.{}", "0".repeat(64));
    let mut peer = speak(newer, "ghost", &forged, serde_json::json!({"futureField": 1}));
    assert_ne!(peer.closed().await.0, 4002);
    let refused: Vec<String> = rig.bridge.refusals().await.into_iter().map(|r| r.executor_id).collect();
    assert_eq!(refused, ["ahead", "behind"]);
    // Updated, it connects (saying its release) and its refusal is gone.
    let mut peer = speak(PROTOCOL_VERSION, "ahead", &rig.credential("ahead"), serde_json::json!({}));
    let Message::Text(welcome) = peer.next().await else { panic!("expected welcome") };
    let welcome: serde_json::Value = serde_json::from_str(&welcome).unwrap();
    assert_eq!(welcome["release"], release, "{welcome}");
    let refused: Vec<String> = rig.bridge.refusals().await.into_iter().map(|r| r.executor_id).collect();
    assert_eq!(refused, ["behind"]);
    // Gone again (its browser closed), it is not listed as refused again;
    // an executor unpaired since is not listed either.
    drop(peer);
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(rig.bridge.connected().await, Vec::<String>::new());
    rig.credentials.revoke("behind").unwrap();
    assert!(rig.bridge.refusals().await.is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_second_session_of_the_same_executor_instance_supersedes_the_first() {
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

/// A restarted executor (a new instance) whose old socket is half open: once
/// the old session has been silent for a heartbeat and a half, the newcomer
/// with the same id's credential supersedes it instead of waiting out the lease.
#[tokio::test(start_paused = true)]
async fn a_new_instance_supersedes_a_silent_half_open_session_of_its_id() {
    let rig = rig();
    let mut old = rig.connect("ext").await;
    tokio::time::sleep(Duration::from_millis(460)).await;
    let mut new = rig.hello("ext", "ext-2", &rig.credential("ext"));
    let Message::Text(welcome) = new.next().await else { panic!("expected welcome") };
    assert!(matches!(serde_json::from_str(&welcome).unwrap(), DaemonFrame::Welcome { .. }));
    assert_eq!(old.closed().await.0, 4005);
    assert_eq!(rig.bridge.connected().await, vec!["ext".to_string()]);
}

/// The command frames a peer received within `for_ms` (paused time), by id.
async fn commands_within(peer: &mut Peer, for_ms: u64) -> Vec<String> {
    let mut ids = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_millis(for_ms);
    while let Ok(Some(message)) = tokio::time::timeout_at(deadline, peer.from_daemon.recv()).await {
        if let Message::Text(text) = message
            && let Ok(DaemonFrame::Command(command)) = serde_json::from_str(&text)
        {
            ids.push(command.command_id.to_string());
        }
    }
    ids
}

/// Commands leave only from the dispatch loop: a command dispatched to an
/// executor that then reconnects reaches the new session exactly once (by
/// its replay), and what is dispatched afterwards goes to the new session,
/// once. No lock is held across the dispatch commit for this to hold.
#[tokio::test(start_paused = true)]
async fn a_command_reaches_a_reconnected_session_exactly_once() {
    let rig = rig();
    let mut first = rig.connect("ext").await;
    let (_, root) = rig.plane.create_run("r", None).unwrap();
    let root = rig.plane.worker(&root).unwrap();
    let assignment = protocol::Assignment::from_objective("x");
    rig.plane.spawn(&root, "a", &assignment, None).unwrap();
    let before = commands_within(&mut first, 100).await;
    assert_eq!(before.len(), 1, "the create went out once: {before:?}");

    let mut second = rig.connect("ext").await;
    rig.plane.spawn(&root, "b", &assignment, None).unwrap();
    let after = commands_within(&mut second, 500).await;
    assert_eq!(after.len(), 2, "the replayed create and the new one: {after:?}");
    assert_eq!(after.iter().filter(|id| **id == before[0]).count(), 1, "replayed once, not twice");
}
