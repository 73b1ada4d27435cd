//! The CDP carrier end to end: the real daemon, fakechat as chatgpt.com,
//! a headless Chromium the test started with remote debugging on a fresh
//! profile (standing in for a session its user authorized), and the CDP
//! host agent driving it through exact targets with the extension's own
//! page adapter.

mod support;

use std::time::Duration;

use carrier_cdp::cdp::Cdp;
use carrier_cdp::connect::{Connector, Endpoint};
use chromiumoxide::cdp::browser_protocol::page::NavigateParams;
use chromiumoxide::cdp::browser_protocol::target::{
    AttachToTargetParams, CloseTargetParams, CreateTargetParams, GetTargetsParams, TargetId,
};
use e2e::cdp::CdpWorld;
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(30);

fn orchestrator() -> &'static std::path::Path {
    std::path::Path::new(env!("CARGO_BIN_EXE_orchestrator"))
}

/// One browser rig at a time: two Chromiums, two daemons and their agents
/// on two cores starve each other's timing.
static ONE_BROWSER: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The CDP world, with the agent's logs in the test's output (`RUST_LOG`).
async fn start(daemon_args: &[&str]) -> CdpWorld {
    let filter = tracing_subscriber::EnvFilter::from_default_env();
    let _ = tracing_subscriber::fmt().with_env_filter(filter).with_test_writer().try_init();
    CdpWorld::start(orchestrator(), daemon_args).await.unwrap()
}

fn conversations(oracle: &Value) -> serde_json::Map<String, Value> {
    oracle["conversations"].as_object().cloned().unwrap_or_default()
}

/// The two-worker flow through the CDP carrier: each worker gets its own
/// target and conversation, bootstraps once, talks to root, and the
/// follow-up wakes the same conversation.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_workers_through_exact_targets_and_every_prompt_lands_once() {
    let _one = ONE_BROWSER.lock().await;
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
    let world = start(&[]).await;
    // The canary's pre-flight first: a page read in a target of the
    // agent's own, nothing clicked, typed or focused, the target closed.
    let state = world.dir.path().join("state");
    support::inspect_new_chat_read_only(&world.fake, &world.daemon.addr, &state, 1).await;
    // Closed: `Target.closeTarget` answers before the browser lists it gone.
    let observer = Cdp::connect(&world.chromium.ws_url().unwrap()).await.unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while page_urls(&observer).await.values().any(|u| u.starts_with("https://chatgpt.com/")) {
        assert!(std::time::Instant::now() < deadline, "its target is closed: {:?}", page_urls(&observer).await);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let out = e2e::scenario::two_workers(&world.daemon.mcp_url(), Duration::from_secs(60))
        .await
        .unwrap_or_else(|e| panic!("{e:#}\n{:#}", world.fake.hub.oracle()));
    eprintln!("{}", out.trace.join("\n"));
    let oracle = world.fake.hub.oracle();
    let conversations = conversations(&oracle);
    assert_eq!(conversations.len(), 2, "{oracle:#}");
    let turns: Vec<usize> = conversations.values().map(|c| c["user_turns"].as_array().map_or(0, Vec::len)).collect();
    let mut sorted = turns.clone();
    sorted.sort();
    assert_eq!(sorted, [1, 2], "B: its bootstrap; A: its bootstrap and the wake: {oracle:#}");
    assert_eq!(world.agent.targets().len(), 2);
}

/// Root's MCP session and capability, over the blocking test client.
struct Root {
    mcp: support::Mcp,
    cap: String,
}

impl Root {
    fn new(addr: &str) -> Root {
        let mcp = support::Mcp::connect(addr);
        let cap = mcp.ok("run_create", json!({"title": "pool"}))["root_capability"].as_str().unwrap().to_owned();
        Root { mcp, cap }
    }

    fn call(&self, tool: &str, mut args: Value) -> Value {
        args["capability"] = json!(self.cap);
        self.mcp.ok(tool, args)
    }

    fn cursor(&self) -> u64 {
        self.call("run_get", json!({}))["run"]["cursor"].as_u64().unwrap()
    }

