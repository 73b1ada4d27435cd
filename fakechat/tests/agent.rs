//! The scripted agent against a real orchestrator (in process, over real
//! HTTP): a bootstrap turn attaches, follows its scenario, asks root, gets the
//! answer, completes; `end_turn` waits for a wake; unknown steps are shown;
//! a conversation without the orchestrator's app selected never reaches it,
//! and one whose app holds an old tool catalog is told `HOST_APP_STALE`.

use std::sync::Arc;
use std::time::Duration;

use carrier_webext::{Bridge, BridgeConfig, Credentials};
use control::store::SqliteStore;
use control::{ControlPlane, Keyring, SystemClock};
use fakechat::hub::{AppConfig, Route, Selection};
use fakechat::render::AppState;
use fakechat::server::Csp;
use mcp_client::Client;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

struct World {
    fake: fakechat::Running,
    root: Client,
    cap: String,
    _dir: tempfile::TempDir,
}

async fn world() -> World {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(&dir.path().join("state.db")).unwrap();
    let plane = Arc::new(ControlPlane::open(Arc::new(store), Arc::new(SystemClock), Keyring::generate()).unwrap());
    let credentials = Credentials::open_or_create(&dir.path().join("executors")).unwrap();
    let bridge = Bridge::start(plane.clone(), BridgeConfig::default(), credentials, CancellationToken::new());
    let pool = Arc::new(pool::Pool::new(plane.clone(), pool::PoolConfig::default()));
    let app = server::http::app(plane, pool, bridge, &server::http::HttpConfig::default(), CancellationToken::new());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let mcp_url = format!("http://{}/mcp", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    let fake = fakechat::start("127.0.0.1:0".parse().unwrap(), Some(mcp_url.clone()), Csp::Strict, None).await.unwrap();
    fake.hub.set_apps(vec![
        AppConfig::new("Orchestrator", true, AppState::Enabled),
        AppConfig::new("Orchestrator Dev", false, AppState::Enabled),
    ]);
    let mut root = Client::connect(&mcp_url).await.unwrap();
    // No executor sees fakechat's pages here: capability-only identity.
    let cap = root
        .call("run_create", json!({"title": "agent", "attribution": "capability_only"}))
        .await
        .unwrap()
        .unwrap()["root_capability"]
        .as_str()
        .unwrap()
        .to_owned();
    World { fake, root, cap, _dir: dir }
}

/// The page's choice of the app labelled `label`, through the mention popover.
fn mention(w: &World, label: &str) -> Selection {
    let id = w.fake.hub.apps().into_iter().find(|a| a.app.label == label).unwrap().app.id;
    Selection { app: id, route: Route::Mention }
}

impl World {
    async fn call(&mut self, tool: &str, mut args: Value) -> Value {
        args["capability"] = json!(self.cap);
        self.root.call(tool, args).await.unwrap().unwrap_or_else(|e| panic!("{tool}: {e}"))
    }

    /// Spawns a worker whose objective carries `scenario`; returns (worker id, bootstrap prompt).
    async fn spawn(&mut self, name: &str, scenario: &str) -> (String, String) {
        let out = self
            .call(
                "worker_spawn",
                json!({"name": name, "assignment": {"objective": format!("Do {name}\nscenario: {scenario}")}}),
            )
            .await;
        (out["worker"]["worker_id"].as_str().unwrap().to_owned(), out["bootstrap_prompt"].as_str().unwrap().to_owned())
    }

    /// Submits a prompt as the page does, in a new or existing conversation
    /// with the orchestrator's app selected.
    fn submit(&self, conversation: Option<&str>, prompt: &str) -> String {
        self.submit_with(conversation, prompt, Some(mention(self, "Orchestrator")))
    }

    fn submit_with(&self, conversation: Option<&str>, prompt: &str, app: Option<Selection>) -> String {
        let id = self.fake.hub.submit(conversation, None, prompt, Some("tab-1"), app.as_ref(), None).expect("accepted");
        tokio::spawn(fakechat::agent::respond(self.fake.hub.clone(), id.clone(), prompt.to_owned()));
        id
    }

    /// Root's events until one satisfies `pred` (bounded).
    async fn wait_for(&mut self, cursor: &mut u64, pred: impl Fn(&Value) -> bool) -> Value {
        for _ in 0..20 {
            let page = self.call("events_wait", json!({"after_cursor": *cursor, "timeout_ms": 5000})).await;
            for event in page["events"].as_array().unwrap() {
                *cursor = event["cursor"].as_u64().unwrap();
                if pred(event) {
                    return event.clone();
                }
            }
            *cursor = page["cursor"].as_u64().unwrap();
        }
        panic!("no matching event")
    }

    async fn idle(&self, conversation: &str) -> Value {
        for _ in 0..500 {
            let oracle = self.fake.hub.oracle();
            let c = oracle["conversations"][conversation].clone();
            if c["state"] != "generating" {
                return c;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        panic!("the turn never ended")
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bootstrap_turn_attaches_asks_root_and_completes() {
    let mut w = world().await;
    let (worker, bootstrap) =
        w.spawn("alpha", r#"progress "half way"; ask_root "which port?"; await_answer; complete "built A""#).await;
    let conversation = w.submit(None, &bootstrap);
    let mut cursor = 0;
    let question = w.wait_for(&mut cursor, |e| e["type"] == "worker.message" && e["data"]["kind"] == "question").await;
    assert_eq!(question["data"]["from"], worker.as_str());
    w.call(
        "message_send",
        json!({"to": worker, "kind": "answer", "body": "7777", "in_reply_to": question["data"]["message_id"]}),
    )
    .await;
    w.wait_for(&mut cursor, |e| e["type"] == "worker.completed" && e["data"]["worker_id"] == worker.as_str()).await;
    let events = w.call("events_list", json!({"limit": 500})).await;
    let kinds: Vec<&str> = events["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["data"]["worker_id"] == worker.as_str())
        .map(|e| e["type"].as_str().unwrap())
        .collect();
    assert!(
        kinds.contains(&"worker.attached") && kinds.contains(&"worker.progress") && kinds.contains(&"worker.completed"),
        "{kinds:?}"
    );
    let c = w.idle(&conversation).await;
    assert_eq!(c["user_turns"].as_array().unwrap().len(), 1);
    assert_eq!(c["user_turns"][0]["bootstrap"], true);
    let text = w.fake.hub.read(&conversation, |c| c.turns[1].text.clone()).unwrap();
    assert!(text.contains("root answered: 7777") && text.contains("completed: built A"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn end_turn_stops_mid_task_and_a_wake_resumes_it() {
    let mut w = world().await;
    let (worker, bootstrap) = w.spawn("beta", r#"progress "one"; end_turn; complete "two""#).await;
    let conversation = w.submit(None, &bootstrap);
    let mut cursor = 0;
    w.wait_for(&mut cursor, |e| e["type"] == "worker.progress" && e["data"]["worker_id"] == worker.as_str()).await;
    let c = w.idle(&conversation).await;
    assert_eq!(c["state"], "idle");
    let list = w.call("worker_list", json!({})).await;
    let state =
        list["workers"].as_array().unwrap().iter().find(|x| x["worker_id"] == worker.as_str()).unwrap()["state"]
            .clone();
    assert_eq!(state, "running", "the turn ended, the worker did not");
    // Root follows up; the wake prompt (what the executor would submit) resumes the scenario.
    w.call("worker_followup", json!({"worker_id": worker, "instructions": "carry on"})).await;
    let attach = bootstrap.split('"').find(|p| p.starts_with("att_")).unwrap();
    w.submit(Some(&conversation), &control::prompts::followup_prompt(attach, 1));
    w.wait_for(&mut cursor, |e| e["type"] == "worker.completed" && e["data"]["worker_id"] == worker.as_str()).await;
    assert_eq!(w.idle(&conversation).await["user_turns"].as_array().unwrap().len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_scenario_step_is_shown_not_skipped() {
    let mut w = world().await;
    let (worker, bootstrap) = w.spawn("gamma", r#"progress "a"; dance"#).await;
    let conversation = w.submit(None, &bootstrap);
    let c = w.idle(&conversation).await;
    assert!(c["errors"][0].as_str().unwrap().contains("unknown scenario step `dance`"), "{c}");
    let text = w.fake.hub.read(&conversation, |c| c.turns[1].text.clone()).unwrap();
    assert!(text.contains("[fakechat agent error]"));
    let events = w.call("events_list", json!({"limit": 500})).await;
    assert!(
        !events["events"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["type"] == "worker.progress" && e["data"]["worker_id"] == worker.as_str()),
        "nothing of a broken scenario runs"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn incidents_from_a_scenario_end_the_turn_visibly() {
    let mut w = world().await;
    let (_, bootstrap) = w.spawn("delta", "incident deferral; sleep 100ms; incident delivery_timeout").await;
    let conversation = w.submit(None, &bootstrap);
    let c = w.idle(&conversation).await;
    assert_eq!(c["state"], "error");
    assert_eq!(c["incidents"], json!(["deferral", "delivery_timeout"]));
    assert_eq!(c["retry_clicks"], 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_orchestrators_app_the_model_cannot_attach() {
    let mut w = world().await;
    let (worker, bootstrap) = w.spawn("epsilon", r#"complete "x""#).await;
    for app in [None, Some(mention(&w, "Orchestrator Dev"))] {
        let conversation = w.submit_with(None, &bootstrap, app);
        let c = w.idle(&conversation).await;
        assert!(c["errors"][0].as_str().unwrap().contains("worker_attach"), "{c}");
    }
    let workers = w.call("worker_list", json!({})).await;
    let me = workers["workers"].as_array().unwrap().iter().find(|x| x["worker_id"] == worker.as_str()).unwrap();
    assert_eq!(me["state"], "launch_requested", "never attached: {me}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_app_with_an_old_tool_catalog_is_told_host_app_stale() {
    let mut w = world().await;
    w.fake.hub.set_apps(vec![AppConfig::new("Orchestrator", true, AppState::Stale)]);
    let (stale, bootstrap) = w.spawn("zeta", r#"complete "x""#).await;
    let conversation = w.submit(None, &bootstrap);
    let c = w.idle(&conversation).await;
    assert!(c["errors"][0].as_str().unwrap().contains("HOST_APP_STALE"), "{c}");
    // The daemon recorded it against the worker (where runtime_status reads setup states).
    let events = w.call("events_list", json!({"limit": 500})).await;
    assert!(
        events["events"].as_array().unwrap().iter().any(|e| e["type"] == "conversation.error"
            && e["data"]["worker_id"] == stale.as_str()
            && e["data"]["code"] == "HOST_APP_STALE"),
        "{events}"
    );
    // A fresh app fetches the current catalog, caches it, and attaches with it.
    w.fake.hub.set_apps(vec![AppConfig::new("Orchestrator", true, AppState::Enabled)]);
    let (worker, bootstrap) = w.spawn("eta", r#"complete "fine""#).await;
    let conversation = w.submit(None, &bootstrap);
    w.idle(&conversation).await;
    let stamp = w.fake.hub.apps()[0].catalog.clone().expect("cached on first use");
    assert_eq!(stamp.len(), 16);
    let workers = w.call("worker_list", json!({})).await;
    let me = workers["workers"].as_array().unwrap().iter().find(|x| x["worker_id"] == worker.as_str()).unwrap();
    assert_eq!(me["state"], "completed", "{me}");
}
