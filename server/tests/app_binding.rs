//! Host app binding end to end in headless Chromium through the extension:
//! a pool worker's new conversation is bound to the orchestrator's app by
//! its exact label before its bootstrap — through the Project it is created
//! in, the `@` mention popover, or `+` → More → Developer mode — with no test
//! step touching the page; look-alike, disabled and stale apps are refused
//! with their typed setup state and nothing is submitted, and once the setup
//! is fixed `runtime_recover` creates the conversation. fakechat's oracle
//! reports each conversation's binding and the route that made it. The same
//! routes and refusals hold through the CDP carrier, which runs the same
//! page adapter in targets of an authorized browser session.

use std::path::Path;
use std::time::{Duration, Instant};

use e2e::World;
use e2e::cdp::CdpWorld;
use fakechat::render::AppState;
use mcp_client::Client;
use serde_json::{Value, json};

/// One browser at a time: two Chromiums on two cores starve each other.
static ONE_BROWSER: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

const PROJECT: &str = "g-p-0123456789abcdef0123456789abcdef-workers";

fn orchestrator() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_orchestrator"))
}

/// Root of a fresh run on `world`'s daemon.
struct Root {
    client: Client,
    capability: String,
}

impl Root {
    async fn new(daemon: &e2e::Daemon) -> Root {
        let mut client = Client::connect(&daemon.mcp_url()).await.unwrap();
        let created = client.call("run_create", json!({"title": "binding"})).await.unwrap().unwrap();
        Root { client, capability: created["root_capability"].as_str().unwrap().into() }
    }

    async fn call(&mut self, tool: &str, mut args: Value) -> Value {
        args["capability"] = json!(self.capability);
        self.client.call(tool, args).await.unwrap().unwrap_or_else(|e| panic!("{tool}: {e}"))
    }