    /// The pool's status once `want` holds (bounded).
    async fn status_when(&self, what: &str, want: impl Fn(&Value) -> bool) -> Value {
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            let s = self.call("runtime_status", json!({}));
            if want(&s) {
                return s;
            }
            assert!(tokio::time::Instant::now() < deadline, "never {what}: {s:#}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// READY with `n` parked, admitted slots.
    async fn ready(&self, n: usize) -> Value {
        self.status_when(&format!("READY with {n}"), |s| {
            let slots = s["slots"].as_array().unwrap();
            s["state"] == "READY" && slots.len() == n && slots.iter().all(|x| x["admitted"] == true)
        })
        .await
    }
}

fn column(status: &Value, key: &str) -> Vec<String> {
    status["slots"].as_array().unwrap().iter().map(|s| s[key].as_str().unwrap_or_default().to_owned()).collect()
}

/// Every page target's URL, by target id, as the user's own DevTools sees them.
async fn page_urls(observer: &Cdp) -> std::collections::HashMap<String, String> {
    let targets = observer.call(None, GetTargetsParams::default()).await.unwrap().target_infos;
    targets.into_iter().filter(|t| t.r#type == "page").map(|t| (t.target_id.into(), t.url)).collect()
}

/// The G0 witness and pool gates G2, G4, G5 and G6 through the CDP carrier
/// against a real Chromium: three managed conversations coexist in three
/// exact targets; the user navigating A leaves B and C unchanged; the user
/// closing B leaves A and C untouched, and recovery reopens B's exact
/// conversation in a new target (a new handle, the same logical worker, no
/// prompt); 3→5→2 adds and retires only what it must; a cold daemon
/// restart reconstructs the pool with no duplicate. (G3's targeted tasks
/// need a wake's peer to be the admitted one: caller attribution, #20.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn g0_witness_and_pool_gates_through_exact_targets() {
    let _one = ONE_BROWSER.lock().await;
    let args = ["--pool-pacing-ms", "40", "--max-launches", "4", "--max-active-workers", "8"];
    let mut world = start(&args).await;
    let root = Root::new(&world.daemon.addr);
    let observer = Cdp::connect(&world.chromium.ws_url().unwrap()).await.unwrap();

    // G2: three parked workers, three conversations, three targets; a replay does nothing.
    let out = root.call("runtime_ensure", json!({"desired_workers": 3}));
    assert_eq!(out["outcome"]["provisioned"], json!([0, 1, 2]));
    let before = root.ready(3).await;
    let conversations = column(&before, "conversation_id");
    assert_eq!(conversations.iter().collect::<std::collections::HashSet<_>>().len(), 3);
    let oracle = world.fake.hub.oracle();
    assert_eq!(conversations_of(&oracle).len(), 3, "{oracle:#}");
    let targets = world.agent.targets();
    assert_eq!(targets.len(), 3);
    let urls = page_urls(&observer).await;
    for conversation in &conversations {
        let exact = format!("https://chatgpt.com/c/{conversation}");
        assert_eq!(urls.values().filter(|u| **u == exact).count(), 1, "one target shows {exact}: {urls:#?}");
    }
    let (cursor, turns) = (root.cursor(), user_turns(&world.fake.hub));
    assert_eq!(root.call("runtime_ensure", json!({"desired_workers": 3}))["outcome"]["provisioned"], json!([]));
    // Pages go on reporting their states; the replay itself provisions and sends nothing.
    let since = root.call("events_list", json!({"after_cursor": cursor, "limit": 500}))["events"].clone();
    let effects: Vec<&Value> = since
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["type"].as_str().is_some_and(|t| t.starts_with("runtime.") || t == "executor.command_queued"))
        .collect();
    assert!(effects.is_empty(), "the replay recorded nothing: {effects:#?}");

    // G0: the user navigates A away and back; B and C never move.
    let target_of = |conversation: &str, urls: &std::collections::HashMap<String, String>| {
        urls.iter().find(|(_, u)| u.ends_with(conversation)).map(|(t, _)| t.clone()).unwrap()
    };
    let (a, b, c) =
        (target_of(&conversations[0], &urls), target_of(&conversations[1], &urls), target_of(&conversations[2], &urls));
    let attach = AttachToTargetParams::builder().target_id(TargetId::from(a.clone())).flatten(true).build().unwrap();
    let user_on_a = observer.call(None, attach).await.unwrap().session_id;
    observer.call(Some(&user_on_a), NavigateParams::new("https://chatgpt.com/")).await.unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let moved = page_urls(&observer).await;
    assert_eq!(moved[&b], urls[&b], "B unchanged");
    assert_eq!(moved[&c], urls[&c], "C unchanged");
    observer.call(Some(&user_on_a), NavigateParams::new(urls[&a].clone())).await.unwrap();

    // G0 + G4: the user closes B; A and C are untouched; recovery reopens
    // B's exact conversation in a new target with no prompt anywhere.
    observer.call(None, CloseTargetParams::new(TargetId::from(b.clone()))).await.unwrap();
    root.status_when("DEGRADED", |s| s["state"] == "DEGRADED").await;
    let left = page_urls(&observer).await;
    assert!(left.contains_key(&a) && left.contains_key(&c) && !left.contains_key(&b));
    assert_eq!(left[&c], urls[&c]);
    assert_eq!(root.call("runtime_recover", json!({}))["outcome"]["recovering"], json!([1]));
    let after = root.ready(3).await;
    assert_eq!(column(&after, "worker_id"), column(&before, "worker_id"), "the same logical workers");
    assert_eq!(column(&after, "conversation_id"), conversations, "the exact conversations");
    let now = world.agent.targets();
    assert!(now.contains(&a) && now.contains(&c) && !now.contains(&b), "B's stale target id is gone: {now:?}");
    assert_eq!(now.len(), 3);
    let exact_b = format!("https://chatgpt.com/c/{}", conversations[1]);
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let reopened = page_urls(&observer).await;
        match reopened.values().filter(|u| **u == exact_b).count() {
            1 => break,
            0 => assert!(tokio::time::Instant::now() < deadline, "B never reopened: {reopened:#?}"),
            _ => panic!("B reopened twice: {reopened:#?}"),
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(user_turns(&world.fake.hub), turns, "no prompt anywhere");

    // G5 (no busy worker here): 3 → 5 adds two; 5 → 2 retires three, closing their targets.
    assert_eq!(root.call("runtime_scale", json!({"desired_workers": 5}))["outcome"]["provisioned"], json!([3, 4]));
    root.ready(5).await;
    assert_eq!(world.agent.targets().len(), 5);
    let down = root.call("runtime_scale", json!({"desired_workers": 2}));
    assert_eq!(down["outcome"]["retiring"].as_array().unwrap().len(), 3, "{down:#}");
    root.status_when("two slots", |s| s["slots"].as_array().unwrap().len() == 2).await;
    e2e::cdp::wait_until(WAIT, || world.agent.targets().len() == 2).await.unwrap();
    let oracle = world.fake.hub.oracle();
    assert_eq!(conversations_of(&oracle).len(), 5, "scale-up added only the missing two");

    // G6: a cold restart; one ensure reconstructs, with no new conversation.
    let kept = root.call("runtime_status", json!({}));
    world.daemon.restart().unwrap();
    let root = Root { mcp: support::Mcp::connect(&world.daemon.addr), cap: root.cap };
    e2e::cdp::wait_until(WAIT, || world.agent.is_connected()).await.unwrap();
    assert_eq!(root.call("runtime_ensure", json!({"desired_workers": 2}))["outcome"]["provisioned"], json!([]));
    assert_eq!(column(&root.call("runtime_status", json!({})), "worker_id"), column(&kept, "worker_id"));
    assert_eq!(conversations_of(&world.fake.hub.oracle()).len(), 5, "no duplicate conversation");
}

fn conversations_of(oracle: &Value) -> serde_json::Map<String, Value> {
    conversations(oracle)
}

/// Every conversation's user turns, counted.
fn user_turns(hub: &fakechat::hub::Hub) -> usize {
    conversations(&hub.oracle()).values().map(|c| c["user_turns"].as_array().map_or(0, Vec::len)).sum()
}

/// Hostile controls: a conversation the user opened by hand is never
/// attached to, driven or reopened; a browser that restarts (a new
/// generation: every target id is new) makes the agent report its lost
/// targets by itself, and one `runtime_ensure` reopens the exact
/// conversations in new targets, the stale ids never reused, with no
/// prompt anywhere.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_users_own_chat_is_never_touched_and_a_new_browser_generation_is_recovered_by_exact_reopen() {
    let _one = ONE_BROWSER.lock().await;
    let args = ["--pool-pacing-ms", "40"];
    let mut world = start(&args).await;
    let observer = Cdp::connect(&world.chromium.ws_url().unwrap()).await.unwrap();
    let mine = observer.call(None, CreateTargetParams::new("https://chatgpt.com/")).await.unwrap().target_id;
    let attach = AttachToTargetParams::builder().target_id(mine.clone()).flatten(true).build().unwrap();
    let session = observer.call(None, attach).await.unwrap().session_id;
    let my_conversation =
        e2e::cdp::chat_by_hand(&observer, &session, "my own chat, not the orchestrator's").await.unwrap();
    // The user's hands leave the tab: from now on nobody is attached to it.
    let detach = chromiumoxide::cdp::browser_protocol::target::DetachFromTargetParams::builder()
        .session_id(session.clone())
        .build();
    observer.call(None, detach).await.unwrap();
    let mine_id = mine.clone();
    let mine: String = mine.into();

    let root = Root::new(&world.daemon.addr);
    root.call("runtime_ensure", json!({"desired_workers": 2}));
    let before = root.ready(2).await;
    let old_targets = world.agent.targets();
    assert!(!old_targets.contains(&mine), "the agent never manages the user's tab");
    let infos = observer.call(None, GetTargetsParams::default()).await.unwrap().target_infos;
    let info = infos.iter().find(|t| t.target_id == mine_id).expect("the user's tab is still there");
    assert!(!info.attached, "no DevTools client is attached to the user's tab: the agent never was");
    let turns = user_turns(&world.fake.hub);
    let oracle = world.fake.hub.oracle();
    assert_eq!(conversations(&oracle)[&my_conversation]["user_turns"].as_array().unwrap().len(), 1, "only mine");

    // A new browser generation: the agent finds its targets gone by itself,
    // and one ensure (the seed's G6, issue 29 item 17) reopens them.
    drop(observer);
    world.chromium.restart().unwrap();
    let lost = |s: &Value| s["slots"].as_array().unwrap().iter().all(|x| x["health"] == "lost");
    let status = root.status_when("both slots lost", lost).await;
    assert_ne!(status["state"], "READY");
    let status = root
        .status_when("the browser reason cleared", |s| {
            !s["reasons"].as_array().unwrap().iter().any(|r| r == "BROWSER_CONTROL_UNAVAILABLE")
        })
        .await;
    assert!(lost(&status), "{status:#}");
    let ensured = root.call("runtime_ensure", json!({"desired_workers": 2}));
    assert_eq!(ensured["outcome"]["recovering"].as_array().unwrap().len(), 2, "{ensured:#}");
    assert!(ensured["outcome"]["provisioned"].as_array().unwrap().is_empty(), "{ensured:#}");
    let after = root.ready(2).await;
    assert_eq!(column(&after, "worker_id"), column(&before, "worker_id"), "the same logical workers");
    assert_eq!(column(&after, "conversation_id"), column(&before, "conversation_id"), "the exact conversations");
    let new_targets = world.agent.targets();
    assert_eq!(new_targets.len(), 2);
    assert!(new_targets.iter().all(|t| !old_targets.contains(t)), "no stale target id is reused");
    let observer = Cdp::connect(&world.chromium.ws_url().unwrap()).await.unwrap();
    let urls = page_urls(&observer).await;
    assert!(!urls.values().any(|u| u.ends_with(&my_conversation)), "the user's chat is not reopened: {urls:#?}");
    assert_eq!(user_turns(&world.fake.hub), turns, "no prompt anywhere");
}

/// A browser that holds the DevTools handshake (Chrome waiting for a person
/// to allow remote debugging) is a setup state: a pool create is answered
/// BROWSER_AUTHORIZATION_REQUIRED within the agent's connect timeout, the
/// pool says so (runtime_recover retries once the person allowed it), the
/// worker has not failed, and nothing was opened.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pending_authorization_is_a_setup_state_within_the_timeout_with_no_effect() {
    let _one = ONE_BROWSER.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let daemon = e2e::Daemon::start(orchestrator(), &dir.path().join("state"), "127.0.0.1:0", &[]).unwrap();
    let held = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = held.local_addr().unwrap().port();
    let holding = tokio::spawn(async move {
        let mut open = Vec::new();
        while let Ok((socket, _)) = held.accept().await {
            open.push(socket);
        }
    });
    let mut config = e2e::cdp::agent_config(&daemon, dir.path(), &dir.path().join("agent.json")).unwrap();
    config.browser = carrier_cdp::Endpoint::WebSocket(format!("ws://127.0.0.1:{port}/devtools/browser/pending"));
    config.connect_timeout = Duration::from_secs(1);
    let agent = carrier_cdp::Agent::start(config).unwrap();
    e2e::cdp::wait_until(WAIT, || agent.is_connected()).await.unwrap();

