//! The operator surfaces where a person sees them, in headless Chromium
//! with the extension against fakechat: the popup, the overlay in managed
//! tabs and the dashboard show each worker's state in Execution
//! Continuity's terms (how long after its event each surface shows it is
//! measured and printed); Pause submits nothing more, Continue now exactly
//! one prompt, Stop ends the worker and not its generation; the overlay is
//! only in managed tabs and covers none of ChatGPT's controls; a person
//! answers a worker's question from the popup and two dashboard tabs at
//! once and it is answered, and goes on, once;
//! a worker that waits for a person 30 s raises a browser notification;
//! axe-core finds no serious or critical violation on any surface; and each
//! surface is pictured in `docs/screenshots/`.

use std::path::Path;
use std::time::{Duration, Instant};

use chromiumoxide::Page;
use chromiumoxide::cdp::browser_protocol::target::CreateTargetParams;
use e2e::World;
use e2e::browser::{eval, until};
use e2e::surfaces::{axe, axe_overlay, click_overlay, overlay_html, overlay_text, screenshot};
use mcp_client::Client;
use serde_json::{Value, json};

/// One browser at a time: two on two cores starve each other's timings.
static ONE_BROWSER: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn orchestrator() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_orchestrator"))
}

fn now_ms() -> u64 {
    fakechat::hub::now_ms()
}

struct Root {
    client: Client,
    cap: String,
}

impl Root {
    async fn call(&mut self, tool: &str, mut args: Value) -> Value {
        args["capability"] = json!(self.cap);
        self.client.call(tool, args).await.unwrap().unwrap_or_else(|e| panic!("{tool}: {e}"))
    }

    async fn spawn(&mut self, name: &str, scenario: &str) -> String {
        let assignment = json!({"objective": format!("{name}\nscenario: {scenario}")});
        let spawned = self.call("worker_spawn", json!({"name": name, "assignment": assignment})).await;
        spawned["worker"]["worker_id"].as_str().unwrap().to_owned()
    }

    async fn events(&mut self) -> Vec<Value> {
        let (mut after, mut all) = (0, Vec::new());
        loop {
            let page = self.call("events_list", json!({"after_cursor": after, "limit": 500})).await;
            let events = page["events"].as_array().cloned().unwrap_or_default();
            all.extend(events.iter().cloned());
            match page["cursor"].as_u64() {
                Some(cursor) if !events.is_empty() && cursor > after => after = cursor,
                _ => return all,
            }
        }
    }

