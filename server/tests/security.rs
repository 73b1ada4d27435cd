//! The security holes an outside test found, each written as the attack
//! against the real daemon binary, and the hardening around them. Threat
//! model: SPEC §9. (Hole 3, the extension's endpoint check, is attacked in
//! `extension_chromium.rs` and `extension/tests/pairing.rs`; hole 2 also
//! in `carriers/webext/tests/session.rs`.)

mod support;

use std::io::{Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::time::{Duration, Instant};

use fake_executor::{Callers, FakeConfig, FakeExecutor};
use protocol::executor::PROTOCOL_VERSION;
use serde_json::{Value, json};
use support::{
    Daemon, Mcp, credential, hello, http, refused, refused_after, stateless_call, stateless_call_as, ws_url,
};
use tokio_tungstenite::tungstenite::Message;

const WAIT: Duration = Duration::from_secs(20);

/// Hole 1: a second caller replaying someone else's `run_create` key (from
/// another session, or sessionless) gets the run's id, never its capability.
#[test]
fn replaying_another_callers_run_create_key_never_returns_the_root_capability() {
    let dir = tempfile::tempdir().unwrap();
    let daemon = Daemon::start(dir.path());
    let owner = Mcp::connect(&daemon.addr);
    let created = owner.ok("run_create", json!({"title": "Main", "idempotency_key": "main"}));
    let cap = created["root_capability"].as_str().expect("the creator gets the capability").to_owned();
    assert_eq!(created["replayed"], false);
    let stranger = Mcp::connect(&daemon.addr);
    let replay = stranger.ok("run_create", json!({"title": "Main", "idempotency_key": "main"}));
    assert_eq!(replay["run"]["run_id"], created["run"]["run_id"]);
    assert_eq!(replay["replayed"], true);
    assert!(replay.get("root_capability").is_none(), "{replay}");
    let sessionless = stateless_call(&daemon.addr, "run_create", json!({"title": "Main", "idempotency_key": "main"}));
    assert!(sessionless.unwrap().get("root_capability").is_none());
    assert!(!serde_json::to_string(&replay).unwrap().contains(&cap));
}

/// Hole 2: a holder of one executor's credential says `hello` as another
/// executor to take its commands. Refused; the victim keeps its session.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_executor_credential_cannot_take_over_another_executor() {
    let state = tempfile::tempdir().unwrap();
    let daemon = Daemon::start(state.path());
    let victim = FakeExecutor::start(FakeConfig::new(ws_url(&daemon), credential(state.path(), "raw"), "raw"));
    victim.wait_for(|s| s.connections == 1, WAIT).await;
    let attacker = credential(state.path(), "attacker");
    let (code, reason) = refused(&daemon, None, vec![hello(&attacker, PROTOCOL_VERSION)]).await.unwrap();
    assert_eq!((code, reason.contains("another executor id")), (4001, true), "{reason}");
    assert!(victim.is_connected() && victim.stats().closes.is_empty(), "the victim was never displaced");
    victim.stop().await;
}

