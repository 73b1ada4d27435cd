//! The WebExtension executor end to end in headless Chromium: the real
//! daemon, fakechat as chatgpt.com, `dist/chromium` (built by `cargo xtask
//! dist`) loaded and paired through its options page. fakechat's oracle is
//! the ground truth for tabs and turns.

mod support;

use std::path::Path;
use std::time::Duration;

use e2e::World;
use e2e::browser::{eval, until};
use mcp_client::Client;
use serde_json::{Value, json};

/// One browser at a time: three Chromiums on two cores starve each other.
static ONE_BROWSER: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Runs an end-to-end test body on its own world, one browser at a time,
/// once: a stall fails the test like any other failure (it is a finding;
/// two full local runs of session 18 saw none).
async fn e2e<F, Fut>(body: F)
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let _one = ONE_BROWSER.lock().await;
    if let Err(failed) = tokio::spawn(body()).await {
        std::panic::resume_unwind(failed.into_panic());
    }
}

/// fakechat (real-like CSP) and Chromium with the extension, no daemon: for
/// tests of what the extension does on its own.
async fn browser_without_daemon() -> (tempfile::TempDir, fakechat::Running, e2e::Chromium) {
    let dir = tempfile::tempdir().unwrap();
    let fake =
        fakechat::start("127.0.0.1:0".parse().unwrap(), None, fakechat::server::Csp::RealLike, None).await.unwrap();
    let chromium = e2e::Chromium::launch(&e2e::chromium_dist().unwrap(), fake.addr.port(), dir.path()).await.unwrap();
    (dir, fake, chromium)
}

fn orchestrator() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_orchestrator"))
}

/// The conversations fakechat has, by id.
fn conversations(oracle: &Value) -> serde_json::Map<String, Value> {
    oracle["conversations"].as_object().cloned().unwrap_or_default()
}