    /// Polls `runtime_status` (60 s) until `wanted` holds; returns it.
    async fn status_until(&mut self, what: &str, wanted: impl Fn(&Value) -> bool) -> Value {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let status = self.call("runtime_status", json!({})).await;
            if wanted(&status) {
                return status;
            }
            if Instant::now() >= deadline {
                let workers = self.call("worker_list", json!({})).await;
                let events = self.call("events_list", json!({"limit": 200})).await;
                panic!("no {what} within 60 s: {status}\nworkers: {workers}\nevents: {events}");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

fn conversations(fake: &fakechat::Running) -> serde_json::Map<String, Value> {
    fake.hub.oracle()["conversations"].as_object().cloned().unwrap_or_default()
}

/// One pool worker: bound through `route`, bootstrapped once, admitted.
async fn one_worker_binds_through(daemon: &e2e::Daemon, fake: &fakechat::Running, route: &str) {
    let mut root = Root::new(daemon).await;
    root.call("runtime_ensure", json!({"desired_workers": 1})).await;
    let status = root
        .status_until("ready pool", |s| {
            s["state"] == "READY" && s["slots"].as_array().is_some_and(|x| x.len() == 1 && x[0]["admitted"] == true)
        })
        .await;
    let conversation = status["slots"][0]["conversation_id"].as_str().unwrap().to_owned();
    let oracle = conversations(fake);
    assert_eq!(oracle.len(), 1, "one conversation: {oracle:?}");
    let c = &oracle[&conversation];
    assert_eq!(c["binding"], json!({"app": e2e::APP_LABEL, "route": route}), "{c}");
    let turns = c["user_turns"].as_array().unwrap();
    assert_eq!(turns.len(), 1, "one bootstrap, nothing else: {c}");
    assert_eq!(turns[0]["bootstrap"], true);
    assert_eq!(c["errors"], json!([]), "{c}");
    assert_eq!(status["catalog"]["stamp"].as_str().unwrap().len(), 16, "{status}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_binding_route_binds_bootstraps_once_and_attaches() {
    let _one = ONE_BROWSER.lock().await;
    // The mention popover: the first route tried for a plain new chat.
    let world = World::start(orchestrator(), &[]).await.unwrap();
    one_worker_binds_through(&world.daemon, &world.fake, "mention").await;
    world.shutdown().await;

    // The `+` menu, when the mention popover does not list apps.
    let world = World::start(orchestrator(), &[]).await.unwrap();
    world.fake.hub.set_app_mentions(false);
    one_worker_binds_through(&world.daemon, &world.fake, "plus_menu").await;
    world.shutdown().await;

    // The redesign (generation B): its add-context list holds the apps directly.
    let world = World::start(orchestrator(), &[]).await.unwrap();
    let generation_b = fakechat::hub::Settings { generation: fakechat::render::Generation::B, ..Default::default() };
    world.fake.hub.set_defaults(generation_b);
    world.fake.hub.set_app_mentions(false);
    one_worker_binds_through(&world.daemon, &world.fake, "plus_menu").await;
    world.shutdown().await;

    // The redesign's `@` list puts the app inside the editor (2026-09): the
    // prompt is typed after the mention, which stays as the binding.
    let world = World::start(orchestrator(), &[]).await.unwrap();
    world.fake.hub.set_defaults(generation_b);
    one_worker_binds_through(&world.daemon, &world.fake, "mention").await;
    world.shutdown().await;

    // The Project: created in it, the conversation inherits its app.
    let project_url = format!("https://chatgpt.com/g/{PROJECT}/project");
    let world = World::start(orchestrator(), &["--worker-project-url", &project_url]).await.unwrap();
    assert!(world.fake.hub.set_project_app(PROJECT, Some(e2e::APP_LABEL)));
    one_worker_binds_through(&world.daemon, &world.fake, "project").await;
    let oracle = conversations(&world.fake);
    assert_eq!(oracle.values().next().unwrap()["project"], PROJECT);
    world.shutdown().await;
}

/// The same four routes through the CDP carrier (the same page adapter, in
/// a target of an authorized session instead of an extension's tab).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_binding_route_binds_through_the_cdp_carrier() {
    let _one = ONE_BROWSER.lock().await;
    let world = CdpWorld::start(orchestrator(), &[]).await.unwrap();
    one_worker_binds_through(&world.daemon, &world.fake, "mention").await;

    let world = CdpWorld::start(orchestrator(), &[]).await.unwrap();
    world.fake.hub.set_app_mentions(false);
    one_worker_binds_through(&world.daemon, &world.fake, "plus_menu").await;

    let world = CdpWorld::start(orchestrator(), &[]).await.unwrap();
    let generation_b = fakechat::hub::Settings { generation: fakechat::render::Generation::B, ..Default::default() };
    world.fake.hub.set_defaults(generation_b);
    world.fake.hub.set_app_mentions(false);
    one_worker_binds_through(&world.daemon, &world.fake, "plus_menu").await;

    let world = CdpWorld::start(orchestrator(), &[]).await.unwrap();
    world.fake.hub.set_defaults(generation_b);
    one_worker_binds_through(&world.daemon, &world.fake, "mention").await;

    let project_url = format!("https://chatgpt.com/g/{PROJECT}/project");
    let world = CdpWorld::start(orchestrator(), &["--worker-project-url", &project_url]).await.unwrap();
    assert!(world.fake.hub.set_project_app(PROJECT, Some(e2e::APP_LABEL)));
    one_worker_binds_through(&world.daemon, &world.fake, "project").await;
    assert_eq!(conversations(&world.fake).values().next().unwrap()["project"], PROJECT);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn look_alike_disabled_and_stale_apps_are_setup_states_and_nothing_is_submitted() {
    let _one = ONE_BROWSER.lock().await;
    let world = World::start(orchestrator(), &[]).await.unwrap();
    let variants = [
        // Only similar names: "Orchestrator Dev", "orchestrator", "Orchestrator Legacy".
        ("look-alike", None, "HOST_APP_BINDING_NOT_READY"),
        ("disabled", Some(AppState::Disabled), "HOST_APP_DISABLED"),
        ("stale", Some(AppState::Stale), "HOST_APP_STALE"),
    ];
    for (fixed, (name, state, code)) in variants.into_iter().enumerate() {
        match state {
            Some(state) => e2e::install_apps(&world.fake.hub, e2e::APP_LABEL, state),
            None => {
                e2e::install_apps(&world.fake.hub, e2e::APP_LABEL, AppState::Enabled);
                let apps = world.fake.hub.apps().into_iter().filter(|a| a.app.label != e2e::APP_LABEL).collect();
                world.fake.hub.set_apps(apps);
            }
        }
        let mut root = Root::new(&world.daemon).await;
        root.call("runtime_ensure", json!({"desired_workers": 1})).await;
        let status =
            root.status_until(code, |s| s["reasons"].as_array().is_some_and(|r| r.iter().any(|c| c == code))).await;
        assert_ne!(status["state"], "READY", "{name}: {status}");
        assert!(
            conversations(&world.fake).len() == fixed,
            "{name}: nothing submitted, no conversation: {:?}",
            conversations(&world.fake)
        );
        let workers = root.call("worker_list", json!({})).await;
        let pool_worker =
            workers["workers"].as_array().unwrap().iter().find(|w| w["path"] != "/root").cloned().unwrap();
        assert_ne!(pool_worker["state"], "launch_failed", "{name}: a setup state is not the worker's failure");
        // The operator fixes the app; recover creates the conversation, once.
        e2e::install_apps(&world.fake.hub, e2e::APP_LABEL, AppState::Enabled);
        let recovered = root.call("runtime_recover", json!({})).await;
        assert_eq!(recovered["outcome"]["recovering"], json!([0]), "{name}: {recovered}");
        let status = root
            .status_until("ready after the fix", |s| {
                s["state"] == "READY" && s["slots"][0]["admitted"] == true && s["reasons"] == json!([])
            })
            .await;
        let conversation = status["slots"][0]["conversation_id"].as_str().unwrap().to_owned();
        let all = conversations(&world.fake);
        assert_eq!(all.len(), fixed + 1, "{name}: one new conversation");
        let turns = all[&conversation]["user_turns"].as_array().unwrap().clone();
        assert_eq!(turns.len(), 1, "{name}: one bootstrap: {turns:?}");
        // The refused create's tab was closed: only the conversations' tabs remain.
        let mut chats = 0;
        for page in world.chromium.browser.pages().await.unwrap() {
            chats += usize::from(page.url().await.unwrap().is_some_and(|u| u.starts_with("https://chatgpt.com/")));
        }
        assert_eq!(chats, fixed + 1, "{name}: one tab per conversation, none left from refusals");
    }
    world.shutdown().await;
}