/// Hole 4: two different stateless clients holding a pool slot's attach
/// identity. With caller attribution (the default), only the one whose
/// request id the slot's own page shows is admitted; the other is refused
/// as unidentified and changes nothing, and once the slot's conversation
/// has moved on to a newer turn, a replay of the admitted call's request
/// id is refused too. A run that opted out of attribution keeps the
/// older rule: the first sessionless peer is admitted, and a second, which
/// cannot be told apart from it, is refused rather than admitted too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_sessionless_peers_are_never_both_admitted_to_a_slot() {
    for attribution in ["required", "capability_only"] {
        let state = tempfile::tempdir().unwrap();
        // A refused call waits out the attribution bound: keep it short here.
        let daemon =
            Daemon::start_with(state.path(), &["--pool-pacing-ms", "20", "--attribution-wait-ms", "1500"], &[]);
        // Its pages show only the calls the test puts there.
        let mut config = FakeConfig::new(ws_url(&daemon), credential(state.path(), "ext-1"), "ext-1");
        config.callers = Callers::Hidden;
        let fake = FakeExecutor::start(config);
        fake.wait_for(|s| s.connections == 1, WAIT).await;
        let root = Mcp::connect(&daemon.addr);
        let created = root.ok("run_create", json!({"title": "pool", "attribution": attribution}));
        let cap = created["root_capability"].as_str().unwrap().to_owned();
        root.ok("runtime_ensure", json!({"capability": cap, "desired_workers": 1}));
        let stats = fake.wait_for(|s| !s.submissions.is_empty(), WAIT).await;
        let attach = stats.submissions[0].1.split('"').find(|p| p.starts_with("att_")).unwrap().to_owned();
        let worker = stats.conversations[0].0.clone();
        // The slot's own conversation makes the call: its page shows the id.
        let own = "wfr_own0000000000000001";
        let bootstrap = json!({"attach_identity": attach});
        let first = from_own_page(&fake, &daemon.addr, &worker, own, bootstrap).unwrap_or_else(|e| panic!("{e:?}"));
        assert!(first["capability"].as_str().unwrap().starts_with("cap_"));
        if attribution == "required" {
            // Two more turns of the slot's conversation: one that called no
            // orchestrator tool, then the newest. The older one's id, never
            // used, is refused all the same (the page shows a newer one); the
            // newest is admitted as the same peer, and the first turn's id is
            // spent for good.
            let (skipped, next) = ("wfr_own0000000000000002", "wfr_own0000000000000003");
            assert!(fake.page_shows(&worker, skipped) && fake.page_shows(&worker, next));
            // Another paired executor, not the holder, vouches for the old id
            // as the page's newest all through the call: it is not listened to.
            let conversation = stats.conversations[0].1.to_string();
            let forger = forge_caller_seen(&daemon, credential(state.path(), "raw"), &worker, &conversation, skipped);
            let bootstrap = json!({"attach_identity": attach});
            let old = stateless_call_as(&daemon.addr, skipped, "runtime_bootstrap", bootstrap.clone()).unwrap_err();
            forger.abort();
            assert_eq!(old.0, "UNIDENTIFIED_CALLER", "{old:?}");
            assert!(old.1.contains("has ended"), "{old:?}");
            let again = stateless_call_as(&daemon.addr, next, "runtime_bootstrap", bootstrap);
            assert_eq!(again.unwrap()["capability"], first["capability"]);
        }
        let cursor = root.ok("run_get", json!({"capability": cap}))["run"]["cursor"].clone();
        let second = stateless_call(&daemon.addr, "runtime_bootstrap", json!({"attach_identity": attach})).unwrap_err();
        if attribution == "required" {
            assert_eq!(second.0, "UNIDENTIFIED_CALLER", "{second:?}");
            let replay = stateless_call_as(&daemon.addr, own, "runtime_bootstrap", json!({"attach_identity": attach}))
                .unwrap_err();
            assert_eq!(replay.0, "UNIDENTIFIED_CALLER", "{replay:?}");
            assert!(replay.1.contains("replayed"), "{replay:?}");
        } else {
            assert_eq!(second.0, "PEER_IDENTITY_UNRESOLVED", "{second:?}");
            assert!(second.1.contains("cannot be told apart"), "{second:?}");
        }
        assert_eq!(root.ok("run_get", json!({"capability": cap}))["run"]["cursor"], cursor, "nothing changed");
        fake.stop().await;
    }
}

/// A stale catalog stamp is a setup state recorded against the worker,
/// but only once the call is proven to be that worker's own: the same
/// stamp from a caller no page shows is refused as unidentified and
/// records nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_a_proven_caller_can_record_a_stale_catalog() {
    let state = tempfile::tempdir().unwrap();
    let daemon = Daemon::start_with(state.path(), &["--pool-pacing-ms", "20", "--attribution-wait-ms", "1500"], &[]);
    let Slot { fake, root, cap, attach, worker } = Slot::provisioned(&daemon, state.path(), Callers::Hidden).await;
    let stale = json!({"attach_identity": attach, "catalog": "0123456789abcdef"});
    let stale_recorded = || {
        let events = root.ok("events_list", json!({"capability": cap, "after_cursor": 0, "limit": 500}));
        events["events"].as_array().unwrap().iter().any(|e| e.to_string().contains("HOST_APP_STALE"))
    };
    let stranger = stateless_call_as(&daemon.addr, "wfr_stranger00000000001", "runtime_bootstrap", stale.clone());
    assert_eq!(stranger.unwrap_err().0, "UNIDENTIFIED_CALLER");
    assert!(!stale_recorded(), "an unproven caller recorded a host state");
    let proven = from_own_page(&fake, &daemon.addr, &worker, "wfr_own0000000000000001", stale).unwrap_err();
    assert_eq!(proven.0, "HOST_APP_STALE", "{proven:?}");
    assert!(stale_recorded(), "the worker's own call records its host's stale catalog");
    fake.stop().await;
}

