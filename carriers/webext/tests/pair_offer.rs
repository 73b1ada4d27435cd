//! Pairing without pasting (`/executor/pair`), in memory on paused time:
//! requests only while a setup's window is open, at most four, each
//! answered once, the credential to the asking page only and valid there;
//! declined, expired, gone and malformed requests issue nothing.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::ws::Message;
use carrier_webext::pair_offer::serve_request;
use carrier_webext::{Bridge, BridgeConfig, Credentials};
use control::store::MemoryStore;
use control::{ControlPlane, Keyring, ManualClock};
use protocol::executor::pair_offer::{PENDING_MOST, PairAnswer, PairRefusal};
use tokio::sync::mpsc;

mod common;
use common::MemSocket;
use tokio_util::sync::CancellationToken;

/// A pairing page's end.
struct Page {
    to_daemon: Option<mpsc::UnboundedSender<Result<Message, axum::Error>>>,
    from_daemon: mpsc::UnboundedReceiver<Message>,
}

impl Page {
    /// The daemon's one answer (and its close after).
    async fn answer(&mut self) -> PairAnswer {
        let first = tokio::time::timeout(Duration::from_secs(3600), self.from_daemon.recv()).await.unwrap();
        let Some(Message::Text(text)) = first else { panic!("expected an answer, got {first:?}") };
        assert!(matches!(self.from_daemon.recv().await, Some(Message::Close(_))), "closed after its answer");
        serde_json::from_str(&text).unwrap()
    }

    /// The page goes away (its tab closed).
    fn leave(&mut self) {
        self.to_daemon = None;
    }
}

struct Rig {
    bridge: Arc<Bridge>,
    credentials: Credentials,
    _dir: tempfile::TempDir,
}

fn rig() -> Rig {
    let dir = tempfile::tempdir().unwrap();
    let credentials = Credentials::open_or_create(&dir.path().join("executors")).unwrap();
    let plane = Arc::new(
        ControlPlane::open(Arc::new(MemoryStore::new()), Arc::new(ManualClock::at(1)), Keyring::new([1; 32])).unwrap(),
    );
    let bridge = Bridge::start(plane, BridgeConfig::default(), credentials.clone(), CancellationToken::new());
    Rig { bridge, credentials, _dir: dir }
}

impl Rig {
    /// A page that sent `text` first.
    fn page_sending(&self, text: &str) -> Page {
        let (to_daemon, incoming) = mpsc::unbounded_channel();
        let (outgoing, from_daemon) = mpsc::unbounded_channel();
        let origin = "chrome-extension://abcdefghijklmnopabcdefghijklmnop".to_owned();
        tokio::spawn(serve_request(MemSocket { incoming, outgoing }, self.bridge.clone(), origin));
        to_daemon.send(Ok(Message::Text(text.to_owned().into()))).unwrap();
        Page { to_daemon: Some(to_daemon), from_daemon }
    }

    fn page(&self, code: &str) -> Page {
        self.page_sending(&format!(
            r#"{{"type":"pairRequest","code":"{code}","browser":"Mozilla/5.0 Chrome/156.0.0.0","release":"0.1.0"}}"#
        ))
    }

    /// The waiting requests, once the pages' tasks have run.
    async fn waiting(&self) -> Vec<carrier_webext::pair_offer::PairWaiting> {
        tokio::time::sleep(Duration::from_millis(10)).await;
        self.bridge.pair_requests()
    }
}

#[tokio::test(start_paused = true)]
async fn no_request_is_taken_without_a_setup_waiting() {
    let rig = rig();
    let answer = rig.page("K7QM-2XPA").answer().await;
    assert!(matches!(answer, PairAnswer::Refused { reason: PairRefusal::NoSetupWaiting, .. }), "{answer:?}");
    assert!(rig.bridge.pair_requests().is_empty());
}