    /// The newest event of `kind` about `worker` matching `wanted`, waited for.
    async fn event(&mut self, worker: &str, kind: &str, wanted: impl Fn(&Value) -> bool) -> Value {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let found = self
                .events()
                .await
                .into_iter()
                .rev()
                .find(|e| e["type"] == kind && e["data"]["worker_id"] == worker && wanted(e));
            if let Some(found) = found {
                return found;
            }
            assert!(Instant::now() < deadline, "no {kind} for {worker}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

/// Polls `js` until it is true; returns when (ms since the epoch).
async fn seen(page: &Page, js: String) -> u64 {
    until(page, &js).await.unwrap_or_else(|e| panic!("{e}"));
    now_ms()
}

/// Polls the overlay of `page` until its text contains `text`; returns when.
async fn overlay_seen(page: &Page, text: &str) -> u64 {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if overlay_text(page).await.unwrap().is_some_and(|t| t.contains(text)) {
            return now_ms();
        }
        let last = overlay_text(page).await.unwrap();
        assert!(Instant::now() < deadline, "the overlay never showed {text:?}; it shows {last:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn row(worker: &str, text: &str) -> String {
    format!("(document.querySelector('[data-worker-row=\"{worker}\"]')?.textContent ?? '').includes({text:?})")
}

fn click(selector: &str) -> String {
    format!(
        "(() => {{ const b = document.querySelector({selector:?}); if (!b) return false; b.click(); return true; }})()"
    )
}

/// fakechat's record of a conversation.
fn page_of(world: &World, conversation: &str) -> Value {
    world.fake.hub.oracle()["conversations"][conversation].clone()
}

fn turns(world: &World, conversation: &str) -> usize {
    page_of(world, conversation)["user_turns"].as_array().map_or(0, Vec::len)
}

/// The managed tab showing `conversation`.
async fn tab_of(world: &World, conversation: &str) -> Page {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        for page in world.chromium.browser.pages().await.unwrap() {
            if page.url().await.ok().flatten().is_some_and(|u| u.contains(conversation)) {
                return page;
            }
        }
        assert!(Instant::now() < deadline, "no tab shows {conversation}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Holds `check` for `for_`: what must not happen does not.
async fn stays(for_: Duration, what: &str, check: impl Fn() -> bool) {
    let until = Instant::now() + for_;
    while Instant::now() < until {
        assert!(check(), "{what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_person_runs_the_pool_from_the_popup_the_overlay_and_the_dashboard() {
    let _one = ONE_BROWSER.lock().await;
    let world = World::start(orchestrator(), &[]).await.unwrap();
    let mut root = Root { client: Client::connect(&world.daemon.mcp_url()).await.unwrap(), cap: String::new() };
    let created = root.client.call("run_create", json!({"title": "Backend migration"})).await.unwrap().unwrap();
    root.cap = created["root_capability"].as_str().unwrap().to_owned();
    root.call("run_continuation_set_default", json!({"policy": {"mode": "auto"}})).await;
    let db = root
        .spawn(
            "db",
            r#"progress "reading the schema"; await_human "Which database should the migration target?|postgres|sqlite"; complete "migrated""#,
        )
        .await;
    let ui = root.spawn("ui", r#"progress "building the UI"; hang"#).await;
    let alpha = root
        .spawn("alpha", r#"progress "turn 1"; sleep 8s; end_turn; progress "turn 2"; end_turn; complete "done""#)
        .await;
    let mut conversation = std::collections::HashMap::new();
    for w in [&db, &ui, &alpha] {
        let bound = root.event(w, "conversation.bound", |_| true).await;
        conversation.insert(w.clone(), bound["data"]["conversation_id"].as_str().unwrap().to_owned());
    }
    let (db_tab, ui_tab, alpha_tab) = (
        tab_of(&world, &conversation[&db]).await,
        tab_of(&world, &conversation[&ui]).await,
        tab_of(&world, &conversation[&alpha]).await,
    );

    // The popup in a window of its own, the dashboard from `orchestrator ui`.
    let target =
        CreateTargetParams::builder().url(world.chromium.extension_url("popup.html")).new_window(true).build().unwrap();
    let popup = world.chromium.browser.new_page(target).await.unwrap();
    until(&popup, "document.body.hasAttribute('data-ready')").await.unwrap();
    let dashboard = world.chromium.open(&world.daemon.ui_link().unwrap()).await.unwrap();
    until(&dashboard, "!!document.getElementById('main')").await.unwrap();
    let mut latencies: Vec<(String, &str, u64)> = Vec::new();
    let mut measure = |state: &str, surface: &'static str, event_ms: u64, seen_ms: u64| {
        latencies.push((state.to_owned(), surface, seen_ms.saturating_sub(event_ms)));
    };

    // Needs you: db's question with its choices, on every surface.
    let asked = root.event(&db, "worker.hold_changed", |e| e["data"]["hold"] == "awaiting_human").await;
    assert_eq!(asked["data"]["ask"]["choices"], json!(["postgres", "sqlite"]), "{asked}");
    let at = asked["at_ms"].as_u64().unwrap();
    let (p, o, d) = tokio::join!(
        seen(&popup, row(&db, "Needs you")),
        overlay_seen(&db_tab, "Needs you"),
        seen(&dashboard, row(&db, "Needs you"))
    );
    for (surface, t) in [("popup", p), ("overlay", o), ("dashboard", d)] {
        measure("Needs you", surface, at, t);
    }
    assert!(eval::<bool>(&popup, &row(&db, "Which database should the migration target?")).await.unwrap());
    assert!(eval::<bool>(&popup, "!!document.querySelector('button[data-choice=\"postgres\"]')").await.unwrap());
    seen(&popup, row(&ui, "Working")).await;
    overlay_seen(&ui_tab, "Working").await;
    screenshot(&ui_tab, "overlay-working").await.unwrap();
    let summary = eval::<String>(&popup, "document.getElementById('summary').textContent").await.unwrap();
    assert!(summary.contains("Needs you 1"), "{summary}");
    let connection = eval::<String>(&popup, "document.getElementById('connection').textContent").await.unwrap();
    assert!(connection.starts_with("Live"), "{connection}");

    // Pause from the popup during alpha's first turn: nothing more is submitted.
    let alpha_c = conversation[&alpha].clone();
    assert_eq!(page_of(&world, &alpha_c)["state"], "generating", "alpha's first turn already ended");
    assert!(
        eval::<bool>(&popup, &click(&format!("button[data-worker=\"{alpha}\"][data-act=\"pause\"]"))).await.unwrap()
    );
    let paused = root.event(&alpha, "worker.hold_changed", |e| e["data"]["hold"] == "paused").await;
    let at = paused["at_ms"].as_u64().unwrap();
    let (p, o, d) = tokio::join!(
        seen(&popup, row(&alpha, "Paused")),
        overlay_seen(&alpha_tab, "Paused"),
        seen(&dashboard, row(&alpha, "Paused"))
    );
    for (surface, t) in [("popup", p), ("overlay", o), ("dashboard", d)] {
        measure("Paused", surface, at, t);
    }
    screenshot(&popup, "popup-paused").await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while page_of(&world, &alpha_c)["state"] != "idle" {
        assert!(Instant::now() < deadline, "alpha's first turn never ended");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    stays(Duration::from_secs(6), "a paused worker was given a turn", || turns(&world, &alpha_c) == 1).await;

    // The pictures and the accessibility check, with a question on screen.
    click_overlay(&db_tab, "Orchestrated").await.unwrap();
    overlay_seen(&db_tab, "Send").await;
    screenshot(&popup, "popup").await.unwrap();
    screenshot(&db_tab, "overlay").await.unwrap();
    screenshot(&dashboard, "dashboard-pool").await.unwrap();
    let html = overlay_html(&db_tab).await.unwrap();
    for (surface, grave) in [
        ("popup", axe(&popup).await.unwrap()),
        ("dashboard", axe(&dashboard).await.unwrap()),
        ("overlay", axe_overlay(&world.chromium.browser, &html).await.unwrap()),
    ] {
        assert!(grave.is_empty(), "axe-core on the {surface}: {grave:#?}");
    }

    // The overlay only in managed tabs, and over none of ChatGPT's controls.
    let mine = world.chromium.open("https://chatgpt.com/").await.unwrap();
    let mine_c = e2e::browser::chat_by_hand(&mine, "a chat of my own").await.unwrap();
    // Its turn ran and ended: its content script reported each change to the
    // background, which shows an overlay only for the tabs it manages.
    let deadline = Instant::now() + Duration::from_secs(30);
    while page_of(&world, &mine_c)["state"] != "idle" {
        assert!(Instant::now() < deadline, "my own chat's turn never ended");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(overlay_text(&mine).await.unwrap(), None, "an overlay in a tab the extension does not manage");
    let covered: Vec<String> = eval(
        &ui_tab,
        "[...document.querySelectorAll('button, textarea, a[href], [contenteditable=true], [role=button]')]\
         .filter(e => e.checkVisibility && e.checkVisibility() && e.getBoundingClientRect().width > 0)\
         .filter(e => { const r = e.getBoundingClientRect(); const x = r.left + r.width / 2, y = r.top + r.height / 2;\
           if (x < 0 || y < 0 || x > innerWidth || y > innerHeight) return false;\
           const hit = document.elementFromPoint(x, y); return !(hit === e || e.contains(hit) || (hit && hit.contains(e))); })\
         .map(e => e.outerHTML.slice(0, 120))",
    )
    .await
    .unwrap();
    assert!(covered.is_empty(), "the overlay covers ChatGPT's controls: {covered:#?}");
    ui_tab.bring_to_front().await.unwrap();
    ui_tab.find_element("#prompt-textarea").await.unwrap().click().await.unwrap();
    assert!(
        eval::<bool>(&ui_tab, "document.activeElement === document.querySelector('#prompt-textarea')").await.unwrap(),
        "a click on ChatGPT's composer did not reach it"
    );

    // From alpha's overlay: Auto Resume off, then Continue now: exactly one prompt.
    click_overlay(&alpha_tab, "Orchestrated").await.unwrap();
    overlay_seen(&alpha_tab, "Auto Resume: on").await;
    overlay_seen(&alpha_tab, "its hold changed").await;
    click_overlay(&alpha_tab, "Auto Resume: on").await.unwrap();
    overlay_seen(&alpha_tab, "Auto Resume: off").await;
    click_overlay(&alpha_tab, "Continue now").await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while turns(&world, &alpha_c) < 2 || page_of(&world, &alpha_c)["state"] != "idle" {
        assert!(Instant::now() < deadline, "Continue now gave alpha no turn: {}", page_of(&world, &alpha_c));
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    stays(Duration::from_secs(6), "Continue now gave more than one turn", || turns(&world, &alpha_c) == 2).await;

    // Stop ui from the popup: the worker ends, its generation does not.
    let ui_c = conversation[&ui].clone();
    assert_eq!(page_of(&world, &ui_c)["state"], "generating");
    assert!(eval::<bool>(&popup, &click(&format!("button[data-worker=\"{ui}\"][data-act=\"stop\"]"))).await.unwrap());
    let stopped = root.event(&ui, "worker.state_changed", |e| e["data"]["to"] == "cancelled").await;
    let at = stopped["at_ms"].as_u64().unwrap();
    let (p, o, d) = tokio::join!(
        seen(&popup, format!("!document.querySelector('section.run [data-worker-row=\"{ui}\"]')")),
        overlay_seen(&ui_tab, "Stopped"),
        seen(&dashboard, row(&ui, "Stopped"))
    );
    for (surface, t) in [("popup", p), ("overlay", o), ("dashboard", d)] {
        measure("Stopped", surface, at, t);
    }
    let ui_page = page_of(&world, &ui_c);
    assert_eq!(
        (ui_page["state"].as_str(), ui_page["stop_clicks"].as_u64()),
        (Some("generating"), Some(0)),
        "{ui_page}"
    );

    // db has waited for a person more than 30 s: the background decides on one
    // browser notification (headless Chromium refuses `notifications.create`
    // itself, so what is checked is the decision, recorded once per wait).
    let notified =
        format!("chrome.storage.local.get('notified').then(s => (s.notified || []).some(k => k.startsWith({db:?})))");
    let deadline = Instant::now() + Duration::from_secs(45);
    while !eval::<bool>(&popup, &notified).await.unwrap() {
        assert!(Instant::now() < deadline, "no notification for a worker waiting on a person");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }

    // A person answers db from three surfaces at once (the popup and two
    // dashboard tabs, each with its own key): durable, once; db goes on once.
    let db_c = conversation[&db].clone();
    let before = turns(&world, &db_c);
    // The second tab is the same session's (a person duplicating the tab).
    let second = world.chromium.open(&format!("http://{}/ui", world.daemon.addr)).await.unwrap();
    seen(&second, row(&db, "Needs you")).await;
    let clear = "(() => { const e = document.getElementById('acted') || document.getElementById('notice'); e.textContent = ''; return true; })()";
    for page in [&popup, &dashboard, &second] {
        assert!(eval::<bool>(page, clear).await.unwrap());
    }
    let choose = click(&format!("button[data-worker=\"{db}\"][data-choice=\"postgres\"]"));
    let (a, b, c) =
        tokio::join!(eval::<bool>(&popup, &choose), eval::<bool>(&dashboard, &choose), eval::<bool>(&second, &choose));
    assert_eq!((a.unwrap(), b.unwrap(), c.unwrap()), (true, true, true), "each surface took the click");
    // Each says what became of its answer: one went in, the others were
    // refused as answered already.
    let said = "(() => { const t = (document.getElementById('acted') || document.getElementById('notice')).textContent; \
                return t.startsWith('Done') || t.startsWith('Refused') ? t : ''; })()";
    let mut outcomes = Vec::new();
    for page in [&popup, &dashboard, &second] {
        until(page, &format!("{said} !== ''")).await.unwrap();
        outcomes.push(eval::<String>(page, said).await.unwrap());
    }
    let went_in = outcomes.iter().filter(|t| t.starts_with("Done")).count();
    let already = outcomes.iter().filter(|t| t.starts_with("Refused") && t.contains("answered already")).count();
    assert_eq!((went_in, already), (1, 2), "{outcomes:#?}");
    second.close().await.unwrap();
    let done = root.event(&db, "worker.completed", |_| true).await;
    let at = done["at_ms"].as_u64().unwrap();
    let (o, d) = tokio::join!(overlay_seen(&db_tab, "Complete"), seen(&dashboard, row(&db, "Complete")));
    measure("Complete", "overlay", at, o);
    measure("Complete", "dashboard", at, d);
    stays(Duration::from_secs(6), "the answered worker was resumed more than once", || {
        turns(&world, &db_c) == before + 1
    })
    .await;
    let answers: Vec<Value> = root
        .events()
        .await
        .into_iter()
        .filter(|e| e["type"] == "worker.message" && e["data"]["to"] == db.as_str() && e["data"]["kind"] == "answer")
        .collect();
    assert_eq!(answers.len(), 1, "{answers:#?}");
    assert_eq!(answers[0]["data"]["body"], "postgres");

    // Open tab brings a worker's exact tab to the front.
    let front = format!("chrome.tabs.query({{active: true}}).then(ts => ts.some(t => t.url.includes({alpha_c:?})))");
    ui_tab.bring_to_front().await.unwrap();
    assert!(!eval::<bool>(&popup, &front).await.unwrap(), "alpha's tab is in front already");
    assert!(eval::<bool>(&popup, &click(&format!("button[data-worker=\"{alpha}\"][data-open]"))).await.unwrap());
    until(&popup, &front).await.unwrap();

    // Settings: the overlay can be hidden everywhere (popup and dashboard keep every control).
    let options = world.chromium.open(&world.chromium.extension_url("options.html")).await.unwrap();
    until(&options, "document.body.hasAttribute('data-ready')").await.unwrap();
    let grave = axe(&options).await.unwrap();
    assert!(grave.is_empty(), "axe-core on the options page: {grave:#?}");
    assert!(eval::<bool>(&options, &click("#hide-overlay")).await.unwrap());
    let deadline = Instant::now() + Duration::from_secs(20);
    while overlay_text(&db_tab).await.unwrap().is_some() {
        assert!(Instant::now() < deadline, "the overlay stayed after it was hidden in Settings");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    for (state, surface, ms) in &latencies {
        eprintln!("operator surfaces: {state} reached the {surface} {ms} ms after its event");
    }
    assert_eq!(world.chromium.extension_errors().await.unwrap(), Vec::<String>::new());
    world.shutdown().await;
}

/// The same surfaces in headless Firefox ESR (add-on built for Firefox,
/// fakechat with its strict CSP): the popup, the overlay and the dashboard
/// show a question and a running worker; Stop from the overlay ends the worker and not its
/// generation; a person answers from the popup and the worker goes on once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn firefox_shows_the_pool_in_the_popup_and_the_overlay_and_takes_their_controls() {
    let _one = ONE_BROWSER.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let mut daemon = e2e::Daemon::start(orchestrator(), &dir.path().join("state"), "127.0.0.1:0", &[]).unwrap();
    let fake =
        fakechat::start("127.0.0.1:0".parse().unwrap(), Some(daemon.mcp_url()), fakechat::server::Csp::Strict, None)
            .await
            .unwrap();
    e2e::install_apps(&fake.hub, e2e::APP_LABEL, fakechat::render::AppState::Enabled);
    let mut ff = e2e::firefox::Firefox::launch(
        &e2e::firefox_dist().unwrap(),
        fake.addr.port(),
        &fake.ca_pem,
        &dir.path().join("ff"),
    )
    .await
    .unwrap();
    ff.pair(&daemon.executor_url(), &daemon.credential().unwrap()).await.unwrap();
    let oracle = |c: &str| fake.hub.oracle()["conversations"][c].clone();
    let turns = |c: &str| oracle(c)["user_turns"].as_array().map_or(0, Vec::len);

    let mut root = Root { client: Client::connect(&daemon.mcp_url()).await.unwrap(), cap: String::new() };
    let created = root.client.call("run_create", json!({"title": "Firefox pool"})).await.unwrap().unwrap();
    root.cap = created["root_capability"].as_str().unwrap().to_owned();
    root.call("run_continuation_set_default", json!({"policy": {"mode": "auto"}})).await;
    let db = root
        .spawn("db", r#"progress "reading"; await_human "Which database?|postgres|sqlite"; complete "migrated""#)
        .await;
    let ui = root.spawn("ui", r#"progress "building the UI"; hang"#).await;
    let mut conversation = std::collections::HashMap::new();
    for w in [&db, &ui] {
        let bound = root.event(w, "conversation.bound", |_| true).await;
        conversation.insert(w.clone(), bound["data"]["conversation_id"].as_str().unwrap().to_owned());
    }
    let (db_c, ui_c) = (conversation[&db].clone(), conversation[&ui].clone());
    let db_tab = ff.context_of(&db_c).await.unwrap();
    let ui_tab = ff.context_of(&ui_c).await.unwrap();

    // The popup as a tab of its own (Firefox refuses automation navigating
    // to an extension page; the add-on's own page opens it).
    let options = ff.extension_page("/options.html").await.unwrap();
    ff.eval(&options, "browser.tabs.create({url: browser.runtime.getURL('popup.html')}).then(() => true)")
        .await
        .unwrap();
    let popup = ff.extension_page("/popup.html").await.unwrap();
    ff.until(&popup, "document.body.hasAttribute('data-ready')").await.unwrap();

    // The dashboard, from `orchestrator ui`'s link, in a tab of its own.
    let tab = ff.command("browsingContext.create", json!({"type": "tab"})).await.unwrap();
    let dashboard = tab["context"].as_str().unwrap().to_owned();
    let link = daemon.ui_link().unwrap();
    ff.command("browsingContext.navigate", json!({"context": dashboard, "url": link, "wait": "complete"}))
        .await
        .unwrap();

    let asked = root.event(&db, "worker.hold_changed", |e| e["data"]["hold"] == "awaiting_human").await;
    ff.until(&popup, &row(&db, "Needs you")).await.unwrap();
    let popup_ms = now_ms().saturating_sub(asked["at_ms"].as_u64().unwrap());
    ff.until(&dashboard, &row(&db, "Needs you")).await.unwrap();
    let dashboard_ms = now_ms().saturating_sub(asked["at_ms"].as_u64().unwrap());
    ff.until(&popup, &row(&ui, "Working")).await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while !ff.overlay_text(&db_tab).await.unwrap().is_some_and(|t| t.contains("Needs you")) {
        assert!(Instant::now() < deadline, "db's overlay never said Needs you");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let overlay_ms = now_ms().saturating_sub(asked["at_ms"].as_u64().unwrap());
    eprintln!(
        "operator surfaces (Firefox): Needs you reached the popup {popup_ms} ms, the dashboard {dashboard_ms} ms \
         and the overlay {overlay_ms} ms after its event (each polled in turn)"
    );
    let shot = ff.command("browsingContext.captureScreenshot", json!({"context": popup})).await.unwrap();
    let png = base64_decode(shot["data"].as_str().unwrap());
    std::fs::write(e2e::workspace().join("docs/screenshots/popup-firefox.png"), png).unwrap();

    // Stop from ui's overlay: the worker ends; its generation goes on.
    ff.click_overlay(&ui_tab, "Orchestrated").await.unwrap();
    ff.click_overlay(&ui_tab, "Stop worker").await.unwrap();
    root.event(&ui, "worker.state_changed", |e| e["data"]["to"] == "cancelled").await;
    ff.until(&dashboard, &row(&ui, "Stopped")).await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while !ff.overlay_text(&ui_tab).await.unwrap().is_some_and(|t| t.contains("Stopped")) {
        assert!(Instant::now() < deadline, "ui's overlay never said Stopped");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!((oracle(&ui_c)["state"].as_str(), oracle(&ui_c)["stop_clicks"].as_u64()), (Some("generating"), Some(0)));

    // A person answers db from the popup: once, and db goes on once.
    let before = turns(&db_c);
    let choose = click(&format!("button[data-worker=\"{db}\"][data-choice=\"postgres\"]"));
    assert_eq!(ff.eval(&popup, &choose).await.unwrap(), Value::Bool(true));
    root.event(&db, "worker.completed", |_| true).await;
    stays(Duration::from_secs(6), "the answered worker was resumed more than once", || turns(&db_c) == before + 1)
        .await;
    let answers =
        root.events().await.into_iter().filter(|e| e["type"] == "worker.message" && e["data"]["to"] == db.as_str());
    assert_eq!(answers.map(|e| e["data"]["body"].clone()).collect::<Vec<_>>(), [json!("postgres")]);
    daemon.kill();
}

fn base64_decode(text: &str) -> Vec<u8> {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.decode(text).unwrap()
}