/// A conversation held by an executor from before caller attribution
/// (protocol v1, no caller frames) can never be proven: its calls are
/// refused at once, saying why, rather than after the whole wait.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_as_a_conversation_an_old_executor_holds_is_refused_at_once() {
    let state = tempfile::tempdir().unwrap();
    // The default wait (30 s) is longer than this test's own bound.
    let daemon = Daemon::start_with(state.path(), &["--pool-pacing-ms", "20"], &[]);
    let Slot { fake, root, cap, attach, .. } = Slot::provisioned(&daemon, state.path(), Callers::V1).await;
    let started = Instant::now();
    let refused = loop {
        match stateless_call_as(
            &daemon.addr,
            "wfr_old0000000000000001",
            "runtime_bootstrap",
            json!({"attach_identity": attach}),
        ) {
            // The create's result may still be in flight.
            Err((code, _)) if code == "PEER_IDENTITY_UNRESOLVED" && started.elapsed() < WAIT => {
                std::thread::sleep(Duration::from_millis(50));
            }
            other => break other.unwrap_err(),
        }
    };
    assert_eq!(refused.0, "UNIDENTIFIED_CALLER", "{refused:?}");
    assert!(refused.1.contains("protocol v1"), "{refused:?}");
    assert!(started.elapsed() < WAIT, "refused only after the wait");
    let events = root.ok("events_list", json!({"capability": cap, "after_cursor": 0, "limit": 500}));
    let admitted = events["events"].as_array().unwrap().iter().filter(|e| {
        matches!(e["type"].as_str(), Some("runtime.slot_admitted" | "worker.attached" | "caller.attributed"))
    });
    assert_eq!(admitted.count(), 0, "nothing was admitted: {events}");
    fake.stop().await;
}

/// A run with one pool slot provisioned through a fake executor whose
/// pages show `callers`: what a test then calls with.
struct Slot {
    fake: FakeExecutor,
    root: Mcp,
    cap: String,
    attach: String,
    worker: protocol::WorkerId,
}

impl Slot {
    async fn provisioned(daemon: &Daemon, state: &std::path::Path, callers: Callers) -> Slot {
        let mut config = FakeConfig::new(ws_url(daemon), credential(state, "ext-1"), "ext-1");
        config.callers = callers;
        let fake = FakeExecutor::start(config);
        fake.wait_for(|s| s.connections == 1, WAIT).await;
        let root = Mcp::connect(&daemon.addr);
        let cap = root.ok("run_create", json!({"title": "slot"}))["root_capability"].as_str().unwrap().to_owned();
        root.ok("runtime_ensure", json!({"capability": cap, "desired_workers": 1}));
        let stats = fake.wait_for(|s| !s.submissions.is_empty() && !s.conversations.is_empty(), WAIT).await;
        let attach = stats.submissions[0].1.split('"').find(|p| p.starts_with("att_")).unwrap().to_owned();
        let worker = stats.conversations[0].0.clone();
        Slot { fake, root, cap, attach, worker }
    }
}

/// A paired executor that does not hold `worker` sending, every 200 ms,
/// that `worker`'s page shows `request_id` as its newest.
fn forge_caller_seen(
    daemon: &Daemon,
    token: String,
    worker: &protocol::WorkerId,
    conversation: &str,
    request_id: &str,
) -> tokio::task::JoinHandle<()> {
    use futures_util::SinkExt;
    let url = ws_url(daemon);
    let seen = json!({"type": "callerSeen", "workerId": worker.to_string(), "conversationId": conversation,
        "requestId": request_id, "newest": true})
    .to_string();
    tokio::spawn(async move {
        let (mut socket, _) = tokio_tungstenite::connect_async(url).await.unwrap();
        socket.send(Message::Text(hello(&token, PROTOCOL_VERSION).into())).await.unwrap();
        loop {
            tokio::time::sleep(Duration::from_millis(200)).await;
            if socket.send(Message::Text(seen.clone().into())).await.is_err() {
                return;
            }
        }
    })
}

/// `runtime_bootstrap` as the slot's own conversation: its page shows
/// `request_id` (a new turn's), then the call carries it, retried while the
/// create's result may still be in flight.
fn from_own_page(
    fake: &FakeExecutor,
    addr: &str,
    worker: &protocol::WorkerId,
    request_id: &str,
    args: Value,
) -> Result<Value, (String, String)> {
    let deadline = Instant::now() + WAIT;
    while !fake.page_shows(worker, request_id) {
        assert!(Instant::now() < deadline, "the slot's page never showed its conversation");
        std::thread::sleep(Duration::from_millis(20));
    }
    loop {
        match stateless_call_as(addr, request_id, "runtime_bootstrap", args.clone()) {
            Err((code, _)) if code == "PEER_IDENTITY_UNRESOLVED" && Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(50));
            }
            other => return other,
        }
    }
}