fn turns(conversation: &Value) -> Vec<Value> {
    conversation["user_turns"].as_array().cloned().unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_workers_in_managed_tabs_and_every_prompt_lands_exactly_once() {
    e2e(two_workers_in_managed_tabs_and_every_prompt_lands_exactly_once_body).await;
}

async fn two_workers_in_managed_tabs_and_every_prompt_lands_exactly_once_body() {
    let world = World::start(orchestrator(), &[]).await.unwrap();
    // The user's own chatgpt.com tab, with a conversation of its own.
    let mine = world.chromium.open("https://chatgpt.com/").await.unwrap();
    let my_conversation = e2e::browser::chat_by_hand(&mine, "my own chat, not the orchestrator's").await.unwrap();
    // The canary's pre-flight first: a page read in a tab of the
    // extension's own, nothing clicked, typed or focused, the tab closed.
    let state = world.dir.path().join("state");
    support::inspect_new_chat_read_only(&world.fake, &world.daemon.addr, &state, 1).await;
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while chat_tabs(&world.chromium).await != 1 {
        assert!(std::time::Instant::now() < deadline, "only the person's tab is left");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // The recorder counts: the person's own tab saw their keys.
    let oracle = world.fake.hub.oracle();
    let typed = oracle["tabs"].as_object().unwrap().values().filter(|t| t["interactions"]["keys"].as_u64() > Some(0));
    assert_eq!(typed.count(), 1, "{:#}", oracle["tabs"]);
    assert_eq!(eval::<String>(&mine, "location.pathname").await.unwrap(), format!("/c/{my_conversation}"));

    let url = world.daemon.mcp_url();
    let output = match tokio::task::spawn_blocking(move || support::python("extension_flow.py", &[&url])).await {
        Ok(output) => output,
        Err(failed) => {
            let oracle = world.fake.hub.oracle();
            let texts: Vec<_> = conversations(&oracle)
                .keys()
                .map(|id| {
                    world.fake.hub.read(id, |c| {
                        c.turns
                            .iter()
                            .map(|t| format!("{:?}: {}", t.role, t.text.chars().take(160).collect::<String>()))
                            .collect::<Vec<_>>()
                    })
                })
                .collect();
            let status = (world.chromium.status().await, world.chromium.workers().await);
            panic!("{failed}\nstatus {status:?}\nturns {texts:#?}\n{oracle:#}");
        }
    };
    let summary: Value = output.lines().rev().find_map(|l| serde_json::from_str(l).ok()).expect("a JSON summary");
    let oracle = world.fake.hub.oracle();
    let conversations = conversations(&oracle);

    // conversation.bound carried two distinct UUIDs, one per worker.
    let bound: Vec<(String, String)> =
        serde_json::from_value(summary["bound"].clone()).unwrap_or_else(|e| panic!("{e}: {summary}"));
    let conversation_of = |worker: &Value| -> String {
        let found: Vec<&String> = bound.iter().filter(|(w, _)| w == worker.as_str().unwrap()).map(|(_, c)| c).collect();
        assert_eq!(found.len(), 1, "one binding per worker: {bound:?}");
        found[0].clone()
    };
    let (a, b) = (conversation_of(&summary["a"]), conversation_of(&summary["b"]));
    assert_ne!(a, b);
    assert_ne!(a, my_conversation);

    // Exactly the three conversations: A, B and the user's own (no duplicate tabs or chats).
    let mut ids: Vec<&String> = conversations.keys().collect();
    ids.sort();
    let mut expected = vec![&a, &b, &my_conversation];
    expected.sort();
    assert_eq!(ids, expected, "{oracle:#}");

    // A: one bootstrap, then the wake, both in the same tab; B: one bootstrap.
    let a_turns = turns(&conversations[&a]);
    assert_eq!(a_turns.iter().map(|t| t["bootstrap"].as_bool().unwrap()).collect::<Vec<_>>(), [true, false]);
    assert_eq!(a_turns[0]["tab"], a_turns[1]["tab"], "the wake landed in A's existing tab");
    let b_turns = turns(&conversations[&b]);
    assert_eq!(b_turns.len(), 1);
    assert!(b_turns[0]["bootstrap"].as_bool().unwrap());
    // The user's tab: still its one hand-typed turn; nothing clicked anywhere.
    assert_eq!(turns(&conversations[&my_conversation]).len(), 1);
    for (id, c) in &conversations {
        assert_eq!(c["retry_clicks"], 0, "{id}");
        assert_eq!(c["stop_clicks"], 0, "{id}");
        assert_eq!(c["errors"], json!([]), "{id}");
    }
    // Chromium's own list of the extension's errors (manifest and runtime, as
    // chrome://extensions shows them in developer mode) is empty.
    assert_eq!(world.chromium.extension_errors().await.unwrap(), Vec::<String>::new());
}

/// Root over fakechat's own MCP client (Rust), for steps between restarts.
struct Root {
    client: Client,
    capability: String,
    cursor: u64,
}

impl Root {
    async fn connect(mcp_url: &str) -> Root {
        let mut client = Client::connect(mcp_url).await.unwrap();
        let created = client.call("run_create", json!({"title": "restarts"})).await.unwrap().unwrap();
        Root { client, capability: created["root_capability"].as_str().unwrap().into(), cursor: 0 }
    }

    /// A fresh MCP session (the old one died with the daemon).
    async fn reconnect(&mut self, mcp_url: &str) {
        self.client = Client::connect(mcp_url).await.unwrap();
    }

    async fn call(&mut self, tool: &str, mut args: Value) -> Value {
        args["capability"] = json!(self.capability);
        self.client.call(tool, args).await.unwrap().unwrap_or_else(|e| panic!("{tool}: {e}"))
    }

    /// Waits (60 s) for an event matching `wanted`; reconnects across a daemon restart.
    async fn wait(&mut self, mcp_url: &str, what: &str, wanted: impl Fn(&Value) -> bool) -> Value {
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        while std::time::Instant::now() < deadline {
            let args = json!({"capability": self.capability, "after_cursor": self.cursor, "timeout_ms": 3000});
            let page = match self.client.call("events_wait", args).await {
                Ok(Ok(page)) => page,
                _ => {
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    if let Ok(client) = Client::connect(mcp_url).await {
                        self.client = client;
                    }
                    continue;
                }
            };
            for event in page["events"].as_array().unwrap() {
                self.cursor = event["cursor"].as_u64().unwrap();
                if wanted(event) {
                    return event.clone();
                }
            }
            self.cursor = page["cursor"].as_u64().unwrap();
        }
        panic!("no {what} within 60 s");
    }
}

/// Waits until fakechat's conversation is idle (its last turn ended).
async fn idle(world: &World, conversation: &str) {
    for _ in 0..200 {
        if world.fake.hub.oracle()["conversations"][conversation]["state"] == "idle" {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("conversation {conversation} never went idle");
}

fn completed(worker: &str) -> impl Fn(&Value) -> bool + '_ {
    move |e| e["type"] == "worker.completed" && e["data"]["worker_id"] == worker
}

/// A person's everyday browser and daemon, in one browser: the extension
/// reloaded, the daemon restarted between commands and killed mid-send;
/// (issue 46) the extension updated to a higher version at a command's
/// dispatch and at its ack; then (issue 44, `e2e::scenario::everyday`) the service worker stopped
/// idle and mid-command, the daemon away for seconds and past the backoff's
/// cap, the browser restarted with and without its tabs restored, a
/// managed tab closed by a person, one navigated to their own chat, and one
/// moved between windows and hidden.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reloads_restarts_and_dropped_sockets_lose_no_binding_and_duplicate_nothing() {
    e2e(reloads_restarts_and_dropped_sockets_lose_no_binding_and_duplicate_nothing_body).await;
}

async fn reloads_restarts_and_dropped_sockets_lose_no_binding_and_duplicate_nothing_body() {
    let mut world = World::start(orchestrator(), &[]).await.unwrap();
    let url = world.daemon.mcp_url();
    let mut root = Root::connect(&url).await;
    let spawned = root
        .call("worker_spawn", json!({"name": "alpha", "assignment": {"objective": "Build\nscenario: progress \"up\"; complete \"first\""}}))
        .await;
    let worker = spawned["worker"]["worker_id"].as_str().unwrap().to_owned();
    root.wait(&url, "completion", completed(&worker)).await;

    // 1. The extension reloads (an update, a crash): its tab comes back, bound.
    world.chromium.reload_extension().await.unwrap();
    root.call("worker_followup", json!({"worker_id": worker, "instructions": "scenario: complete \"after reload\""}))
        .await;
    root.wait(&url, "completion", completed(&worker)).await;

    // 2. The daemon restarts between commands.
    world.daemon.restart().unwrap();
    root.reconnect(&url).await;
    root.call("worker_followup", json!({"worker_id": worker, "instructions": "scenario: complete \"after restart\""}))
        .await;
    root.wait(&url, "completion", completed(&worker)).await;

    // 3. The socket drops mid-send: the daemon dies as soon as the wake is queued,
    //    dispatched, or acknowledged (the extension is then submitting it).
    let conversation = world.fake.hub.oracle()["conversations"].as_object().unwrap().keys().next().unwrap().clone();
    for moment in ["executor.command_queued", "executor.command_dispatched", "executor.command_acked"] {
        // The agent reports completion before its turn ends: let the turn end first.
        idle(&world, &conversation).await;
        let instructions = format!("scenario: complete \"dropped at {moment}\"");
        root.call("worker_followup", json!({"worker_id": worker, "instructions": instructions})).await;
        root.wait(&url, moment, |e| e["type"] == moment && e["data"]["worker_id"] == worker.as_str()).await;
        world.daemon.restart().unwrap();
        root.reconnect(&url).await;
        // The command completes (live, or from the journal on replay) and the worker finishes, in either order.
        let after_restart = root.cursor;
        let is_done =
            |e: &Value| e["type"] == "executor.command_completed" && e["data"]["worker_id"] == worker.as_str();
        let done = root.wait(&url, "command result", is_done).await;
        assert_eq!(done["data"]["outcome"]["status"], "ok", "{moment}: {done}");
        root.cursor = after_restart;
        root.wait(&url, "completion", completed(&worker)).await;
    }

    let oracle = world.fake.hub.oracle();
    let conversations = conversations(&oracle);
    assert_eq!(conversations.len(), 1, "one conversation, never a second tab: {oracle:#}");
    let (_, conversation) = conversations.iter().next().unwrap();
    let bootstraps: Vec<bool> = turns(conversation).iter().map(|t| t["bootstrap"].as_bool().unwrap()).collect();
    assert_eq!(
        bootstraps,
        [true, false, false, false, false, false],
        "one bootstrap and exactly five wakes: {oracle:#}"
    );
    let tabs: Vec<&Value> =
        oracle["tabs"].as_object().unwrap().values().filter(|t| !t["conversation"].is_null()).collect();
    assert_eq!(tabs.len(), 1, "one managed tab across every restart: {oracle:#}");
    assert!(world.chromium.wait_connected(Duration::from_secs(10)).await, "the extension reconnected");

    // 4. The browser stops the extension's service worker, idle and mid-command.
    let budget = Duration::from_secs(90);
    // (Issue 46) The extension updated by the browser at a command's dispatch and at its ack.
    let scratch = world.dir.path().join("updates");
    let updated = e2e::scenario::extension_updated(&url, &world.fake.hub, &mut world.chromium, &scratch, budget)
        .await
        .unwrap_or_else(|e| panic!("{e:#}"));
    eprintln!("measured: extension updated mid-command, completed after {updated:?}");
    let mut browser = e2e::lifecycle::ChromiumLifecycle(&world.chromium);
    let stopped = e2e::scenario::background_stopped(&url, &world.fake.hub, &mut browser, budget)
        .await
        .unwrap_or_else(|e| panic!("{e:#}"));
    eprintln!("measured: service worker stopped, follow-up completed after {stopped:?}");

    // 5. The daemon away for seconds, then for longer than the backoff's
    //    cap (10 s): the popup says so, and the extension comes back by itself.
    let outages = [Duration::from_secs(3), Duration::from_secs(25)];
    let away = e2e::scenario::daemon_away(&mut world.daemon, &world.fake.hub, &mut browser, &outages, budget)
        .await
        .unwrap_or_else(|e| panic!("{e:#}"));
    eprintln!("measured: daemon away, extension back after {away:?}");

    // 6. The browser restarts, with its tabs restored and without.
    let dist = e2e::chromium_dist().unwrap();
    let profile = world.dir.path().join("chromium");
    let mut restarts = e2e::restart::ChromiumRestarts {
        chromium: &mut world.chromium,
        extension: Some(&dist),
        port: world.fake.addr.port(),
        dir: &profile,
    };
    let restarted = e2e::scenario::browser_restarted(&url, &world.fake.hub, &mut restarts, budget)
        .await
        .unwrap_or_else(|e| panic!("{e:#}"));
    eprintln!("measured: browser restarted, {restarted:?}");

    // 7. A person closes a managed tab.
    let mut hands = e2e::person::ChromiumHands(&world.chromium);
    let back =
        e2e::scenario::tab_closed(&url, &world.fake.hub, &mut hands, budget).await.unwrap_or_else(|e| panic!("{e:#}"));
    eprintln!("measured: managed tab closed by a person, follow-up completed after {back:?}");

    // 8. A person navigates a managed tab to a chat of their own.
    let mine = world.chromium.open("https://chatgpt.com/").await.unwrap();
    let theirs = e2e::browser::chat_by_hand(&mine, "a person's chat").await.unwrap();
    let said = e2e::scenario::tab_navigated(&url, &world.fake.hub, &mut hands, &theirs, budget)
        .await
        .unwrap_or_else(|e| panic!("{e:#}"));
    eprintln!("a navigated tab: {said}");

    // 9. A person drags a managed tab into a window of its own, minimizes
    //    it, covers it with another window and drags it back.
    let placed =
        e2e::scenario::tab_placed(&url, &world.fake.hub, &mut hands, budget).await.unwrap_or_else(|e| panic!("{e:#}"));
    eprintln!("measured: a tab moved and hidden, {placed:?}");
}

/// Issue 46: the extension installed from the bundle's CRX through
/// Chromium's own off-store route on Linux (a file in the profile's
/// `External Extensions`: the browser installs it, enabled, at its start),
/// paired, then the browser quit and started with its tabs restored and cut
/// off and started without them, with no extension flag on any start
/// (`e2e::scenario::browser_restarted`): it is there after each, reconnects
/// by itself, and the worker goes on exactly once each time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_extension_installed_from_the_bundles_crx_survives_browser_restarts() {
    e2e(installed_crx_body).await;
}

async fn installed_crx_body() {
    let dir = tempfile::tempdir().unwrap();
    let (daemon, fake) = e2e::daemon_and_site(orchestrator(), dir.path(), &[]).await.unwrap();
    let crx = e2e::packed_crx().unwrap();
    let profile = dir.path().join("chromium");
    let port = fake.addr.port();
    let mut chromium = e2e::Chromium::launch_crx(&crx, env!("CARGO_PKG_VERSION"), port, &profile).await.unwrap();
    chromium.pair(&daemon.executor_url(), &daemon.credential().unwrap()).await.unwrap();
    let mut restarts = e2e::restart::ChromiumRestarts { chromium: &mut chromium, extension: None, port, dir: &profile };
    let restarted =
        e2e::scenario::browser_restarted(&daemon.mcp_url(), &fake.hub, &mut restarts, Duration::from_secs(60))
            .await
            .unwrap_or_else(|e| panic!("{e:#}\n{:#}", fake.hub.oracle()));
    eprintln!("measured: Chromium with the CRX installed, restarted, {restarted:?}");
}

/// Issue 46: `orchestrator setup --yes` on a fresh state directory with
/// Chromium present: it starts the daemon, names the bundle's package for
/// Chromium's off-store install, the person starts Chromium, the
/// extension's pairing page (opened by itself) asks and setup accepts its
/// code, and every link is proven: connected at the daemon's version,
/// fakechat's new chat read read-only, MCP answering locally and for the
/// exposed host. No credential is printed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn setup_yes_installs_pairs_and_proves_every_link() {
    e2e(setup_body).await;
}