    let root = Root::new(&daemon.addr);
    let started = std::time::Instant::now();
    root.call("runtime_ensure", json!({"desired_workers": 1}));
    let status = root
        .status_when("a setup state", |s| {
            s["reasons"].as_array().unwrap().contains(&json!("BROWSER_AUTHORIZATION_REQUIRED"))
        })
        .await;
    assert!(started.elapsed() < Duration::from_secs(10), "answered within the connect timeout");
    assert_eq!(status["slots"][0]["admitted"], false, "{status:#}");
    let run = root.call("run_get", json!({}));
    let worker = run["workers"].as_array().unwrap().iter().find(|w| w["path"] != "/root").unwrap().clone();
    assert_ne!(worker["state"], "launch_failed", "a setup state, not the worker's failure: {worker:#}");
    assert!(agent.targets().is_empty(), "nothing was opened");
    agent.stop().await;
    holding.abort();
}

/// Issue 45: Chrome asks a person to Allow each new DevTools connection
/// (`e2e::cdp::Asking` plays its dialog, no browser behind it). Asked
/// again while the first waits, the connector keeps that one (no second
/// dialog), and the person's Allow then answers it; a Deny is a typed
/// state the next attempt recovers from; a dialog never answered is
/// dropped after the approval wait.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_dialog_per_connection_kept_until_allowed_denied_or_unanswered() {
    let asked = e2e::cdp::Asking::start(None).await.unwrap();
    let count = || asked.asked();
    let endpoint = Endpoint::UserDataDir(asked.user_data_dir.clone());
    let mut connector = Connector::new(endpoint.clone(), Duration::from_millis(500), Duration::from_secs(30));
    for _ in 0..3 {
        let held = connector.connect(true).await.unwrap_err();
        assert_eq!(held.code, protocol::ErrorCode::BrowserAuthorizationRequired, "{held}");
        assert!(held.detail.contains("click Allow"), "the person is told what to do: {held}");
    }
    assert_eq!(count(), 1, "one connection asks, however often the agent needs the browser");
    asked.answer(true);
    assert!(connector.connect(true).await.is_ok(), "the person's one Allow answers the kept handshake");
    assert_eq!(count(), 1);

    // Denied: a typed state, and the next need asks once more.
    assert!(connector.connect(true).await.is_err());
    asked.answer(false);
    let denied = connector.connect(true).await.unwrap_err();
    assert_eq!(denied.code, protocol::ErrorCode::BrowserControlUnavailable, "{denied}");
    assert!(denied.detail.contains("Deny"), "{denied}");
    // A reconnecting loop opens no dialog after a Deny; a command does.
    for _ in 0..3 {
        let quiet = connector.connect(false).await.unwrap_err();
        assert_eq!(quiet.code, protocol::ErrorCode::BrowserAuthorizationRequired, "{quiet}");
    }
    assert_eq!(count(), 2, "no dialog after a Deny but for a command");
    let again = connector.connect(true).await.unwrap_err();
    assert_eq!(again.code, protocol::ErrorCode::BrowserAuthorizationRequired);
    assert_eq!(count(), 3);

    // Never answered: dropped after the approval wait, then asked anew.
    let mut brief = Connector::new(endpoint, Duration::from_millis(200), Duration::from_millis(300));
    let _ = brief.connect(true).await;
    tokio::time::sleep(Duration::from_millis(700)).await;
    let unanswered = brief.connect(true).await.unwrap_err();
    assert_eq!(unanswered.code, protocol::ErrorCode::BrowserAuthorizationRequired);
    assert!(unanswered.detail.contains("unanswered"), "{unanswered}");
    let before = count();
    let _ = brief.connect(true).await;
    assert_eq!(count(), before + 1, "a new dialog for the next command once the old one was given up");
}

/// Chrome's own remote-debugging route asks a person to Allow each new
/// DevTools connection (issue 45; `e2e::cdp::Asking` plays its dialog in
/// front of the rig's browser). While a create waits on the dialog the
/// pool says `BROWSER_AUTHORIZATION_REQUIRED` and the agent opens no
/// second connection, however often it needs the browser; the person's
/// one Allow answers the kept one and `runtime_recover` creates the
/// worker. Once that connection is lost, the next need asks again: a Deny
/// is a typed state the agent survives, the next Allow lets the waiting
/// task go in, once, at once (the agent asks each managed page for its
/// state when it reaches the browser again; before, the task waited ~26 s
/// for the daemon's recheck).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_browsers_allow_is_asked_once_per_connection_and_again_after_it_is_lost() {
    let _one = ONE_BROWSER.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let (daemon, fake) = e2e::daemon_and_site(orchestrator(), dir.path(), &[]).await.unwrap();
    let chromium = e2e::cdp::AuthorizedChromium::launch(fake.addr.port(), &dir.path().join("chromium")).unwrap();
    let asking = e2e::cdp::Asking::start(Some(&chromium.user_data_dir)).await.unwrap();
    let mut config = e2e::cdp::agent_config(&daemon, &asking.user_data_dir, &dir.path().join("agent.json")).unwrap();
    config.connect_timeout = Duration::from_secs(1);
    let agent = carrier_cdp::Agent::start(config).unwrap();
    e2e::cdp::wait_until(WAIT, || agent.is_connected()).await.unwrap();
    let root = Root::new(&daemon.addr);
    let started = std::time::Instant::now();
    let authorization = |s: &Value| s["reasons"].as_array().unwrap().contains(&json!("BROWSER_AUTHORIZATION_REQUIRED"));
    root.call("runtime_ensure", json!({"desired_workers": 1}));
    root.status_when("the pool waiting on the person's Allow", authorization).await;
    root.call("runtime_recover", json!({}));
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(asking.asked(), 1, "one dialog, however often the agent needed the browser");
    asking.answer(true);
    root.call("runtime_recover", json!({}));
    root.ready(1).await;
    assert_eq!(asking.asked(), 1, "the Allow answered the connection kept asking");
    eprintln!("allowed and ready: {:.1} s", started.elapsed().as_secs_f64());

    // The connection lost: the task's prompt needs the browser, which asks again.
    asking.cut();
    let task =
        root.call("task_dispatch", json!({"instructions": "after the dialog\nscenario: complete \"done\"", "slot": 0}));
    e2e::cdp::wait_until(WAIT, || asking.asked() == 2).await.unwrap();
    eprintln!("asked again after the loss: {:.1} s", started.elapsed().as_secs_f64());
    asking.answer(false);
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(asking.asked(), 2, "after a Deny the agent opens no dialog by itself");
    let denied = std::time::Instant::now();
    let long = Duration::from_secs(90);
    e2e::cdp::wait_until(long, || asking.asked() == 3).await.expect("a Deny is survived: the next command asks again");
    eprintln!("asked again by a command {:.1} s after the Deny", denied.elapsed().as_secs_f64());
    assert!(agent.is_connected(), "the agent kept its daemon session");
    eprintln!("asked again after the Deny: {:.1} s", started.elapsed().as_secs_f64());
    asking.answer(true);
    // Within seconds of the Allow (before, it waited for the daemon's 30 s recheck).
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let c = root.call("task_collect", json!({"task_id": task["task_id"]}));
        if c["status"] == "completed" {
            eprintln!("the task done: {:.1} s", started.elapsed().as_secs_f64());
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "the task not done within 10 s of the Allow: {c:#}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let oracle = fake.hub.oracle();
    let turns: Vec<usize> =
        conversations(&oracle).values().map(|c| c["user_turns"].as_array().unwrap().len()).collect();
    assert_eq!(turns, [2], "its bootstrap and the task, each once: {oracle:#}");
    agent.stop().await;
    drop(chromium);
    drop(daemon);
}