/// Hole 5: strings an MCP caller or an executor can put into the log are
/// bounded, and URLs allow-listed; over the bound nothing is stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_or_foreign_strings_are_refused_before_the_log() {
    let state = tempfile::tempdir().unwrap();
    let daemon = Daemon::start(state.path());
    let root = Mcp::connect(&daemon.addr);
    let cap = root.ok("run_create", json!({"title": "bounds"}))["root_capability"].as_str().unwrap().to_owned();
    let spawned = root.ok(
        "worker_spawn",
        json!({"capability": cap, "name": "w", "assignment": {"objective": "o"}, "idempotency_key": "w"}),
    );
    let prompt = spawned["bootstrap_prompt"].as_str().unwrap();
    let attach = prompt.split('"').find(|p| p.starts_with("att_")).unwrap();
    let cursor = |m: &Mcp| m.ok("run_get", json!({"capability": cap}))["run"]["cursor"].as_u64().unwrap();
    let before = cursor(&root);
    let huge = "f".repeat(1 << 20);
    let err = root.call("worker_attach", json!({"attach_identity": attach, "catalog": huge})).unwrap_err();
    assert_eq!(err.0, "TOO_LARGE", "{err:?}");
    let err = root.call("worker_attach", json!({"attach_identity": attach, "catalog": "<script>"})).unwrap_err();
    assert_eq!(err.0, "INVALID_ARGUMENT", "{err:?}");
    assert_eq!(cursor(&root), before, "nothing stored on refusal");
    // Pages and waits over their bounds are refused, never silently cut.
    let err = root.call("events_list", json!({"capability": cap, "after_cursor": 0, "limit": 501})).unwrap_err();
    assert_eq!(err.0, "TOO_LARGE", "{err:?}");
    let err =
        root.call("events_wait", json!({"capability": cap, "after_cursor": 0, "timeout_ms": 60_000})).unwrap_err();
    assert_eq!(err.0, "TOO_LARGE", "{err:?}");
    let key = "k".repeat(129);
    let err = root.call("run_create", json!({"title": "t", "idempotency_key": key})).unwrap_err();
    assert_eq!(err.0, "TOO_LARGE", "{err:?}");

    // An executor: a foreign URL, a 250 KB detail. Each frame is refused with its reason.
    let t = credential(state.path(), "raw");
    let worker = spawned["worker"]["worker_id"].as_str().unwrap();
    let bound = json!({"type": "conversationBound", "workerId": worker,
        "conversationId": "6f1c2d3e-4a5b-4c6d-8e7f-0a1b2c3d4e5f", "url": "javascript:alert(1)"});
    let (code, reason) = refused(&daemon, None, vec![hello(&t, PROTOCOL_VERSION), bound.to_string()]).await.unwrap();
    assert_eq!((code, reason.as_str()), (4003, "INVALID_ARGUMENT: url must start with https://chatgpt.com/"));
    let error = json!({"type": "conversationError", "workerId": worker, "code": "HOST_UI_CHANGED",
        "detail": "d".repeat(250 * 1024)});
    let (code, reason) = refused(&daemon, None, vec![hello(&t, PROTOCOL_VERSION), error.to_string()]).await.unwrap();
    assert_eq!((code, reason.as_str()), (4003, "TOO_LARGE: detail over 2048 bytes"));
    let with_extra = json!({"type": "heartbeat", "seq": 1, "admin": true});
    let (code, reason) =
        refused(&daemon, None, vec![hello(&t, PROTOCOL_VERSION), with_extra.to_string()]).await.unwrap();
    assert_eq!(code, 4003, "unknown fields are refused: {reason}");
    assert!(reason.contains("unknown field"), "{reason}");
    // The raw executor did receive the worker's create (dispatch is recorded),
    // but none of its refused frames reached the log.
    let events = root.ok("events_list", json!({"capability": cap, "after_cursor": 0}));
    let types: Vec<&str> = events["events"].as_array().unwrap().iter().filter_map(|e| e["type"].as_str()).collect();
    assert!(!types.iter().any(|t| t.starts_with("conversation.")), "{types:?}");
}