async fn setup_body() {
    let dir = tempfile::tempdir().unwrap();
    let fake =
        fakechat::start("127.0.0.1:0".parse().unwrap(), None, fakechat::server::Csp::RealLike, None).await.unwrap();
    let extra = ["--app-label", "Orchestrator e2e", "--expose-host", "orch.example.test"];
    let _stop = e2e::setup::StopDaemon(dir.path().join("state"));
    let bundle = e2e::packed_crx().unwrap().parent().unwrap().to_owned();
    let run = e2e::setup::setup_yes(orchestrator(), &bundle, dir.path(), fake.addr.port(), true, &extra).await;
    let run = run.unwrap_or_else(|e| panic!("{e:#}"));
    let printed = run.lines.join("\n");
    assert_eq!(run.code, Some(0), "{printed}");
    for link in ["daemon", "extension", "paired", "connected", "chatgpt.com", "mcp", "exposed"] {
        assert!(
            run.lines.iter().any(|l| l.starts_with(&format!("  ok    {link:<12} "))),
            "no proven {link} line:\n{printed}"
        );
    }
    assert!(!printed.contains("FAIL"), "{printed}");
    assert!(
        printed.contains("https://chatgpt.com/ read in a background tab of its own, read-only: ready"),
        "{printed}"
    );
    assert!(!printed.contains("exc1."), "a credential was printed:\n{printed}");
    let secret = std::fs::read_to_string(dir.path().join("state/mcp-secret")).unwrap();
    assert!(!printed.contains(secret.trim()), "the MCP secret was printed:\n{printed}");
    // The extension's own page says so too, and nothing was typed or clicked in the read page.
    assert_eq!(run.chromium.status().await.unwrap(), "connected");
    let oracle = fake.hub.oracle();
    for tab in oracle["tabs"].as_array().cloned().unwrap_or_default() {
        let interactions = &tab["interactions"];
        assert!(["clicks", "keys"].iter().all(|k| interactions[k].as_u64().unwrap_or(0) == 0), "{tab}");
    }
    eprintln!(
        "measured: setup --yes, fresh state directory to every link proven (Chromium started by the test at setup's word), {:.1} s",
        run.took.as_secs_f64()
    );
}

/// Issue 46: setup's daemon on another port than the one the pairing page
/// asks by itself: the page, already asking at the default, is pointed at
/// the endpoint setup printed and its button pressed; that offer replaces
/// the first, and setup proves every link.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn setup_on_another_port_pairs_once_the_endpoint_is_typed() {
    e2e(setup_elsewhere_body).await;
}

async fn setup_elsewhere_body() {
    let dir = tempfile::tempdir().unwrap();
    let fake =
        fakechat::start("127.0.0.1:0".parse().unwrap(), None, fakechat::server::Csp::RealLike, None).await.unwrap();
    let _stop = e2e::setup::StopDaemon(dir.path().join("state"));
    let bundle = e2e::packed_crx().unwrap().parent().unwrap().to_owned();
    let run = e2e::setup::setup_yes(orchestrator(), &bundle, dir.path(), fake.addr.port(), false, &[]).await;
    let run = run.unwrap_or_else(|e| panic!("{e:#}"));
    assert_eq!(run.code, Some(0), "{}", run.lines.join("\n"));
    assert!(!run.lines.iter().any(|l| l.contains("127.0.0.1:7777")), "{}", run.lines.join("\n"));
    assert_eq!(run.chromium.status().await.unwrap(), "connected");
    // What a person sees on the pairing page once setup accepted its code
    // (docs/screenshots/pairing.png, regenerated by this test).
    let page = run.pairing_page.expect("the endpoint was typed into the pairing page");
    let paired = "document.querySelector('#setup-status').textContent.startsWith('paired as ')";
    e2e::browser::until(&page, paired).await.unwrap();
    let shot = e2e::workspace().join("docs/screenshots/pairing.png");
    let params = chromiumoxide::page::ScreenshotParams::builder().full_page(true).build();
    page.save_screenshot(params, &shot).await.unwrap();
}

/// Issue 46: a daemon of another protocol version refuses the extension
/// (close 4002, its reason naming both builds and which to update; an
/// impostor on loopback stands in for an older daemon): the popup a person
/// opens says so in its words and the daemon's, is not live, and the
/// extension does not hammer the daemon (only its keepalive alarm tries
/// again, every 30 s in Chrome). Its hello named its own build.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_daemon_of_another_protocol_version_is_named_in_the_popup() {
    e2e(version_refusal_body).await;
}