/// The agent restarts in the middle of the two-worker flow (its process
/// ends; a new one starts from the journal it kept): it resyncs its
/// bindings, finds its own targets again, and the flow completes with no
/// binding lost and no prompt duplicated.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_restart_mid_flow_loses_no_binding_and_duplicates_nothing() {
    let _one = ONE_BROWSER.lock().await;
    let mut world = start(&[]).await;
    let url = world.daemon.mcp_url();
    let flow = tokio::spawn(async move { e2e::scenario::two_workers(&url, Duration::from_secs(60)).await });
    let hub = world.fake.hub.clone();
    e2e::cdp::wait_until(WAIT, || conversations(&hub.oracle()).len() == 2).await.unwrap();
    let targets = world.agent.targets();
    world.agent.restart().await.unwrap();
    e2e::cdp::wait_until(WAIT, || world.agent.is_connected()).await.unwrap();
    let out = flow.await.unwrap().unwrap_or_else(|e| panic!("{e:#}\n{:#}", world.fake.hub.oracle()));
    eprintln!("{}", out.trace.join("\n"));
    let oracle = world.fake.hub.oracle();
    let mut turns: Vec<usize> =
        conversations(&oracle).values().map(|c| c["user_turns"].as_array().map_or(0, Vec::len)).collect();
    turns.sort();
    assert_eq!(turns, [1, 2], "no duplicate prompt: {oracle:#}");
    let mut now = world.agent.targets();
    now.sort();
    let mut before = targets;
    before.sort();
    assert_eq!(now, before, "the same targets, found again from the journal");
}

/// Execution Continuity through the CDP carrier: the page states it needs
/// (generating, idle, "Message delivery timed out") are read by the same
/// adapter in targets of the agent, so a three-turn worker completes with
/// nobody typing and a delivery timeout is answered by a fresh resume, with
/// zero Retry and Stop clicks (`e2e::scenario::auto_resume`). Then, in the
/// same browser, the whole browser asleep (SIGSTOP of every process of it,
/// then SIGCONT; issue 44): a follow-up due while it sleeps goes in once
/// when it wakes, the worker saying meanwhile that it waits for its
/// browser, and a turn that slept mid-way ends with nothing sent again and
/// no stall raised (`e2e::scenario::browser_asleep`). The daemon looks at
/// a page it cannot reach every 3 s here (30 s by default).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auto_resume_a_delivery_timeout_and_a_browser_asleep_through_exact_targets() {
    let _one = ONE_BROWSER.lock().await;
    let world = start(&["--executor-recheck-after-ms", "3000"]).await;
    let out = e2e::scenario::auto_resume(&world.daemon.mcp_url(), &world.fake.hub, Duration::from_secs(60))
        .await
        .unwrap_or_else(|e| panic!("{e:#}\n{:#}", world.fake.hub.oracle()));
    eprintln!("{}", out.trace.join("\n"));
    let asleep = |stopped| world.chromium.asleep(stopped);
    let nap = Duration::from_secs(20);
    let slept = e2e::scenario::browser_asleep(&world.daemon.mcp_url(), &world.fake.hub, asleep, nap, WAIT * 2)
        .await
        .unwrap_or_else(|e| panic!("{e:#}\n{:#}", world.fake.hub.oracle()));
    eprintln!(
        "browser asleep (CDP carrier): working again {:.1} s after waking idle, {:.1} s after waking mid-turn ({} s nap)",
        slept.idle_back.as_secs_f64(),
        slept.mid_turn_back.as_secs_f64(),
        nap.as_secs()
    );
}

/// A signed-out page and a challenge interstitial, read through the agent,
/// refuse a create with their setup state before anything is typed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signed_out_page_and_a_challenge_refuse_a_create_through_the_agent() {
    let _one = ONE_BROWSER.lock().await;
    let world = start(&[]).await;
    for (screen, code) in [
        (fakechat::render::Screen::SignedOut, "CHATGPT_SIGNED_OUT"),
        (fakechat::render::Screen::Challenge, "CHATGPT_CHALLENGE"),
    ] {
        world.fake.hub.set_defaults(fakechat::hub::Settings { screen, ..Default::default() });
        let root = Root::new(&world.daemon.addr);
        root.call("runtime_ensure", json!({"desired_workers": 1}));
        let deadline = tokio::time::Instant::now() + WAIT;
        let outcome = loop {
            let events = root.call("events_list", json!({"limit": 500}))["events"].clone();
            let done = events.as_array().unwrap().iter().find(|e| e["type"] == "executor.command_completed").cloned();
            if let Some(done) = done {
                break done["data"]["outcome"].clone();
            }
            assert!(tokio::time::Instant::now() < deadline, "{code}: the create was never answered");
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        assert_eq!(outcome["code"], code, "{outcome:#}");
        assert_eq!(user_turns(&world.fake.hub), 0, "{code}: nothing was typed");
    }
}