/// Hole 6: a whole flow (pairing, run, spawn, bootstrap over the executor,
/// attach, progress, completion, through the secret path) at `RUST_LOG=trace`:
/// no credential appears anywhere in the log.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_credential_is_logged_even_at_trace() {
    let state = tempfile::tempdir().unwrap();
    let log_path = state.path().join("daemon.log");
    let secret = "trace-secret-Vq3hZ8rT0kLw2nB7xYc5mJ9dFp4sG";
    let log = std::fs::File::create(&log_path).unwrap();
    let env = [("ORCHESTRATOR_MCP_SECRET", secret)];
    let mut daemon = Daemon::start_tracing(&state.path().join("state"), &[], &env, log);
    let executor_credential = credential(&state.path().join("state"), "ext-1");
    let fake = FakeExecutor::start(FakeConfig::new(ws_url(&daemon), executor_credential.clone(), "ext-1"));
    fake.wait_for(|s| s.connections == 1, WAIT).await;
    let path = format!("/s/{secret}/mcp");
    let root = Mcp::connect_at(&daemon.addr, &path);
    let cap = root.ok("run_create", json!({"title": "trace"}))["root_capability"].as_str().unwrap().to_owned();
    root.ok("worker_spawn", json!({"capability": cap, "name": "w", "assignment": {"objective": "o"}}));
    let stats = fake.wait_for(|s| !s.submissions.is_empty(), WAIT).await;
    let attach = stats.submissions[0].1.split('"').find(|p| p.starts_with("att_")).unwrap().to_owned();
    let worker = Mcp::connect_at(&daemon.addr, &path);
    let deadline = Instant::now() + WAIT;
    let me: Value = loop {
        match worker.call("worker_attach", json!({"attach_identity": attach})) {
            Ok(me) => break me,
            Err(_) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(50)),
            Err(e) => panic!("{e:?}"),
        }
    };
    let worker_cap = me["capability"].as_str().unwrap().to_owned();
    worker.ok("worker_progress", json!({"capability": worker_cap, "summary": "half"}));
    worker.ok("worker_complete", json!({"capability": worker_cap, "summary": "done"}));
    fake.stop().await;
    daemon.kill();
    let text = std::fs::read_to_string(&log_path).unwrap();
    assert!(text.lines().count() > 5, "the daemon logged: {text}");
    let executor_secret = executor_credential.rsplit('.').next().unwrap();
    for (what, secret) in [
        ("root capability", cap.as_str()),
        ("worker capability", worker_cap.as_str()),
        ("attach identity", attach.as_str()),
        ("executor credential", executor_secret),
        ("MCP secret", secret),
    ] {
        assert!(!text.contains(secret), "the {what} is in the log at trace");
    }
}

/// Hole 7: `/executor` is never served to a host exposed for MCP, with or
/// without the MCP secret; `/healthz` checks the Host too.
#[test]
fn the_executor_endpoint_is_never_reachable_through_the_exposed_host() {
    let dir = tempfile::tempdir().unwrap();
    let secret = "s3cr3t-Vq3hZ8rT0kLw2nB7xYc5mJ9dFp4sGa1uEi6o";
    let daemon =
        Daemon::start_with(dir.path(), &["--allowed-host", "tunnel.example"], &[("ORCHESTRATOR_MCP_SECRET", secret)]);
    // A well-formed WebSocket upgrade, with the MCP secret, naming `host`.
    let bearer = format!("Bearer {secret}");
    let upgrade =
        |host: &str| support::upgrade_status(&daemon.addr, "/executor", Some(host), &[("Authorization", &bearer)]);
    assert_eq!(upgrade("tunnel.example"), 403, "the tunnel's host never reaches /executor");
    assert_eq!(upgrade("tunnel.example:443"), 403);
    assert_eq!(upgrade("127.0.0.1"), 101, "loopback executors still connect");
    // Pairing without pasting: loopback and an extension's page only.
    let extension = ("Origin", "chrome-extension://abcdefghijklmnopabcdefghijklmnop");
    let pair = |host: &str, headers: &[(&str, &str)]| {
        support::upgrade_status(&daemon.addr, "/executor/pair", Some(host), headers)
    };
    assert_eq!(pair("tunnel.example", &[extension]), 403, "the tunnel's host never reaches /executor/pair");
    assert_eq!(pair("127.0.0.1", &[]), 403, "no Origin: not a pairing page");
    assert_eq!(pair("127.0.0.1", &[("Origin", "https://chatgpt.com")]), 403, "a web page never asks");
    assert_eq!(pair("127.0.0.1", &[extension]), 101);
    assert_eq!(http(&daemon.addr, "GET", "/healthz", &[("Host", "evil.example")], "").0, 403);
    assert_eq!(http(&daemon.addr, "GET", "/healthz", &[("Host", "tunnel.example")], "").0, 200);
}