async fn version_refusal_body() {
    use futures_util::{SinkExt, StreamExt};
    use std::sync::{Arc, Mutex};
    use tokio_tungstenite::tungstenite::Message;
    use tokio_tungstenite::tungstenite::protocol::CloseFrame;
    let (_dir, _fake, chromium) = browser_without_daemon().await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let endpoint = format!("ws://{}/executor", listener.local_addr().unwrap());
    let hellos: Arc<Mutex<Vec<Value>>> = Arc::default();
    let heard = hellos.clone();
    let older_daemon = tokio::spawn(async move {
        loop {
            let (tcp, _) = listener.accept().await.unwrap();
            let Ok(mut ws) = tokio_tungstenite::accept_async(tcp).await else { continue };
            let Some(Ok(Message::Text(text))) = ws.next().await else { continue };
            let hello: Value = serde_json::from_str(&text).unwrap();
            let reason = format!(
                "PROTOCOL_VERSION_MISMATCH: update the daemon: executor {} speaks v{}, daemon 0.0.9 v1-v3",
                hello["host"]["release"].as_str().unwrap_or("(unsaid)"),
                hello["protocolVersion"]
            );
            heard.lock().unwrap().push(hello);
            let close = CloseFrame { code: 4002.into(), reason: reason.into() };
            let _ = ws.send(Message::Close(Some(close))).await;
        }
    });
    let token = format!("exc1.ext-9.{}", "0".repeat(64));
    chromium.submit_pairing(&endpoint, &token).await.unwrap().close().await.unwrap();
    let mut said = String::new();
    for _ in 0..100 {
        said = chromium.popup_connection().await.unwrap();
        if said.contains("PROTOCOL_VERSION_MISMATCH") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let release = env!("CARGO_PKG_VERSION");
    assert_eq!(
        said,
        format!(
            "Not connected: the daemon and this extension speak no common protocol version \
             (PROTOCOL_VERSION_MISMATCH: update the \
             daemon: executor {release} speaks v{}, daemon 0.0.9 v1-v3)",
            protocol::executor::PROTOCOL_VERSION
        )
    );
    let popup = chromium.open(&chromium.extension_url("popup.html")).await.unwrap();
    e2e::browser::until(&popup, "!!document.querySelector('#connection')").await.unwrap();
    let live: bool =
        e2e::browser::eval(&popup, "document.querySelector('#connection').classList.contains('live')").await.unwrap();
    assert!(!live, "a refused extension is not shown live");
    let before = hellos.lock().unwrap().len();
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(hellos.lock().unwrap().len(), before, "no quick retry after 4002");
    assert_eq!(hellos.lock().unwrap()[0]["host"]["release"], release, "the hello named its build");
    older_daemon.abort();
}

/// A hostile day (issue 44, `e2e::scenario::hostile_day`): four workers
/// kept busy while a seeded sequence of service-worker stops, discarded,
/// frozen, moved, hidden and closed tabs, browser sleeps and crashes and
/// daemon SIGKILLs falls on them; nothing doubled, nothing lost, nothing
/// typed into a person's chat, no follow-up past the stall bound. Two
/// minutes here; `cargo xtask soak --minutes N [--seed S]` runs a longer
/// day (`SOAK_MINUTES`, `SOAK_SEED`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hostile_day_of_browser_and_daemon_trouble_doubles_and_loses_nothing() {
    e2e(hostile_day_body).await;
}

async fn hostile_day_body() {
    let env = |name: &str, default: u64| std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default);
    let day = e2e::scenario::Day {
        seed: env("SOAK_SEED", 44),
        length: Duration::from_secs(60 * env("SOAK_MINUTES", 2)),
        workers: 4,
    };
    let mut world = World::start(orchestrator(), &[]).await.unwrap();
    // The day, its last step, its start and settling (the stall bound
    // each, at most three times) and a margin.
    let bound = day.length + 5 * e2e::scenario::STALL;
    let soak = tokio::time::timeout(bound, e2e::scenario::hostile_day(&mut world, day))
        .await
        .unwrap_or_else(|_| panic!("seed {}: the day never ended", day.seed))
        .unwrap_or_else(|e| panic!("seed {}: {e:#}", day.seed));
    println!("{soak}");
    let problems = soak.problems();
    assert!(problems.is_empty(), "{problems:#?}\n{soak}\n{}", soak.trace.join("\n"));
}