#[tokio::test(start_paused = true)]
async fn an_accepted_request_gets_a_working_credential_on_its_own_socket_only() {
    let rig = rig();
    rig.bridge.open_pairing(Duration::from_secs(60));
    let mut first = rig.page("K7QM-2XPA");
    let mut second = rig.page("ABCD-EFGH");
    let waiting = rig.waiting().await;
    assert_eq!(waiting.iter().map(|w| w.code.as_str()).collect::<Vec<_>>(), ["K7QM-2XPA", "ABCD-EFGH"]);
    assert_eq!(waiting[0].origin, "chrome-extension://abcdefghijklmnopabcdefghijklmnop");
    let executor_id = rig.bridge.answer_pairing(waiting[1].id, true, true).unwrap().expect("accepted");
    let PairAnswer::Paired { executor_id: named, credential } = second.answer().await else { panic!("not paired") };
    assert_eq!(named, executor_id);
    assert_eq!(rig.credentials.verify(&credential).as_deref(), Some(executor_id.as_str()));
    assert!(rig.credentials.grants_operator(&credential), "setup pairs a person's browser with the operator grant");
    // Answered once: a second answer finds nothing.
    assert!(rig.bridge.answer_pairing(waiting[1].id, true, true).is_err());
    // The other page still waits, then is declined: no credential for it.
    assert_eq!(rig.bridge.answer_pairing(waiting[0].id, false, true).unwrap(), None);
    let declined = first.answer().await;
    assert!(matches!(declined, PairAnswer::Refused { reason: PairRefusal::Declined, .. }), "{declined:?}");
    assert_eq!(rig.credentials.list().unwrap().len(), 1, "one credential, the accepted page's");
}

#[tokio::test(start_paused = true)]
async fn requests_are_bounded_expire_with_the_window_and_a_gone_page_is_forgotten() {
    let rig = rig();
    rig.bridge.open_pairing(Duration::from_secs(60));
    let mut pages: Vec<Page> = (0..PENDING_MOST).map(|i| rig.page(&format!("AAAA-AAA{}", i + 2))).collect();
    assert_eq!(rig.waiting().await.len(), PENDING_MOST);
    let busy = rig.page("BBBB-BBBB").answer().await;
    assert!(matches!(busy, PairAnswer::Refused { reason: PairRefusal::Busy, .. }), "{busy:?}");
    // A page that goes away is no longer offered, and accepting it issues nothing.
    let first = rig.waiting().await[0].id;
    pages[0].leave();
    let gone = rig.waiting().await;
    assert_eq!(gone.len(), PENDING_MOST - 1);
    assert!(rig.bridge.answer_pairing(first, true, true).is_err(), "nobody to give it to");
    // The window ends: every page still waiting is told so.
    tokio::time::sleep(Duration::from_secs(61)).await;
    for page in &mut pages[1..] {
        let expired = page.answer().await;
        assert!(matches!(expired, PairAnswer::Refused { reason: PairRefusal::Expired, .. }), "{expired:?}");
    }
    assert!(rig.bridge.pair_requests().is_empty());
    assert!(rig.credentials.list().unwrap().is_empty(), "nothing issued");
}

#[tokio::test(start_paused = true)]
async fn a_window_is_bounded_and_closing_it_expires_the_waiting() {
    let rig = rig();
    assert_eq!(rig.bridge.open_pairing(Duration::from_secs(86_400)), 600_000, "ten minutes at most");
    let mut page = rig.page("K7QM-2XPA");
    assert_eq!(rig.waiting().await.len(), 1);
    rig.bridge.close_pairing();
    let expired = page.answer().await;
    assert!(matches!(expired, PairAnswer::Refused { reason: PairRefusal::Expired, .. }), "{expired:?}");
}

#[tokio::test(start_paused = true)]
async fn a_malformed_or_silent_request_is_refused_and_holds_nothing() {
    let rig = rig();
    rig.bridge.open_pairing(Duration::from_secs(60));
    for text in [
        "not json",
        r#"{"type":"pairRequest","code":"lower-case","browser":"x","release":"0.1.0"}"#,
        r#"{"type":"pairRequest","code":"K7QM-2XPA","browser":"x","release":"0.1.0","token":"x"}"#,
        &format!(r#"{{"type":"pairRequest","code":"K7QM-2XPA","browser":"{}","release":"0.1.0"}}"#, "x".repeat(200)),
        r#"{"type":"pairRequest","code":"K7QM-2XPA","browser":"Chrome\u202e","release":"0.1.0"}"#,
    ] {
        let answer = rig.page_sending(text).answer().await;
        assert!(matches!(answer, PairAnswer::Refused { reason: PairRefusal::Invalid, .. }), "{text}: {answer:?}");
    }
    // Connected and silent: refused after the bound, not held.
    let (to_daemon, incoming) = mpsc::unbounded_channel();
    let (outgoing, from_daemon) = mpsc::unbounded_channel();
    tokio::spawn(serve_request(MemSocket { incoming, outgoing }, rig.bridge.clone(), "moz-extension://x".into()));
    let mut silent = Page { to_daemon: Some(to_daemon), from_daemon };
    let answer = silent.answer().await;
    assert!(matches!(answer, PairAnswer::Refused { reason: PairRefusal::Invalid, .. }), "{answer:?}");
    assert!(rig.bridge.pair_requests().is_empty());
}