#[test]
fn a_client_that_never_finishes_its_headers_is_disconnected() {
    let dir = tempfile::tempdir().unwrap();
    let daemon = Daemon::start_with(dir.path(), &["--header-read-timeout-ms", "300"], &[]);
    let mut tcp = std::net::TcpStream::connect(&daemon.addr).unwrap();
    tcp.write_all(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ").unwrap();
    tcp.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let started = Instant::now();
    let mut buf = Vec::new();
    let _ = tcp.read_to_end(&mut buf);
    assert!(started.elapsed() < Duration::from_secs(8), "the connection stayed open");
    let text = String::from_utf8_lossy(&buf);
    assert!(!text.contains("200 OK"), "{text}");
}

#[test]
fn a_client_that_stalls_in_its_body_is_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let daemon = Daemon::start_with(dir.path(), &["--body-read-timeout-ms", "300"], &[]);
    let mut tcp = std::net::TcpStream::connect(&daemon.addr).unwrap();
    let head = "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: application/json, text/event-stream\r\n\
                Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"jsonrpc\"";
    tcp.write_all(head.as_bytes()).unwrap();
    tcp.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let started = Instant::now();
    let mut buf = Vec::new();
    let _ = tcp.read_to_end(&mut buf);
    assert!(started.elapsed() < Duration::from_secs(8), "the stalled body held the connection");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_frames_close_with_documented_reasons() {
    let state = tempfile::tempdir().unwrap();
    let daemon = Daemon::start(state.path());
    let t = credential(state.path(), "raw");
    let hello = || Message::Text(hello(&t, PROTOCOL_VERSION).into());
    // Over 1 MiB: cut by the transport, closed with a reason.
    let big = Message::Text("x".repeat(1_500_000).into());
    let (code, reason) = refused_after(&daemon, None, vec![hello(), big]).await.unwrap();
    assert_eq!(code, 4003, "{reason}");
    assert!(reason.contains("frame over 1048576 bytes"), "{reason}");
    // Text that is not UTF-8.
    let frame = tokio_tungstenite::tungstenite::protocol::frame::Frame::message(
        vec![0xff, 0xfe, 0xfd],
        tokio_tungstenite::tungstenite::protocol::frame::coding::OpCode::Data(
            tokio_tungstenite::tungstenite::protocol::frame::coding::Data::Text,
        ),
        true,
    );
    let (code, reason) = refused_after(&daemon, None, vec![hello(), Message::Frame(frame)]).await.unwrap();
    assert_eq!(code, 4003, "{reason}");
    assert!(reason.contains("not UTF-8"), "{reason}");
    // A ping flood counts like any other flood.
    let mut pings = vec![hello()];
    pings.extend((0..500).map(|_| Message::Ping(vec![1].into())));
    let (code, reason) = refused_after(&daemon, None, pings).await.unwrap();
    assert_eq!(code, 4003, "{reason}");
    assert!(reason.contains("frames per second"), "{reason}");
    // An extension origin without an id never reaches the handshake.
    let err = refused(&daemon, Some("chrome-extension://"), vec![]).await.unwrap_err();
    assert!(err.contains("403"), "{err}");
}

#[test]
fn the_state_database_and_credentials_are_private() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let daemon = Daemon::start(&state);
    let mcp = Mcp::connect(&daemon.addr);
    mcp.ok("run_create", json!({"title": "private"}));
    for name in ["state.db", "state.db-wal", "executors", "server-secret"] {
        let path = state.join(name);
        if path.exists() {
            let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o600, "{name} is {mode:o}");
        } else {
            assert_ne!(name, "state.db", "no database at {}", path.display());
        }
    }
    assert_eq!(std::fs::metadata(&state).unwrap().permissions().mode() & 0o777, 0o700);
}