/// A daemon impostor on loopback: accepts the extension's hello, then
/// sends `commands` one by one and returns each one's terminal result.
async fn command_the_extension(
    listener: tokio::net::TcpListener,
    commands: Vec<protocol::executor::Command>,
) -> Vec<protocol::executor::CommandOutcome> {
    use futures_util::{SinkExt, StreamExt};
    use protocol::executor::{DaemonFrame, ExecutorFrame, PROTOCOL_VERSION};
    use tokio_tungstenite::tungstenite::Message;

    let (tcp, _) = listener.accept().await.unwrap();
    let mut ws = tokio_tungstenite::accept_async(tcp).await.unwrap();
    let hello = loop {
        if let Some(Ok(Message::Text(text))) = ws.next().await {
            break serde_json::from_str::<ExecutorFrame>(&text).unwrap();
        }
    };
    assert!(matches!(hello, ExecutorFrame::Hello { .. }));
    let welcome = DaemonFrame::Welcome {
        protocol_version: PROTOCOL_VERSION,
        heartbeat_ms: 20_000,
        lease_ms: 60_000,
        release: String::new(),
    };
    let mut outcomes = Vec::new();
    ws.send(Message::text(serde_json::to_string(&welcome).unwrap())).await.unwrap();
    for command in commands {
        ws.send(Message::text(serde_json::to_string(&DaemonFrame::Command(command.clone())).unwrap())).await.unwrap();
        loop {
            let Some(Ok(Message::Text(text))) = ws.next().await else { continue };
            if let Ok(ExecutorFrame::Result { command_id, outcome }) = serde_json::from_str(&text)
                && command_id == command.command_id
            {
                outcomes.push(outcome);
                break;
            }
        }
    }
    outcomes
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tab_the_extension_did_not_open_is_never_touched_and_commands_naming_it_are_refused() {
    e2e(a_tab_the_extension_did_not_open_is_never_touched_and_commands_naming_it_are_refused_body).await;
}

async fn a_tab_the_extension_did_not_open_is_never_touched_and_commands_naming_it_are_refused_body() {
    use protocol::executor::{Command, CommandOp, CommandOutcome};
    use protocol::{CommandId, ErrorCode, WorkerId};

    let (_dir, fake, chromium) = browser_without_daemon().await;
    let mine = chromium.open("https://chatgpt.com/").await.unwrap();
    let my_conversation = e2e::browser::chat_by_hand(&mine, "mine").await.unwrap();

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let endpoint = format!("ws://{}/executor", listener.local_addr().unwrap());
    let conversation_id: protocol::ConversationId = my_conversation.parse().unwrap();
    let command = |n: u8, op: CommandOp| Command {
        command_id: CommandId::from_uuid_bytes([n; 16]),
        worker_id: WorkerId::from_uuid_bytes([7; 16]),
        deadline_ms: u64::MAX / 2,
        idempotency_key: format!("rogue-{n}"),
        op,
    };
    let url = format!("https://chatgpt.com/c/{my_conversation}");
    let commands = vec![
        command(
            1,
            CommandOp::ConversationSend {
                conversation_id: conversation_id.clone(),
                prompt: "hijack".into(),
                app: None,
                model: None,
                effort: None,
            },
        ),
        command(2, CommandOp::ConversationInspect { conversation_id: conversation_id.clone() }),
        command(3, CommandOp::ConversationOpen { conversation_id: conversation_id.clone(), url }),
        command(4, CommandOp::ConversationClose { conversation_id, park: false }),
    ];
    let impostor = tokio::spawn(command_the_extension(listener, commands));
    chromium.pair(&endpoint, &format!("exc1.impostor.{}", "0".repeat(64))).await.unwrap();
    let outcomes = tokio::time::timeout(Duration::from_secs(30), impostor).await.unwrap().unwrap();
    for outcome in &outcomes {
        assert!(matches!(outcome, CommandOutcome::Error { code: ErrorCode::UnmanagedTarget, .. }), "{outcome:?}");
    }
    assert_eq!(outcomes.len(), 4);
    // The oracle: still the one hand-typed turn, and the tab is still open.
    let oracle = fake.hub.oracle();
    assert_eq!(conversations(&oracle).len(), 1);
    assert_eq!(turns(&conversations(&oracle)[&my_conversation]).len(), 1, "{oracle:#}");
    assert_eq!(eval::<String>(&mine, "location.pathname").await.unwrap(), format!("/c/{my_conversation}"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_popup_checks_the_current_chatgpt_page_without_touching_it() {
    e2e(the_popup_checks_the_current_chatgpt_page_without_touching_it_body).await;
}

/// The popup's "Check this page" on the person's own (unmanaged) chatgpt.com
/// tab: the adapter's reading of the live page, read-only.
async fn the_popup_checks_the_current_chatgpt_page_without_touching_it_body() {
    use chromiumoxide::cdp::browser_protocol::target::CreateTargetParams;

    let (_dir, fake, chromium) = browser_without_daemon().await;
    let mine = chromium.open("https://chatgpt.com/").await.unwrap();
    let my_conversation = e2e::browser::chat_by_hand(&mine, "mine").await.unwrap();
    until(&mine, "!!document.querySelector('[data-testid=\"copy-turn-action-button\"][aria-label=\"Copy response\"]')")
        .await
        .unwrap();
    // The popup in a window of its own, so the chatgpt.com tab stays the active tab of its window.
    let target =
        CreateTargetParams::builder().url(chromium.extension_url("popup.html")).new_window(true).build().unwrap();
    let popup = chromium.browser.new_page(target).await.unwrap();
    until(&popup, "document.body.hasAttribute('data-ready')").await.unwrap();
    popup.evaluate("document.querySelector('#check').click(); true").await.unwrap();
    until(&popup, "document.querySelector('#page-check').textContent.includes('state:')").await.unwrap();
    let check = eval::<String>(&popup, "document.querySelector('#page-check').textContent").await.unwrap();
    assert!(check.contains(&format!("https://chatgpt.com/c/{my_conversation}")), "{check}");
    assert!(check.contains("adapter: chatgpt-dom "), "{check}");
    assert!(check.contains("state: idle"), "{check}");
    assert!(check.contains("stop buttons: 0"), "{check}");
    assert!(check.contains("submit: would type the prompt"), "{check}");
    assert!(check.contains("Editor: found"), "{check}");
    // Read-only: still the one hand-typed turn, nothing clicked.
    let oracle = fake.hub.oracle();
    let conversation = &conversations(&oracle)[&my_conversation];
    assert_eq!(turns(conversation).len(), 1, "{oracle:#}");
    assert_eq!(conversation["stop_clicks"], 0);
    assert_eq!(conversation["retry_clicks"], 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_endpoint_that_only_looks_like_loopback_is_never_saved_or_dialled() {
    e2e(an_endpoint_that_only_looks_like_loopback_is_never_saved_or_dialled_body).await;
}

/// The token-exfiltration attack on the options page: endpoints whose text
/// starts like loopback but whose URL host (as the browser parses it) is
/// elsewhere. Nothing is saved; and a pairing planted in storage directly is
/// refused again by the background before it connects.
async fn an_endpoint_that_only_looks_like_loopback_is_never_saved_or_dialled_body() {
    let (_dir, _fake, chromium) = browser_without_daemon().await;
    let options = chromium.open(&chromium.extension_url("options.html")).await.unwrap();
    until(&options, "document.body.hasAttribute('data-ready')").await.unwrap();
    let credential = format!("exc1.victim.{}", "0".repeat(64));
    for endpoint in ["ws://127.0.0.1:@evil.com/executor", "ws://[::1]:1@evil.com/executor", "ws://localhost@evil.com/x"]
    {
        let fill = format!(
            "document.querySelector('#message').textContent = ''; \
             document.querySelector('#endpoint').value = {}; document.querySelector('#token').value = {}; \
             document.querySelector('#pairing').requestSubmit(); true",
            serde_json::to_string(endpoint).unwrap(),
            serde_json::to_string(&credential).unwrap()
        );
        options.evaluate(fill).await.unwrap();
        until(&options, "document.querySelector('#message').textContent.length > 0").await.unwrap();
        let message = eval::<String>(&options, "document.querySelector('#message').textContent").await.unwrap();
        assert!(message.contains("user info") || message.contains("this machine"), "{endpoint}: {message}");
        let saved = eval::<bool>(&options, "chrome.storage.local.get('pairing').then(s => s.pairing !== undefined)")
            .await
            .unwrap();
        assert!(!saved, "{endpoint} was saved");
    }
    // Storage tampered with directly: the background re-checks before dialling.
    let plant = format!(
        "chrome.storage.local.set({{pairing: {{endpoint: 'ws://127.0.0.1:@evil.com/executor', token: {}}}}}).then(() => true)",
        serde_json::to_string(&credential).unwrap()
    );
    options.evaluate(plant).await.unwrap();
    until(&options, "document.querySelector('#connection').textContent.includes('not acceptable')").await.unwrap();
}

/// Turns that never end, in Chromium through the extension: a hanging
/// turn is reported stalled after the bound (60 s, the shortest the daemon
/// takes); a turn streaming text for longer is not, since the extension
/// tells the daemon its page moves on (`e2e::scenario::turn_stall`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hanging_turn_is_reported_and_a_streaming_one_is_not() {
    e2e(turn_stall_body).await;
}

async fn turn_stall_body() {
    let world = World::start(orchestrator(), &["--stalled-turn-after-ms", "60000"]).await.unwrap();
    let url = world.daemon.mcp_url();
    let (bound, budget) = (Duration::from_secs(60), Duration::from_secs(150));
    let out = e2e::scenario::turn_stall(&url, &world.fake.hub, bound, budget).await.unwrap_or_else(|e| panic!("{e:#}"));
    eprintln!("{}", out.trace.join("\n"));
    assert_eq!(world.chromium.extension_errors().await.unwrap(), Vec::<String>::new());
}

/// Execution Continuity in Chromium (seed §26.4): a three-turn assignment
/// completes with nobody typing `continue`, a delivery timeout is answered
/// by a fresh resume (zero Retry clicks), nothing is sent after completion;
/// then a rate-limit dialog on one tab holds every automatic continuation
/// for the wait, after which both workers go on and complete.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auto_resume_carries_workers_to_completion_through_a_delivery_timeout_and_a_rate_limit() {
    e2e(auto_resume_body).await;
}

async fn auto_resume_body() {
    let wait = Duration::from_secs(20);
    let world = World::start(orchestrator(), &["--rate-limit-wait-ms", "20000"]).await.unwrap();
    let url = world.daemon.mcp_url();
    let budget = Duration::from_secs(60);
    let out = e2e::scenario::auto_resume(&url, &world.fake.hub, budget).await.unwrap_or_else(|e| panic!("{e:#}"));
    eprintln!("{}", out.trace.join("\n"));
    let out = e2e::scenario::rate_limit(&url, &world.fake.hub, wait, budget).await.unwrap_or_else(|e| panic!("{e:#}"));
    eprintln!("{}", out.trace.join("\n"));
    assert_eq!(world.chromium.extension_errors().await.unwrap(), Vec::<String>::new());
}

/// A worker blocked on ChatGPT's tool-approval card, in Chromium through
/// the extension (`e2e::scenario::approval_wait`): the daemon shows it
/// `waiting_for: person` naming the card and logs the page's
/// `TOOL_APPROVAL_REQUIRED`; a follow-up asked for meanwhile is held (nothing
/// typed, nothing dispatched, no resume, no stall report, across several
/// rechecks at the 1 s `--executor-recheck-after-ms`); once a person answers
/// the card the worker goes on, the follow-up lands exactly once, and
/// nothing in the page ever clicked the card. Then, in the same browser, a
/// person's attachment in a managed tab's composer holds a wake (nothing
/// typed, nothing sent with it, the worker waiting for a person) until they
/// remove it, and again until they send it; each wake goes in once
/// (`e2e::scenario::attachment_wait`). Last, the whole browser asleep
/// (every process of it stopped, then woken): a follow-up due meanwhile
/// waits, the worker saying its executor is gone, and goes in once when
/// the browser wakes; a turn that slept ends with nothing sent again
/// (`e2e::scenario::browser_asleep`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_waiting_on_a_tool_approval_needs_a_person_and_goes_on_once_answered() {
    e2e(approval_wait_body).await;
}

async fn approval_wait_body() {
    // A browser that stops answering loses its session within 6 s here
    // (60 s by default: a heartbeat every 20 s, a lease of three).
    let args =
        ["--executor-recheck-after-ms", "1000", "--executor-heartbeat-ms", "2000", "--executor-lease-ms", "6000"];
    let world = World::start(orchestrator(), &args).await.unwrap();
    let url = world.daemon.mcp_url();
    let budget = Duration::from_secs(60);
    let out = e2e::scenario::approval_wait(&url, &world.fake.hub, budget).await.unwrap_or_else(|e| panic!("{e:#}"));
    eprintln!("{}", out.trace.join("\n"));
    // The same browser: a person's attachment holds a wake until they are done.
    let files = tempfile::tempdir().unwrap();
    let file = files.path().join("notes.txt");
    std::fs::write(&file, "a person's notes").unwrap();
    let mut hands = e2e::person::ChromiumHands(&world.chromium);
    let out = e2e::scenario::attachment_wait(&url, &world.fake.hub, &mut hands, &file, budget)
        .await
        .unwrap_or_else(|e| panic!("{e:#}"));
    eprintln!("{}", out.trace.join("\n"));
    // The same browser asleep (SIGSTOP of every process of it, then SIGCONT):
    // nothing lost, nothing doubled (issue 44).
    let sleeper = e2e::browser::Sleeper::of(world.chromium.main_pid().await.unwrap());
    let nap = Duration::from_secs(20);
    let slept =
        e2e::scenario::browser_asleep(&url, &world.fake.hub, |stopped| sleeper.asleep(stopped), nap, budget * 2)
            .await
            .unwrap_or_else(|e| panic!("{e:#}\n{:#}", world.fake.hub.oracle()));
    eprintln!(
        "browser asleep (extension): working again {:.1} s after waking idle, {:.1} s after waking mid-turn ({} s nap)",
        slept.idle_back.as_secs_f64(),
        slept.mid_turn_back.as_secs_f64(),
        nap.as_secs()
    );
    // The same browser's lifecycle moves on a managed tab: discarded, frozen.
    let mut lifecycle = e2e::lifecycle::ChromiumLifecycle(&world.chromium);
    let moved = e2e::scenario::tab_lifecycle(&url, &world.fake.hub, &mut lifecycle, budget * 2)
        .await
        .unwrap_or_else(|e| panic!("{e:#}\n{:#}", world.fake.hub.oracle()));
    eprintln!("tab lifecycle (extension): {moved:?}");
    assert_eq!(world.chromium.extension_errors().await.unwrap(), Vec::<String>::new());
}

/// A conversation's tool call, as the model in it would make it: the page
/// shows the request (fakechat puts it in the page's data), and the call
/// carries the same id in `x-request-id`. `shown: None` is a call no page
/// shows (a plain MCP client), and no header at all is `request_id: None`.
async fn call_as(
    world: &World,
    mcp_url: &str,
    shown: Option<&str>,
    request_id: Option<&str>,
    tool: &str,
    args: Value,
) -> Result<Value, mcp_client::ToolError> {
    if let (Some(conversation), Some(id)) = (shown, request_id) {
        world.fake.hub.tool_call(conversation, Some(id), tool, "Orchestrator");
    }
    let mut client = Client::stateless(mcp_url).unwrap();
    // The suffix differs per call (ChatGPT's per-hop part; never matched).
    static HOP: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let hop = HOP.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let header = request_id.map(|id| format!("{id}/h{hop}"));
    let headers: Vec<(&str, &str)> = header.iter().map(|h| ("x-request-id", h.as_str())).collect();
    client.call_with(tool, args, &headers).await.unwrap()
}

/// Caller attribution (SPEC §5a) through the extension in Chromium: a
/// worker's own calls are proven by the request id its tab's page data
/// shows (one id for all the calls of a turn, read from the plain message
/// ChatGPT stamps it on: the calls' own request messages land only after
/// forty seconds, as live); the same capability from an unmanaged
/// chatgpt.com tab, from the other managed worker's tab, from a plain
/// client no page shows, with no request id, or replaying an earlier
/// turn's id is refused with UNIDENTIFIED_CALLER and changes nothing. A
/// blocked chat is refused with CHAT_BLOCKED, the other worker is
/// unaffected, and unblocking restores it; the same from the popup's Block
/// this chat / Unblock, as a person would.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn caller_attribution_proves_each_call_and_refuses_every_other_caller() {
    e2e(caller_attribution_proves_each_call_and_refuses_every_other_caller_body).await;
}

async fn caller_attribution_proves_each_call_and_refuses_every_other_caller_body() {
    let world = World::start(orchestrator(), &["--attribution-wait-ms", "3000"]).await.unwrap();
    let url = world.daemon.mcp_url();
    let mut root = Root::connect(&url).await;
    let mut workers = Vec::new();
    for name in ["alpha", "beta"] {
        let assignment = json!({"objective": format!("Build {name}\nscenario: progress \"started\"")});
        let spawned = root.call("worker_spawn", json!({"name": name, "assignment": assignment})).await;
        workers.push(spawned["worker"]["worker_id"].as_str().unwrap().to_owned());
    }
    // Both bound, and each reported its progress (its first calls attributed).
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let conversations = loop {
        let events = root.call("events_list", json!({"limit": 500})).await["events"].clone();
        let events = events.as_array().unwrap();
        let of = |kind: &str, worker: &str| {
            events.iter().find(|e| e["type"] == kind && e["data"]["worker_id"] == worker).cloned()
        };
        let ready: Option<Vec<String>> = workers
            .iter()
            .map(|w| {
                of("worker.progress", w)?;
                of("conversation.bound", w).map(|b| b["data"]["conversation_id"].as_str().unwrap().to_owned())
            })
            .collect();
        if let Some(conversations) = ready {
            break conversations;
        }
        assert!(std::time::Instant::now() < deadline, "the workers never reported progress within 60 s");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let (conv_a, conv_b) = (conversations[0].clone(), conversations[1].clone());
    // The model keeps its capability once its turn's steps are done.
    let capability = |conversation: String| {
        let hub = world.fake.hub.clone();
        async move {
            for _ in 0..300 {
                let kept = hub.read(&conversation, |c| c.agent.as_ref().map(|m| m.capability.clone())).flatten();
                if let Some(cap) = kept {
                    return cap;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            panic!("the model of {conversation} never kept its capability");
        }
    };
    let (cap_a, cap_b) = (capability(conv_a.clone()).await, capability(conv_b.clone()).await);
    let progress = |cap: &str, summary: &str| json!({"capability": cap, "summary": summary});

    // A's own call, seen in A's page: attributed, recorded once for its turn.
    let own = "wfr_e2e0000000000000000000000000a1";
    let ok = call_as(&world, &url, Some(&conv_a), Some(own), "worker_progress", progress(&cap_a, "mine")).await;
    assert!(ok.is_ok(), "{ok:?}");
    let attributed =
        root.wait(&url, "attribution", |e| e["type"] == "caller.attributed" && e["data"]["request_id"] == own).await;
    assert_eq!(attributed["data"]["worker_id"], workers[0].as_str());
    // A second call of the same turn carries the same id: attributed too.
    let ok = call_as(&world, &url, Some(&conv_a), Some(own), "worker_progress", progress(&cap_a, "more")).await;
    assert!(ok.is_ok(), "{ok:?}");
    let events = root.call("events_list", json!({"limit": 500})).await["events"].clone();
    let recorded = events.as_array().unwrap().iter().filter(|e| e["data"]["request_id"] == own).count();
    assert_eq!(recorded, 1, "one caller.attributed per turn");

    // A person's own chat, opened by hand: the extension does not manage it.
    let mine = world.chromium.open("https://chatgpt.com/").await.unwrap();
    let unmanaged = e2e::browser::chat_by_hand(&mine, "my own chat").await.unwrap();
    let before = root.call("run_get", json!({})).await["run"]["cursor"].clone();
    let refusals = [
        ("an unmanaged chatgpt.com tab", Some(unmanaged.as_str()), Some("wfr_e2e0000000000000000000000000u1")),
        ("the other managed worker's tab", Some(conv_b.as_str()), Some("wfr_e2e0000000000000000000000000b1")),
        ("a plain client no page shows", None, Some("wfr_e2e0000000000000000000000000x1")),
        ("a call with no request id", None, None),
    ];
    for (who, shown, id) in refusals {
        let refused = call_as(&world, &url, shown, id, "worker_progress", progress(&cap_a, who)).await.unwrap_err();
        assert_eq!(refused.code, "UNIDENTIFIED_CALLER", "{who}: {refused}");
    }
    assert_eq!(root.call("run_get", json!({})).await["run"]["cursor"], before, "no refused call changed anything");

    // Blocked: A's next call from its own tab is refused with the blocking
    // message; B goes on; unblocked, A works again.
    root.call("worker_block", json!({"worker_id": workers[0], "reason": "looping"})).await;
    let a1 = "wfr_e2e0000000000000000000000000a2";
    let blocked = call_as(&world, &url, Some(&conv_a), Some(a1), "worker_progress", progress(&cap_a, "blocked?")).await;
    let blocked = blocked.unwrap_err();
    assert_eq!(blocked.code, "CHAT_BLOCKED", "{blocked}");
    assert!(blocked.message.contains("stop calling"), "{blocked}");
    let b1 = "wfr_e2e0000000000000000000000000b2";
    let other = call_as(&world, &url, Some(&conv_b), Some(b1), "worker_progress", progress(&cap_b, "B goes on")).await;
    assert!(other.is_ok(), "{other:?}");
    root.call("worker_unblock", json!({"worker_id": workers[0]})).await;
    let a3 = "wfr_e2e0000000000000000000000000a3";
    let again = call_as(&world, &url, Some(&conv_a), Some(a3), "worker_progress", progress(&cap_a, "back")).await;
    assert!(again.is_ok(), "{again:?}");
    // A's first turn has ended (a newer one attributed a call): its id
    // replayed is refused.
    let before = root.call("run_get", json!({})).await["run"]["cursor"].clone();
    let replay = call_as(&world, &url, None, Some(own), "worker_progress", progress(&cap_a, "replay")).await;
    let replay = replay.unwrap_err();
    assert_eq!(replay.code, "UNIDENTIFIED_CALLER", "{replay}");
    assert!(replay.message.contains("has ended"), "{replay}");
    assert_eq!(root.call("run_get", json!({})).await["run"]["cursor"], before, "a replay changed nothing");

    // A person blocks A's chat from the popup (A's tab in front, the popup
    // in a window of its own, the person's own chat closed), then unblocks it.
    use chromiumoxide::cdp::browser_protocol::target::CreateTargetParams;
    mine.close().await.unwrap();
    for page in world.chromium.browser.pages().await.unwrap() {
        if page.url().await.ok().flatten().is_some_and(|u| u.contains(&conv_a)) {
            page.bring_to_front().await.unwrap();
        }
    }
    let target =
        CreateTargetParams::builder().url(world.chromium.extension_url("popup.html")).new_window(true).build().unwrap();
    let popup = world.chromium.browser.new_page(target).await.unwrap();
    until(&popup, "document.body.hasAttribute('data-ready')").await.unwrap();
    popup.evaluate("document.querySelector('#block').click(); true").await.unwrap();
    root.wait(&url, "a person's block", |e| {
        e["type"] == "worker.block_changed" && e["data"]["by"] == "person" && e["data"]["blocked"] == true
    })
    .await;
    let a4 = "wfr_e2e0000000000000000000000000a4";
    let refused = call_as(&world, &url, Some(&conv_a), Some(a4), "worker_progress", progress(&cap_a, "x")).await;
    assert_eq!(refused.unwrap_err().code, "CHAT_BLOCKED");
    popup.evaluate("document.querySelector('#unblock').click(); true").await.unwrap();
    root.wait(&url, "a person's unblock", |e| e["type"] == "worker.block_changed" && e["data"]["blocked"] == false)
        .await;
    let a5 = "wfr_e2e0000000000000000000000000a5";
    let back = call_as(&world, &url, Some(&conv_a), Some(a5), "worker_progress", progress(&cap_a, "back again")).await;
    assert!(back.is_ok(), "{back:?}");
    assert_eq!(world.chromium.extension_errors().await.unwrap(), Vec::<String>::new());
}

/// The daemon, fakechat serving its strict page CSP (no
/// `'wasm-unsafe-eval'`: Chromium then refuses to compile the content
/// script's WebAssembly), and Chromium with the extension in `extension`,
/// paired.
async fn strict_csp_world(extension: &Path) -> World {
    let dir = tempfile::tempdir().unwrap();
    let daemon = e2e::Daemon::start(orchestrator(), &dir.path().join("state"), "127.0.0.1:0", &[]).unwrap();
    let csp = fakechat::server::Csp::Strict;
    let fake = fakechat::start("127.0.0.1:0".parse().unwrap(), Some(daemon.mcp_url()), csp, None).await.unwrap();
    e2e::install_apps(&fake.hub, e2e::APP_LABEL, fakechat::render::AppState::Enabled);
    let chromium = e2e::Chromium::launch(extension, fake.addr.port(), &dir.path().join("chromium")).await.unwrap();
    chromium.collect_errors().await.unwrap();
    chromium.pair(&daemon.executor_url(), &daemon.credential().unwrap()).await.unwrap();
    World { daemon, fake, chromium, dir }
}

/// Issue 29 item 13: under a page CSP without `'wasm-unsafe-eval'` the
/// content script's module does not compile in Chromium; the loader starts
/// its WebAssembly-free build (wasm2js) instead, and a worker bootstraps,
/// attaches, reports progress and completes through it (caller attribution
/// included), with the loader's notice in the tab's console and no error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_a_csp_that_blocks_webassembly_a_worker_bootstraps_through_the_fallback() {
    e2e(under_a_csp_that_blocks_webassembly_a_worker_bootstraps_through_the_fallback_body).await;
}

async fn under_a_csp_that_blocks_webassembly_a_worker_bootstraps_through_the_fallback_body() {
    let world = strict_csp_world(&e2e::chromium_dist().unwrap()).await;
    let url = world.daemon.mcp_url();
    let started = std::time::Instant::now();
    let mut root = Root::connect(&url).await;
    let objective = "Build\nscenario: progress \"up\"; complete \"through the fallback\"";
    let spawned = root.call("worker_spawn", json!({"name": "strict", "assignment": {"objective": objective}})).await;
    let worker = spawned["worker"]["worker_id"].as_str().unwrap().to_owned();
    root.wait(&url, "completion", completed(&worker)).await;
    eprintln!("bootstrapped and completed through the fallback in {:?}", started.elapsed());
    let oracle = world.fake.hub.oracle();
    let conversations = conversations(&oracle);
    assert_eq!(conversations.len(), 1, "{oracle:#}");
    let (id, conversation) = conversations.iter().next().unwrap();
    assert_eq!(turns(conversation).len(), 1, "one bootstrap: {oracle:#}");
    let console = world.chromium.console_of(&format!("/c/{id}")).await.unwrap();
    assert!(console.iter().any(|l| l == carrier_cdp::page::FALLBACK_NOTICE), "{console:#?}");
    assert_eq!(world.chromium.extension_errors().await.unwrap(), Vec::<String>::new());
}

/// Issue 29 item 13, when neither build starts (here: an extension whose
/// WebAssembly-free build is missing, under the strict CSP): the loader
/// answers the background with why, and the create fails within seconds
/// with `ADAPTER_BLOCKED` naming the page's CSP, instead of "the page did
/// not load before the deadline" minutes later. Nothing is typed, and the
/// refused create's tab is closed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn when_neither_build_starts_the_create_fails_at_once_naming_the_csp() {
    e2e(when_neither_build_starts_the_create_fails_at_once_naming_the_csp_body).await;
}

async fn when_neither_build_starts_the_create_fails_at_once_naming_the_csp_body() {
    let copy = tempfile::tempdir().unwrap();
    copy_dir(&e2e::chromium_dist().unwrap(), copy.path());
    std::fs::remove_file(copy.path().join("pkg").join(carrier_cdp::page::FALLBACK)).unwrap();
    let world = strict_csp_world(copy.path()).await;
    let url = world.daemon.mcp_url();
    let mut root = Root::connect(&url).await;
    let started = std::time::Instant::now();
    let spawned =
        root.call("worker_spawn", json!({"name": "blocked", "assignment": {"objective": "never starts"}})).await;
    let worker = spawned["worker"]["worker_id"].as_str().unwrap().to_owned();
    let done = root
        .wait(&url, "the create's result", |e| {
            e["type"] == "executor.command_completed" && e["data"]["worker_id"] == worker.as_str()
        })
        .await;
    let took = started.elapsed();
    let outcome = &done["data"]["outcome"];
    assert_eq!(outcome["code"], "ADAPTER_BLOCKED", "{done:#}");
    let detail = outcome["detail"].as_str().unwrap();
    assert!(detail.contains("Content-Security-Policy blocks WebAssembly and the fallback did not start"), "{detail}");
    assert!(took < Duration::from_secs(20), "answered at once, not at the deadline: {took:?}");
    // A spawned worker's launch fails, and says why.
    let failed = root
        .wait(&url, "the launch's failure", |e| {
            e["type"] == "worker.state_changed" && e["data"]["worker_id"] == worker.as_str()
        })
        .await;
    assert_eq!(failed["data"]["to"], "launch_failed", "{failed:#}");
    assert_eq!(failed["data"]["reason"], "ADAPTER_BLOCKED", "{failed:#}");
    let oracle = world.fake.hub.oracle();
    assert!(conversations(&oracle).is_empty(), "nothing was typed: {oracle:#}");
    let pages =
        world.chromium.browser.execute(chromiumoxide::cdp::browser_protocol::target::GetTargetsParams::default());
    let open =
        pages.await.unwrap().result.target_infos.iter().filter(|t| t.url.starts_with("https://chatgpt.com/")).count();
    assert_eq!(open, 0, "the refused create's tab was closed");
}

/// Issue 29 item 13, when no content script answers at all (here: an
/// extension whose loader does nothing): once the managed tab has shown a
/// loaded chatgpt.com page with a silent content script for the
/// background's bound, the create fails with `ADAPTER_BLOCKED` saying so,
/// not with a timeout at the command's deadline.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_whose_content_script_never_answers_fails_the_create_saying_so() {
    e2e(a_page_whose_content_script_never_answers_fails_the_create_saying_so_body).await;
}

async fn a_page_whose_content_script_never_answers_fails_the_create_saying_so_body() {
    let copy = tempfile::tempdir().unwrap();
    copy_dir(&e2e::chromium_dist().unwrap(), copy.path());
    std::fs::write(copy.path().join("cs.js"), "// a loader that starts nothing\n").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (mut daemon, fake) = e2e::daemon_and_site(orchestrator(), dir.path(), &[]).await.unwrap();
    let chromium = e2e::Chromium::launch(copy.path(), fake.addr.port(), &dir.path().join("chromium")).await.unwrap();
    chromium.pair(&daemon.executor_url(), &daemon.credential().unwrap()).await.unwrap();
    let url = daemon.mcp_url();
    let mut root = Root::connect(&url).await;
    let started = std::time::Instant::now();
    let spawned = root.call("worker_spawn", json!({"name": "silent", "assignment": {"objective": "never"}})).await;
    let worker = spawned["worker"]["worker_id"].as_str().unwrap().to_owned();
    let done = root
        .wait(&url, "the create's result", |e| {
            e["type"] == "executor.command_completed" && e["data"]["worker_id"] == worker.as_str()
        })
        .await;
    let took = started.elapsed();
    assert_eq!(done["data"]["outcome"]["code"], "ADAPTER_BLOCKED", "{done:#}");
    let detail = done["data"]["outcome"]["detail"].as_str().unwrap();
    assert!(detail.contains("content script never answered"), "{detail}");
    assert!(took < Duration::from_secs(45), "within the background's bound, not the deadline: {took:?}");
    assert!(conversations(&fake.hub.oracle()).is_empty(), "nothing was typed");
    daemon.kill();
}

/// Copies the directory `from` into `to` (files and subdirectories).
fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let path = entry.path();
        if path.is_dir() {
            copy_dir(&path, &to.join(entry.file_name()));
        } else {
            std::fs::copy(&path, to.join(entry.file_name())).unwrap();
        }
    }
}