/// Gate G3 through the CDP carrier: targeted tasks wake the exact workers
/// in their own targets and are collected with no cross-attribution. The
/// model keeps no MCP session (each call is a stateless 2026-07-28 one, as
/// ChatGPT's connector is reported to make them): the pool recognises a
/// woken worker because caller attribution proves its conversation.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn g3_targeted_tasks_wake_the_exact_workers_through_exact_targets() {
    let _one = ONE_BROWSER.lock().await;
    let args = ["--pool-pacing-ms", "40", "--max-launches", "4", "--max-active-workers", "8"];
    let world = start(&args).await;
    let root = Root::new(&world.daemon.addr);
    root.call("runtime_ensure", json!({"desired_workers": 3}));
    let status = root.ready(3).await;
    let workers = column(&status, "worker_id");
    let tasks: Vec<Value> = (0..3)
        .map(|slot| root.call("task_dispatch", json!({"instructions": format!("task for slot {slot}"), "slot": slot})))
        .collect();
    for (slot, task) in tasks.iter().enumerate() {
        assert_eq!(task["worker_id"], workers[slot].as_str());
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            let c = root.call("task_collect", json!({"task_id": task["task_id"]}));
            if c["status"] == "completed" {
                let result = c["result"].as_str().unwrap();
                assert!(result.ends_with(&format!("task for slot {slot}")), "no cross-attribution: {result}");
                break;
            }
            assert!(tokio::time::Instant::now() < deadline, "task {slot} never completed: {c:#}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    let oracle = world.fake.hub.oracle();
    for (id, c) in conversations(&oracle) {
        assert_eq!(c["user_turns"].as_array().unwrap().len(), 2, "{id}: its bootstrap and exactly one wake");
    }
}

/// Browser control lost mid-send: a task's wake is typed and sent while the
/// site is slow to take it, and the browser dies then. The agent cannot
/// know whether the prompt went in: `AMBIGUOUS_SUBMISSION`, the daemon fences
/// the slot for reconciliation and nothing is sent again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn browser_control_lost_mid_send_is_reconciled_never_resent() {
    let _one = ONE_BROWSER.lock().await;
    let args = ["--pool-pacing-ms", "40"];
    let mut world = start(&args).await;
    world.fake.hub.keep_sessions();
    let root = Root::new(&world.daemon.addr);
    root.call("runtime_ensure", json!({"desired_workers": 1}));
    let status = root.ready(1).await;
    let worker = column(&status, "worker_id")[0].clone();
    world.fake.hub.hold_submissions.send_replace(true);
    root.call("task_dispatch", json!({"instructions": "a task", "slot": 0}));
    let hub = world.fake.hub.clone();
    e2e::cdp::wait_until(WAIT, || hub.held.load(std::sync::atomic::Ordering::SeqCst) == 1).await.unwrap();
    world.chromium.kill();
    let deadline = tokio::time::Instant::now() + WAIT;
    let outcome = loop {
        let events = root.call("events_list", json!({"limit": 500}))["events"].clone();
        let sends: Vec<Value> = events
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["type"] == "executor.command_completed" && e["data"]["worker_id"] == worker.as_str())
            .cloned()
            .collect();
        if sends.len() == 2 {
            break sends[1]["data"]["outcome"].clone();
        }
        assert!(tokio::time::Instant::now() < deadline, "the wake was never answered: {events:#}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(outcome["code"], "AMBIGUOUS_SUBMISSION", "{outcome:#}");
    let status = root.status_when("the slot fenced", |s| s["state"] == "RECONCILE_REQUIRED").await;
    assert!(status["reasons"].as_array().unwrap().contains(&json!("RECONCILE_REQUIRED")), "{status:#}");
    // Longer than a dispatch round and the pool's pacing: a resend would be queued by now.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let events = root.call("events_list", json!({"limit": 500}))["events"].clone();
    let queued = events
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["type"] == "executor.command_queued" && e["data"]["worker_id"] == worker.as_str())
        .count();
    assert_eq!(queued, 2, "its create and the one wake: nothing sent again");
    assert_eq!(user_turns(&world.fake.hub), 1, "only the bootstrap was taken");
    // The agent told the operator why (host facts: the browser process is gone).
    let lost = events.as_array().unwrap().iter().any(|e| {
        e["type"] == "conversation.error"
            && e["data"]["code"] == "BROWSER_CONTROL_UNAVAILABLE"
            && e["data"]["detail"].as_str().is_some_and(|d| d.contains("exited"))
    });
    assert!(lost, "{events:#}");
}

/// The daemon runs the agent itself for a browser on its own machine
/// (`serve --cdp-user-data-dir`): no separate process, no pairing step, and
/// the two-worker flow passes through it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_daemon_runs_the_agent_for_its_local_browser() {
    let _one = ONE_BROWSER.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let profile = dir.path().join("chromium/profile");
    let bundle = e2e::chromium_dist().unwrap().join("pkg");
    let args = ["--cdp-user-data-dir", profile.to_str().unwrap(), "--cdp-bundle", bundle.to_str().unwrap()];
    let (daemon, fake) = e2e::daemon_and_site(orchestrator(), dir.path(), &args).await.unwrap();
    let _chromium = e2e::cdp::AuthorizedChromium::launch(fake.addr.port(), &dir.path().join("chromium")).unwrap();
    let out = e2e::scenario::two_workers(&daemon.mcp_url(), Duration::from_secs(60))
        .await
        .unwrap_or_else(|e| panic!("{e:#}\n{:#}", fake.hub.oracle()));
    eprintln!("{}", out.trace.join("\n"));
    let oracle = fake.hub.oracle();
    assert_eq!(conversations(&oracle).len(), 2, "{oracle:#}");
    assert_eq!(user_turns(&fake.hub), 3, "two bootstraps and one wake, each once");
}

/// The bounded fallback, behind explicit configuration: `carrier-agent
/// --launch-browser --launch-profile` starts a browser of its own on a
/// dedicated profile (never the user's), reaches it like an authorized
/// session, and stops it when the agent stops. Its `--capacity 1` reaches
/// the daemon in `hello` (protocol v2): the second worker waits for room
/// instead of overfilling the host.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dedicated_profile_is_launched_only_when_configured_and_the_host_capacity_holds() {
    let _one = ONE_BROWSER.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let (daemon, fake) = e2e::daemon_and_site(orchestrator(), dir.path(), &["--pool-pacing-ms", "40"]).await.unwrap();
    let credential = dir.path().join("agent.credential");
    daemon.credential_file(&credential).unwrap();
    let profile = dir.path().join("dedicated-profile");
    let mut agent = std::process::Command::new(orchestrator());
    agent
        .args(["carrier-agent", "--cdp", "--daemon", &daemon.executor_url(), "--capacity", "1"])
        .arg("--credential-file")
        .arg(&credential)
        .arg("--launch-browser")
        .arg(e2e::browser::chromium().unwrap())
        .arg("--launch-profile")
        .arg(&profile)
        .arg("--bundle")
        .arg(e2e::chromium_dist().unwrap().join("pkg"))
        .arg("--state-file")
        .arg(dir.path().join("agent.json"))
        .env("XDG_CONFIG_HOME", dir.path().join("config"))
        .env("XDG_CACHE_HOME", dir.path().join("cache"))
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    for flag in e2e::cdp::dedicated_launch_args(&fake.addr.to_string()) {
        agent.arg(format!("--launch-arg={flag}"));
    }
    let mut agent = agent.spawn().unwrap();

    let root = Root::new(&daemon.addr);
    root.call("runtime_ensure", json!({"desired_workers": 2}));
    root.status_when("one slot admitted", |s| {
        s["slots"].as_array().unwrap().iter().filter(|x| x["admitted"] == true).count() == 1
    })
    .await;
    let active_file = profile.join("DevToolsActivePort");
    assert!(active_file.exists(), "the agent's own browser listens on the dedicated profile");
    // Longer than a few dispatch rounds and the pool's pacing: the second
    // worker would be placed by now if capacity were not honoured.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let status = root.call("runtime_status", json!({}));
    let placed = status["slots"].as_array().unwrap().iter().filter(|x| x["executor_id"].is_string()).count();
    assert_eq!(placed, 1, "a host of capacity 1 holds one conversation: {status:#}");
    assert_eq!(conversations(&fake.hub.oracle()).len(), 1);

    // The agent stops: so does the browser it launched, and only it.
    let flag = format!("--user-data-dir={}", profile.display());
    let browser_running = || {
        std::fs::read_dir("/proc").unwrap().flatten().any(|p| {
            std::fs::read(p.path().join("cmdline")).is_ok_and(|c| c.split(|b| *b == 0).any(|a| a == flag.as_bytes()))
        })
    };
    assert!(browser_running());
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(agent.id() as i32), nix::sys::signal::Signal::SIGTERM).unwrap();
    let exited = agent.wait().unwrap();
    assert!(exited.success(), "{exited}");
    e2e::cdp::wait_until(Duration::from_secs(10), || !browser_running()).await.unwrap();
}