/// Issue 29: the admin read answers no web page. A request carrying an
/// `Origin` the daemon does not allow is refused, as on `/mcp`, even with
/// the admin token: a page (DNS-rebound, or a cross-site fetch) cannot
/// probe the daemon's status. The CLI sends no Origin and is served, and so
/// is an origin allowed with `--allowed-origin`.
#[test]
fn the_admin_read_refuses_a_web_origin() {
    let dir = tempfile::tempdir().unwrap();
    let daemon = Daemon::start_with(dir.path(), &["--allowed-origin", "https://app.example"], &[]);
    let token = std::fs::read_to_string(dir.path().join("admin-token")).unwrap();
    let bearer = format!("Bearer {}", token.trim());
    let status = |origin: Option<&str>| {
        let mut headers = vec![("Authorization", bearer.as_str())];
        headers.extend(origin.map(|o| ("Origin", o)));
        http(&daemon.addr, "GET", "/admin/status", &headers, "").0
    };
    assert_eq!(status(Some("https://evil.example")), 403, "a web page read the admin status");
    assert_eq!(status(Some("null")), 403, "a sandboxed page read the admin status");
    assert_eq!(status(Some(&format!("http://{}", daemon.addr))), 403, "a rebound page read the admin status");
    assert_eq!(status(None), 200, "the CLI's read, with no Origin");
    assert_eq!(status(Some("https://app.example")), 200, "an allowed origin");
}

/// Issue 29: a worker calling a root-only tool with its own capability, from
/// its own conversation, is refused, and the refusal leaves no trace: no
/// `caller.attributed` for its turn. The same turn's next legitimate call is
/// attributed as usual.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_root_only_call_records_no_attribution() {
    let state = tempfile::tempdir().unwrap();
    let daemon = Daemon::start_with(state.path(), &["--pool-pacing-ms", "20", "--attribution-wait-ms", "1500"], &[]);
    let Slot { fake, root, cap, attach, worker } = Slot::provisioned(&daemon, state.path(), Callers::Hidden).await;
    let bootstrap = json!({"attach_identity": attach});
    let first = from_own_page(&fake, &daemon.addr, &worker, "wfr_own0000000000000001", bootstrap.clone());
    let worker_cap = first.unwrap_or_else(|e| panic!("{e:?}"))["capability"].as_str().unwrap().to_owned();
    // The worker's next turn, on its own page, calls root's tools.
    let turn = "wfr_own0000000000000002";
    assert!(fake.page_shows(&worker, turn));
    let attributed = || -> Vec<Value> {
        let events = root.ok("events_list", json!({"capability": cap, "after_cursor": 0, "limit": 500}));
        let events = events["events"].as_array().unwrap().clone();
        events.into_iter().filter(|e| e["type"] == "caller.attributed" && e.to_string().contains(turn)).collect()
    };
    for (tool, args) in [
        ("runtime_ensure", json!({"capability": worker_cap, "desired_workers": 2})),
        ("run_cancel", json!({"capability": worker_cap, "reason": "mine now"})),
        ("worker_block", json!({"capability": worker_cap, "worker_id": worker.to_string()})),
    ] {
        let refused = stateless_call_as(&daemon.addr, turn, tool, args).unwrap_err();
        assert_eq!(refused.0, "FORBIDDEN", "{tool}: {refused:?}");
        assert_eq!(attributed(), Vec::<Value>::new(), "{tool}: a refused call was attributed");
    }
    stateless_call_as(&daemon.addr, turn, "runtime_bootstrap", bootstrap).unwrap_or_else(|e| panic!("{e:?}"));
    let recorded = attributed();
    assert_eq!(recorded.len(), 1, "{recorded:?}");
    assert!(recorded[0].to_string().contains("runtime_bootstrap"), "{recorded:?}");
    fake.stop().await;
}