/// The managed chatgpt.com tabs open in the browser now.
async fn chat_tabs(chromium: &e2e::Chromium) -> usize {
    use chromiumoxide::cdp::browser_protocol::target::GetTargetsParams;
    let targets = chromium.browser.execute(GetTargetsParams::default()).await;
    let targets = targets.expect("DevTools lists the browser's targets").result.target_infos;
    targets.iter().filter(|t| t.r#type == "page" && t.url.starts_with("https://chatgpt.com/")).count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eight_workers_in_three_tabs_each_wake_in_its_exact_conversation() {
    e2e(eight_workers_in_three_tabs_body).await;
}

/// Tab capacity through the extension (`e2e::scenario::tab_capacity`):
/// eight workers with at most three tabs open; creates wait for an idle
/// worker's tab to be parked, and a follow-up to each of the eight reopens
/// its exact conversation, where the wake lands.
async fn eight_workers_in_three_tabs_body() {
    let args = ["--max-open-tabs", "3", "--tab-idle-grace-ms", "1000", "--max-active-workers", "8"];
    let world = World::start(orchestrator(), &args).await.unwrap();
    let seen = e2e::scenario::tab_capacity(
        &world.daemon.mcp_url(),
        &world.fake.hub,
        || Box::pin(chat_tabs(&world.chromium)),
        Duration::from_secs(60),
    )
    .await
    .unwrap_or_else(|e| panic!("{e:#}"));
    eprintln!("eight workers through the extension: {seen:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_conversation_rolls_over_and_the_worker_completes_in_the_fresh_one() {
    e2e(rollover_body).await;
}

/// Worker rollover through the extension (`e2e::scenario::rollover`): the
/// page shows ChatGPT's length notice mid-assignment; the extension stops
/// managing that tab (left open, nothing typed), creates the fresh
/// conversation, and the worker finishes there from its capsule.
async fn rollover_body() {
    let world = World::start(orchestrator(), &[]).await.unwrap();
    let seen = e2e::scenario::rollover(&world.daemon.mcp_url(), &world.fake.hub, Duration::from_secs(60))
        .await
        .unwrap_or_else(|e| panic!("{e:#}"));
    eprintln!("rollover through the extension: {seen:?}");
    assert_eq!(chat_tabs(&world.chromium).await, 2, "the full conversation's tab is left open, untouched");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_daemon_sigkill_at_each_rollover_step_still_ends_with_one_fresh_conversation() {
    e2e(rollover_killed_body).await;
}

/// The daemon is SIGKILLed (and started again on its state) right after
/// each step of a rollover through the extension (`e2e::scenario::
/// ROLLOVER_STEPS`): each run still ends with exactly one fresh
/// conversation, one bootstrap in it, and nothing more typed in the full one.
async fn rollover_killed_body() {
    // A fresh browser and daemon per step: the tabs a run leaves open (the
    // full conversation is never closed) do not slow the next one.
    for (index, step) in e2e::scenario::ROLLOVER_STEPS.iter().enumerate() {
        let mut world = World::start(orchestrator(), &[]).await.unwrap();
        let url = world.daemon.mcp_url();
        let mut run = e2e::scenario::RolloverRun::start(&url, Duration::from_secs(3)).await.unwrap();
        run.until(index, Duration::from_secs(60)).await.unwrap_or_else(|e| panic!("{step}: {e:#}"));
        world.daemon.restart().unwrap();
        run.reconnect().await.unwrap();
        let seen =
            run.finish(&world.fake.hub, Duration::from_secs(60)).await.unwrap_or_else(|e| panic!("{step}: {e:#}"));
        eprintln!("killed after {step}: {seen:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pinned_model_is_used_and_one_the_picker_cannot_show_fails_closed() {
    e2e(model_pinning_body).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_claims_resumes_submits_and_lands_a_worktree_and_who_finds_its_conversation() {
    e2e(ownership_body).await;
}

/// Worktree ownership through the extension (issue 35, O9:
/// `e2e::scenario::ownership_lifecycle`).
async fn ownership_body() {
    let trees = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(trees.path()).unwrap();
    let world = World::start(orchestrator(), &["--worktree-root", root.to_str().unwrap()]).await.unwrap();
    let state = world.dir.path().join("state");
    let seen = support::ownership_lifecycle(&world.daemon.mcp_url(), &state, &world.daemon.addr, &root).await;
    eprintln!("ownership through the extension: {seen:?}");
}

/// Model pinning through the extension (`e2e::scenario::model_pinning`).
async fn model_pinning_body() {
    let world = World::start(orchestrator(), &[]).await.unwrap();
    let seen = e2e::scenario::model_pinning(&world.daemon.mcp_url(), &world.fake.hub, Duration::from_secs(60))
        .await
        .unwrap_or_else(|e| panic!("{e:#}"));
    eprintln!("model pinning through the extension: {seen:?}");
}