/// The "Run it" block of docs/cdp-carrier.md, run as written (issue 29
/// items 10 and 12): `pair` writes the credential file the agent reads, and
/// `carrier-agent --channel chrome` finds the browser in the channel's
/// place. Only the daemon's port differs (the test's daemon listens on port
/// 0), and `$XDG_STATE_HOME`/`$XDG_CONFIG_HOME` point into the test's
/// directory. First no browser runs: the agent says where it looked, and a
/// spawned worker waits for the browser instead of failing its launch;
/// then the browser starts and the same worker launches by itself.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_documented_cdp_recipe_works_as_written_and_a_worker_waits_for_the_browser() {
    let _one = ONE_BROWSER.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let (xdg_state, xdg_config) = (dir.path().join("xdg-state"), dir.path().join("xdg-config"));
    let daemon =
        e2e::Daemon::start(orchestrator(), &xdg_state.join("chatgpt-orchestrator"), "127.0.0.1:0", &[]).unwrap();
    let fake =
        fakechat::start("127.0.0.1:0".parse().unwrap(), Some(daemon.mcp_url()), fakechat::server::Csp::RealLike, None)
            .await
            .unwrap();
    e2e::install_apps(&fake.hub, e2e::APP_LABEL, fakechat::render::AppState::Enabled);

    let doc = std::fs::read_to_string(e2e::workspace().join("docs/cdp-carrier.md")).unwrap();
    let block = doc.split("## Run it").nth(1).unwrap().split("```sh\n").nth(1).unwrap().split("```").next().unwrap();
    let lines: Vec<String> =
        block.replace("\\\n", " ").lines().map(|l| l.replace("127.0.0.1:7777", &daemon.addr)).collect();
    assert_eq!(lines.len(), 2, "pair, then the agent: {block}");
    // The doc's relative paths (`cdp.credential`, `dist/chromium/pkg`) from
    // a directory of the test's own, holding the workspace's `dist`.
    let cwd = dir.path().join("cwd");
    std::fs::create_dir_all(&cwd).unwrap();
    std::os::unix::fs::symlink(e2e::workspace().join("dist"), cwd.join("dist")).unwrap();
    let shell = |line: &str| {
        let mut cmd = std::process::Command::new("sh");
        // `exec`: the shell becomes the command, so killing it stops the agent
        // (a forked one outlived the test and held its output pipes open).
        cmd.arg("-c")
            .arg(format!("exec {}", line.replacen("orchestrator ", &format!("{} ", orchestrator().display()), 1)))
            .current_dir(&cwd)
            .env("XDG_STATE_HOME", &xdg_state)
            .env("XDG_CONFIG_HOME", &xdg_config)
            .env("HOME", dir.path())
            .env_remove("ORCHESTRATOR_MCP_SECRET");
        cmd
    };
    let paired = shell(&lines[0]).output().unwrap();
    assert!(paired.status.success(), "{paired:?}");
    let log = dir.path().join("agent.log");
    let mut agent = shell(&lines[1])
        .env("RUST_LOG", "info")
        .stdin(std::process::Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();

    let profile = xdg_config.join("google-chrome");
    let looked = profile.join("DevToolsActivePort").display().to_string();
    e2e::cdp::wait_until(WAIT, || std::fs::read_to_string(&log).is_ok_and(|l| l.contains(&looked)))
        .await
        .unwrap_or_else(|_| {
            panic!("the agent never said where it looked: {}", std::fs::read_to_string(&log).unwrap_or_default())
        });
    let root = Root::new(&daemon.addr);
    root.call("worker_spawn", json!({"name": "a", "assignment": {"objective": "wait for the browser"}}));
    let waiting = |root: &Root| {
        let list = root.call("worker_list", json!({}));
        list["workers"].as_array().unwrap().iter().find(|w| w["path"] != "/root").cloned().unwrap()
    };
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let w = waiting(&root);
        assert_ne!(w["state"], "launch_failed", "a missing browser is waited for: {w:#}");
        if w["waiting_for"]["on"] == "browser" {
            assert!(w["waiting_for"]["next_step"].as_str().unwrap().contains("BROWSER_CONTROL_UNAVAILABLE"), "{w:#}");
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "never waiting for the browser: {w:#}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // The person starts the browser with remote debugging: the worker's
    // create is tried again by itself and the conversation comes up.
    let chromium = std::process::Command::new(e2e::browser::chromium().unwrap());
    let mut browser = e2e::cdp::spawn_with(chromium, &fake.addr.to_string(), dir.path(), &profile).unwrap();
    let relaunch = Duration::from_millis(control::schedule::RELAUNCH_FIRST_MS) + WAIT;
    let deadline = tokio::time::Instant::now() + relaunch;
    loop {
        let w = waiting(&root);
        if !conversations(&fake.hub.oracle()).is_empty() {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "never launched once the browser ran: {w:#}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    assert_eq!(conversations(&fake.hub.oracle()).len(), 1, "one conversation, however many tries");
    let status = std::process::Command::new(orchestrator())
        .args(["status", "--json", "--addr", &daemon.addr, "--state-dir"])
        .arg(xdg_state.join("chatgpt-orchestrator"))
        .output()
        .unwrap();
    let status: Value = serde_json::from_slice(&status.stdout).unwrap();
    assert_eq!(status["executors"][0]["executor_id"], "cdp-laptop", "{status:#}");
    let _ = agent.kill();
    let _ = agent.wait();
    let _ = browser.kill();
    let _ = browser.wait();
}

/// The daemon, fakechat serving its strict page CSP (no
/// `'wasm-unsafe-eval'`: the adapter's WebAssembly does not compile in a
/// chatgpt.com page), an authorized Chromium, and the agent evaluating the
/// page bundle in `bundle` (a `dist/chromium/pkg`).
struct StrictWorld {
    daemon: e2e::Daemon,
    fake: fakechat::Running,
    chromium: e2e::cdp::AuthorizedChromium,
    agent: carrier_cdp::Agent,
    _dir: tempfile::TempDir,
}

async fn strict_world(bundle: &std::path::Path) -> StrictWorld {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
    let dir = tempfile::tempdir().unwrap();
    let args = ["--pool-pacing-ms", "40"];
    let daemon = e2e::Daemon::start(orchestrator(), &dir.path().join("state"), "127.0.0.1:0", &args).unwrap();
    let csp = fakechat::server::Csp::Strict;
    let fake = fakechat::start("127.0.0.1:0".parse().unwrap(), Some(daemon.mcp_url()), csp, None).await.unwrap();
    e2e::install_apps(&fake.hub, e2e::APP_LABEL, fakechat::render::AppState::Enabled);
    let chromium = e2e::cdp::AuthorizedChromium::launch(fake.addr.port(), &dir.path().join("chromium")).unwrap();
    let mut config = e2e::cdp::agent_config(&daemon, &chromium.user_data_dir, &dir.path().join("agent.json")).unwrap();
    config.bundle = carrier_cdp::page::Bundle::load(bundle).unwrap();
    let agent = carrier_cdp::Agent::start(config).unwrap();
    e2e::cdp::wait_until(WAIT, || agent.is_connected()).await.unwrap();
    StrictWorld { daemon, fake, chromium, agent, _dir: dir }
}

/// Issue 29 item 20, the page side: under a page CSP without
/// `'wasm-unsafe-eval'` the adapter's WebAssembly does not compile in the
/// agent's world either; the agent's bundle starts the WebAssembly-free
/// build instead, and a pool worker bootstraps through it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_a_csp_that_blocks_webassembly_the_agent_starts_the_fallback_build() {
    let _one = ONE_BROWSER.lock().await;
    let world = strict_world(&e2e::chromium_dist().unwrap().join("pkg")).await;
    let started = std::time::Instant::now();
    let root = Root::new(&world.daemon.addr);
    root.call("runtime_ensure", json!({"desired_workers": 1}));
    let status = root.ready(1).await;
    eprintln!("bootstrapped through the fallback in {:?}", started.elapsed());
    assert_eq!(user_turns(&world.fake.hub), 1, "one bootstrap");
    // The observer (the user's own DevTools) reads the target's console.
    let conversation = column(&status, "conversation_id")[0].clone();
    let observer = Cdp::connect(&world.chromium.ws_url().unwrap()).await.unwrap();
    let console = console_of(&observer, &conversation).await;
    assert!(console.iter().any(|l| l == carrier_cdp::page::FALLBACK_NOTICE), "{console:#?}");
    assert_eq!(world.agent.targets().len(), 1);
}

/// What the page at a URL ending with `url_end` logged to its console so
/// far, from every world, as DevTools replays it to a client enabling `Runtime`.
async fn console_of(observer: &Cdp, url_end: &str) -> Vec<String> {
    let targets = observer.call(None, GetTargetsParams::default()).await.unwrap().target_infos;
    let target = targets.into_iter().find(|t| t.r#type == "page" && t.url.ends_with(url_end)).unwrap();
    let attach = AttachToTargetParams::builder().target_id(target.target_id).flatten(true).build().unwrap();
    let session = observer.call(None, attach).await.unwrap().session_id;
    let mut events = observer.events();
    observer.call(Some(&session), chromiumoxide::cdp::js_protocol::runtime::EnableParams::default()).await.unwrap();
    let mut lines = Vec::new();
    let until = tokio::time::Instant::now() + Duration::from_secs(1);
    while let Ok(Ok(event)) = tokio::time::timeout_at(until, events.recv()).await {
        if event.method == "Runtime.consoleAPICalled" && event.session.as_deref() == Some(session.as_ref()) {
            let args = event.params["args"].as_array().cloned().unwrap_or_default();
            let words: Vec<String> = args.iter().map(|a| a["value"].as_str().unwrap_or_default().to_owned()).collect();
            lines.push(words.join(" "));
        }
    }
    lines
}

/// Issue 29 item 20, when the adapter cannot start (the page's CSP blocks
/// WebAssembly and this bundle has no WebAssembly-free build): the agent
/// hears it from the page within a second and fails the create at once
/// with `ADAPTER_BLOCKED` naming the cause, instead of "the page did not
/// load" at the deadline; `runtime_status` gives it as the pool's reason
/// (a host state: the slot is not failed), nothing is typed, and the
/// create's target is closed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_adapter_that_cannot_start_fails_the_create_at_once_with_its_reason() {
    let _one = ONE_BROWSER.lock().await;
    let bundle = tempfile::tempdir().unwrap();
    for entry in std::fs::read_dir(e2e::chromium_dist().unwrap().join("pkg")).unwrap() {
        let entry = entry.unwrap();
        if entry.file_name() != carrier_cdp::page::FALLBACK {
            std::fs::copy(entry.path(), bundle.path().join(entry.file_name())).unwrap();
        }
    }
    let world = strict_world(bundle.path()).await;
    let root = Root::new(&world.daemon.addr);
    let started = std::time::Instant::now();
    root.call("runtime_ensure", json!({"desired_workers": 1}));
    let status = root
        .status_when("ADAPTER_BLOCKED", |s| s["reasons"].as_array().unwrap().contains(&json!("ADAPTER_BLOCKED")))
        .await;
    let took = started.elapsed();
    assert!(took < Duration::from_secs(15), "answered at once, not at the deadline: {took:?}");
    assert_eq!(status["slots"][0]["admitted"], false, "{status:#}");
    let events = root.call("events_list", json!({"limit": 500}))["events"].clone();
    let done = events.as_array().unwrap().iter().find(|e| e["type"] == "executor.command_completed").unwrap().clone();
    let outcome = &done["data"]["outcome"];
    assert_eq!(outcome["code"], "ADAPTER_BLOCKED", "{done:#}");
    let detail = outcome["detail"].as_str().unwrap();
    assert!(detail.contains("Content-Security-Policy blocks WebAssembly and the fallback did not start"), "{detail}");
    assert!(detail.contains("no WebAssembly-free build"), "{detail}");
    let run = root.call("run_get", json!({}));
    let worker = run["workers"].as_array().unwrap().iter().find(|w| w["path"] != "/root").unwrap().clone();
    assert_ne!(worker["state"], "launch_failed", "a host state, not the worker's failure: {worker:#}");
    assert_eq!(user_turns(&world.fake.hub), 0, "nothing was typed");
    e2e::cdp::wait_until(WAIT, || world.agent.targets().is_empty()).await.unwrap();
    // Closing a target is asynchronous: it leaves the list a moment later.
    let observer = Cdp::connect(&world.chromium.ws_url().unwrap()).await.unwrap();
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let urls = page_urls(&observer).await;
        if !urls.values().any(|u| u.starts_with("https://chatgpt.com/")) {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "the create's target was never closed: {urls:#?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Issue 29 item 9: the agent restarts mid-create, its journal at
/// `tab_opening` with no target recorded (as an agent that stopped before
/// it opened one leaves it), and a tab a person opened shows a URL ending
/// with that create's marker. The replayed create opens a target of its
/// own: a target is adopted only by the id its journal recorded, never by
/// its URL, and the person's tab is never attached to.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_restart_mid_create_a_tab_showing_its_marker_is_not_adopted() {
    use protocol::executor::{Command, CommandOp, CommandOutcome};
    use protocol::{CommandId, WorkerId};

    let _one = ONE_BROWSER.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let fake =
        fakechat::start("127.0.0.1:0".parse().unwrap(), None, fakechat::server::Csp::RealLike, None).await.unwrap();
    let chromium = e2e::cdp::AuthorizedChromium::launch(fake.addr.port(), &dir.path().join("chromium")).unwrap();
    let observer = Cdp::connect(&chromium.ws_url().unwrap()).await.unwrap();
    // The create's key and its marker (`executor_core::tab_marker`: `:` becomes `-`).
    let (key, marker) = ("create:item9", "#orchestrator-create-item9");
    let mine =
        observer.call(None, CreateTargetParams::new(format!("https://chatgpt.com/{marker}"))).await.unwrap().target_id;
    let command = Command {
        command_id: CommandId::from_uuid_bytes([9; 16]),
        worker_id: WorkerId::from_uuid_bytes([7; 16]),
        deadline_ms: now_ms() + 60_000,
        idempotency_key: key.into(),
        op: CommandOp::ConversationCreate {
            prompt: "a bootstrap".into(),
            project_url: None,
            app: None,
            model: None,
            effort: None,
            replaces: None,
        },
    };
    // The journal an agent leaves when it stops between journaling the
    // opening and opening anything.
    let journal = dir.path().join("agent.json");
    let entry = json!({"commandId": command.command_id, "workerId": command.worker_id, "phase": "tab_opening",
        "outcome": null, "seq": 1});
    std::fs::write(&journal, json!({"journal": {key: entry}, "workers": {}, "nextSeq": 1}).to_string()).unwrap();

    // A daemon stand-in replays the create to the restarted agent.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let daemon = format!("ws://{}/executor", listener.local_addr().unwrap());
    let replay = tokio::spawn(command_the_agent(listener, command));
    let bundle = carrier_cdp::page::Bundle::load(&e2e::chromium_dist().unwrap().join("pkg")).unwrap();
    let agent = carrier_cdp::Agent::start(carrier_cdp::Config {
        daemon,
        daemon_pin: None,
        token: format!("exc1.item9.{}", "0".repeat(64)),
        executor_id: "item9".into(),
        browser: carrier_cdp::Endpoint::UserDataDir(chromium.user_data_dir.clone()),
        bundle,
        state_file: journal,
        connect_timeout: Duration::from_secs(5),
        approval_wait: carrier_cdp::connect::APPROVAL_WAIT,
        reconnect_delay: Duration::from_millis(100),
        capacity: None,
        dedicated: None,
    })
    .unwrap();
    let outcome = tokio::time::timeout(Duration::from_secs(60), replay).await.unwrap().unwrap();
    assert!(matches!(outcome, CommandOutcome::Ok { conversation_id: Some(_) }), "{outcome:?}");
    let targets = agent.targets();
    let mine: String = mine.into();
    assert_eq!(targets.len(), 1, "{targets:?}");
    assert!(!targets.contains(&mine), "the person's tab was adopted");
    let infos = observer.call(None, GetTargetsParams::default()).await.unwrap().target_infos;
    let info = infos.iter().find(|t| String::from(t.target_id.clone()) == mine).expect("the person's tab is open");
    assert!(info.url.ends_with(marker), "the person's tab did not move: {}", info.url);
    assert!(!info.attached, "the agent never attached to the person's tab");
    let oracle = fake.hub.oracle();
    assert_eq!(conversations(&oracle).len(), 1, "one conversation, in the agent's own target: {oracle:#}");
    agent.stop().await;
}

fn now_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as u64
}

/// A daemon stand-in on loopback: welcomes the agent, sends `command` and
/// returns its result.
async fn command_the_agent(
    listener: tokio::net::TcpListener,
    command: protocol::executor::Command,
) -> protocol::executor::CommandOutcome {
    use futures_util::{SinkExt, StreamExt};
    use protocol::executor::{DaemonFrame, ExecutorFrame, PROTOCOL_VERSION};
    use tokio_tungstenite::tungstenite::Message;

    let (tcp, _) = listener.accept().await.unwrap();
    let mut ws = tokio_tungstenite::accept_async(tcp).await.unwrap();
    let Some(Ok(Message::Text(hello))) = ws.next().await else { panic!("no hello") };
    assert!(matches!(serde_json::from_str(&hello).unwrap(), ExecutorFrame::Hello { .. }));
    let welcome = DaemonFrame::Welcome {
        protocol_version: PROTOCOL_VERSION,
        heartbeat_ms: 20_000,
        lease_ms: 60_000,
        release: String::new(),
    };
    ws.send(Message::text(serde_json::to_string(&welcome).unwrap())).await.unwrap();
    ws.send(Message::text(serde_json::to_string(&DaemonFrame::Command(command.clone())).unwrap())).await.unwrap();
    loop {
        let Some(Ok(message)) = ws.next().await else { panic!("the agent went away before answering") };
        let Message::Text(text) = message else { continue };
        if let Ok(ExecutorFrame::Result { command_id, outcome }) = serde_json::from_str(&text)
            && command_id == command.command_id
        {
            return outcome;
        }
    }
}

/// The chatgpt.com pages open in the agent's browser now, from DevTools'
/// own list of targets (`/json/list`), not from the agent.
fn chat_pages(chromium: &e2e::cdp::AuthorizedChromium) -> usize {
    use std::io::{BufRead, Read, Write};
    let ws = chromium.ws_url().unwrap();
    let addr = ws.trim_start_matches("ws://").split('/').next().unwrap().to_owned();
    // DevTools keeps the connection open: read exactly the body it announces.
    let mut stream = std::net::TcpStream::connect(&addr).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(stream, "GET /json/list HTTP/1.1\r\nHost: {addr}\r\n\r\n").unwrap();
    let mut reader = std::io::BufReader::new(stream);
    let mut length = 0;
    loop {
        let mut line = String::new();
        reader.read_line(&mut line).unwrap();
        if line.trim().is_empty() {
            break;
        }
        if let Some((name, value)) = line.split_once(':')
            && name.eq_ignore_ascii_case("content-length")
        {
            length = value.trim().parse().unwrap();
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).unwrap();
    let targets: Vec<Value> = serde_json::from_slice(&body).unwrap();
    targets
        .iter()
        .filter(|t| t["type"] == "page" && t["url"].as_str().is_some_and(|u| u.starts_with("https://chatgpt.com/")))
        .count()
}

/// Tab capacity through the CDP carrier (`e2e::scenario::tab_capacity`):
/// eight workers with at most three targets open; an idle worker's target
/// is closed only when its page agrees, and a follow-up reopens its exact
/// conversation in a new target, where the wake lands.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eight_workers_in_three_targets_each_wake_in_its_exact_conversation() {
    let _one = ONE_BROWSER.lock().await;
    let args = ["--max-open-tabs", "3", "--tab-idle-grace-ms", "1000", "--max-active-workers", "8"];
    let world = start(&args).await;
    let seen = e2e::scenario::tab_capacity(
        &world.daemon.mcp_url(),
        &world.fake.hub,
        || {
            let chromium = &world.chromium;
            Box::pin(async move { tokio::task::block_in_place(|| chat_pages(chromium)) })
        },
        Duration::from_secs(60),
    )
    .await
    .unwrap_or_else(|e| panic!("{e:#}"));
    eprintln!("eight workers through the CDP carrier: {seen:?}");
    assert!(world.agent.targets().len() <= 3);
}

/// Worker rollover through the CDP carrier (`e2e::scenario::rollover`):
/// the full conversation's target is left open and unmanaged; the fresh
/// conversation is created in a new target and the worker completes there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_conversation_rolls_over_and_the_worker_completes_in_the_fresh_one() {
    let _one = ONE_BROWSER.lock().await;
    let world = start(&[]).await;
    let seen = e2e::scenario::rollover(&world.daemon.mcp_url(), &world.fake.hub, Duration::from_secs(60))
        .await
        .unwrap_or_else(|e| panic!("{e:#}"));
    eprintln!("rollover through the CDP carrier: {seen:?}");
    assert_eq!(world.agent.targets().len(), 1, "the agent manages only the fresh conversation's target");
    assert_eq!(tokio::task::block_in_place(|| chat_pages(&world.chromium)), 2, "the full one is left open");
}

/// The daemon is SIGKILLed right after each step of a rollover through the
/// CDP carrier, then the agent is restarted (a new process from its
/// journal) after each step: every run still ends with exactly one fresh
/// conversation, one bootstrap in it, and nothing more in the full one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_at_each_rollover_step_still_ends_with_one_fresh_conversation() {
    let _one = ONE_BROWSER.lock().await;
    for (crash, index) in
        ["daemon", "agent"].into_iter().flat_map(|c| (0..e2e::scenario::ROLLOVER_STEPS.len()).map(move |i| (c, i)))
    {
        let step = e2e::scenario::ROLLOVER_STEPS[index];
        // A fresh browser, daemon and agent per run: the targets a run leaves
        // open (the full conversation is never closed) do not slow the next.
        let mut world = start(&[]).await;
        let url = world.daemon.mcp_url();
        let mut run = e2e::scenario::RolloverRun::start(&url, Duration::from_secs(3)).await.unwrap();
        run.until(index, Duration::from_secs(60)).await.unwrap_or_else(|e| panic!("{crash} {step}: {e:#}"));
        match crash {
            "daemon" => {
                world.daemon.restart().unwrap();
                run.reconnect().await.unwrap();
            }
            _ => {
                world.agent.restart().await.unwrap();
                e2e::cdp::wait_until(WAIT, || world.agent.is_connected()).await.unwrap();
            }
        }
        let seen = run
            .finish(&world.fake.hub, Duration::from_secs(60))
            .await
            .unwrap_or_else(|e| panic!("{crash} {step}: {e:#}"));
        eprintln!("{crash} crashed after {step}: {seen:?}");
    }
}

/// Model pinning through the CDP carrier (`e2e::scenario::model_pinning`):
/// the same adapter sets and verifies the picker in targets of the agent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pinned_model_is_used_and_one_the_picker_cannot_show_fails_closed() {
    let _one = ONE_BROWSER.lock().await;
    let world = start(&[]).await;
    let seen = e2e::scenario::model_pinning(&world.daemon.mcp_url(), &world.fake.hub, Duration::from_secs(60))
        .await
        .unwrap_or_else(|e| panic!("{e:#}"));
    eprintln!("model pinning through the CDP carrier: {seen:?}");
}