/// Issue 47: the remote executor endpoint (`serve --executor-listen`)
/// speaks TLS only, with the certificate `pair --remote` pins in the
/// credential: the pinned agent is welcomed; a client expecting another
/// certificate (a man in the middle's, from its side) never completes the
/// handshake; plain TCP gets no WebSocket; a page (an `Origin`) and
/// `/executor/pair` are refused there; a revoked credential's TLS session
/// is closed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_remote_executor_endpoint_is_tls_with_a_pinned_certificate_only() {
    use futures_util::{SinkExt, StreamExt};
    use tokio_tungstenite::tungstenite::client::IntoClientRequest;

    let dir = tempfile::tempdir().unwrap();
    let remote = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let daemon = Daemon::start_with(dir.path(), &["--executor-listen", &remote.to_string()], &[]);
    let file = dir.path().join("host-b.json");
    let paired = std::process::Command::new(env!("CARGO_BIN_EXE_orchestrator"))
        .args(["pair", "--executor-id", "host-b", "--remote", &remote.to_string(), "--json", "--state-dir"])
        .arg(dir.path())
        .arg("--credential-file")
        .arg(&file)
        .output()
        .unwrap();
    assert!(paired.status.success(), "{}", String::from_utf8_lossy(&paired.stderr));
    let document: serde_json::Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    let url = format!("wss://{remote}/executor");
    assert_eq!(document["endpoint"], url.as_str());
    let pin = executor_tls::Pin::parse(document["fingerprint"].as_str().unwrap()).unwrap();
    let credential = document["credential"].as_str().unwrap().to_owned();

    // Dials the remote endpoint over TLS trusting `pin`, asking for `path` with `origin`.
    let dial = |pin: executor_tls::Pin, path: &'static str, origin: Option<&'static str>| async move {
        let tcp = tokio::net::TcpStream::connect(remote).await.map_err(|e| e.to_string())?;
        let tls =
            executor_tls::connector(pin).connect(executor_tls::server_name(), tcp).await.map_err(|e| e.to_string())?;
        let mut request = format!("wss://{remote}{path}").into_client_request().unwrap();
        if let Some(origin) = origin {
            request.headers_mut().insert("Origin", origin.parse().unwrap());
        }
        tokio_tungstenite::client_async(request, tls).await.map(|(ws, _)| ws).map_err(|e| e.to_string())
    };

    let mut session = dial(pin, "/executor", None).await.unwrap();
    let hello = serde_json::json!({"type": "hello", "protocolVersion": protocol::executor::PROTOCOL_VERSION,
        "token": credential, "executorId": "host-b", "executorInstanceId": "host-b-1", "executorKind": "cdp"});
    session.send(Message::Text(hello.to_string().into())).await.unwrap();
    let Some(Ok(Message::Text(welcome))) = session.next().await else { panic!("no welcome over TLS") };
    assert!(welcome.contains("\"welcome\""), "{welcome}");

    let impostor = dial(executor_tls::Pin::of(b"a man in the middle's certificate"), "/executor", None).await;
    assert!(impostor.unwrap_err().contains("invalid peer certificate"), "another certificate is refused");
    let page = dial(pin, "/executor", Some("chrome-extension://abcdefghijklmnopabcdefghijklmnop")).await;
    assert!(page.unwrap_err().contains("403"), "a page never reaches the remote endpoint");
    let pairing = dial(pin, "/executor/pair", Some("chrome-extension://abcdefghijklmnopabcdefghijklmnop")).await;
    assert!(pairing.unwrap_err().contains("404"), "pairing without pasting is for this machine only");
    let plain = tokio_tungstenite::connect_async(format!("ws://{remote}/executor")).await;
    assert!(plain.is_err(), "plain TCP never gets a WebSocket there");
    for other in ["/mcp", "/admin/status", "/healthz", "/ui"] {
        let served = dial(pin, other, None).await;
        assert!(served.unwrap_err().contains("404"), "{other} is not served on the remote endpoint");
    }
    // A person's credential (a browser's, with the operator grant) is for this machine only.
    let operator = std::process::Command::new(env!("CARGO_BIN_EXE_orchestrator"))
        .args(["pair", "--executor-id", "a-browser", "--operator", "--json", "--state-dir"])
        .arg(dir.path())
        .output()
        .unwrap();
    let operator: serde_json::Value = serde_json::from_slice(&operator.stdout).unwrap();
    let mut browser = dial(pin, "/executor", None).await.unwrap();
    let hello = serde_json::json!({"type": "hello", "protocolVersion": protocol::executor::PROTOCOL_VERSION,
        "token": operator["credential"], "executorId": "a-browser", "executorInstanceId": "b-1",
        "executorKind": "webext", "capabilities": ["operator"]});
    browser.send(Message::Text(hello.to_string().into())).await.unwrap();
    let refused = loop {
        match browser.next().await {
            Some(Ok(Message::Close(close))) => break close.map(|c| c.reason.to_string()).unwrap_or_default(),
            Some(Ok(Message::Text(text))) => panic!("an operator credential was welcomed remotely: {text}"),
            Some(Ok(_)) => {}
            other => panic!("no close: {other:?}"),
        }
    };
    assert!(refused.contains("for this machine only"), "{refused}");

    let revoked = std::process::Command::new(env!("CARGO_BIN_EXE_orchestrator"))
        .args(["pair", "--revoke", "host-b", "--state-dir"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(revoked.status.success());
    let closed = tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            match session.next().await {
                Some(Ok(Message::Close(close))) => break close.map(|c| c.reason.to_string()),
                None | Some(Err(_)) => break None,
                Some(Ok(_)) => {}
            }
        }
    })
    .await
    .expect("a revoked credential's TLS session is closed within seconds");
    assert!(closed.is_some_and(|reason| reason.contains("revoked") || reason.contains("REVOKED")), "closed as revoked");
    drop(daemon);
}
