//! The two-worker scenario, driven by a root MCP client: spawn A and B;
//! A asks root a question and completes once answered; B completes; root
//! follows up A, whose wake prompt lands in A's existing conversation.

mod attachment;
mod everyday;
mod soak;
mod update;

pub use attachment::attachment_wait;
pub use everyday::{
    Away, BackgroundStopped, Restarted, background_stopped, browser_restarted, daemon_away, tab_closed, tab_navigated,
    tab_placed,
};
pub use soak::{Day, Disruption, STALL, Soak, hostile_day};
pub use update::{Updated, extension_updated};

use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use mcp_client::Client;
use serde_json::{Value, json};

/// What the run showed.
#[derive(Debug, Default)]
pub struct Outcome {
    /// A readable event trace.
    pub trace: Vec<String>,
    /// Worker ids: A, B.
    pub workers: Vec<String>,
    /// The conversations bound to A and B, from `conversation.bound` events.
    pub bound: Vec<(String, String)>,
    /// Workers whose `worker.completed` was seen, in order.
    pub completed: Vec<String>,
    /// The workers' names, as spawned (the trace names them; workers a
    /// scenario did not name are alpha and beta, in order).
    pub names: Vec<String>,
}

struct Root {
    client: Client,
    capability: String,
    cursor: u64,
    /// When the scenario started (ms since the epoch): the trace's zero.
    started_ms: u64,
}

impl Root {
    async fn call(&mut self, tool: &str, mut args: Value) -> anyhow::Result<Value> {
        args["capability"] = json!(self.capability);
        self.client.call(tool, args).await?.map_err(|e| anyhow::anyhow!("{tool}: {e}"))
    }

    /// Waits for an event matching `wanted`, recording every event seen.
    async fn wait(
        &mut self,
        out: &mut Outcome,
        budget: Duration,
        wanted: impl Fn(&Value) -> bool,
    ) -> anyhow::Result<Value> {
        let deadline = Instant::now() + budget;
        while Instant::now() < deadline {
            let page = self.call("events_wait", json!({"after_cursor": self.cursor, "timeout_ms": 5000})).await?;
            for event in page["events"].as_array().cloned().unwrap_or_default() {
                self.note(out, &event);
                if wanted(&event) {
                    return Ok(event);
                }
            }
            self.cursor = page["cursor"].as_u64().unwrap_or(self.cursor);
        }
        bail!("timed out waiting; trace so far:\n{}", out.trace.join("\n"))
    }

    /// Records one event seen: in the trace, and the bindings and completions.
    fn note(&mut self, out: &mut Outcome, event: &Value) {
        self.cursor = event["cursor"].as_u64().unwrap_or(self.cursor);
        let named = out.names.iter().map(String::as_str).chain(["alpha", "beta"]);
        let names: Vec<(String, &str)> = out.workers.iter().cloned().zip(named).collect();
        out.trace.push(describe(event, self.started_ms, &names));
        if event["type"] == "conversation.bound" {
            let data = &event["data"];
            out.bound.push((
                data["worker_id"].as_str().unwrap_or_default().into(),
                data["conversation_id"].as_str().unwrap_or_default().into(),
            ));
        }
        if event["type"] == "worker.completed" {
            out.completed.push(event["data"]["worker_id"].as_str().unwrap_or_default().into());
        }
    }

    /// Records every event committed since the last one seen, without waiting.
    async fn catch_up(&mut self, out: &mut Outcome) -> anyhow::Result<()> {
        loop {
            let page = self.call("events_list", json!({"after_cursor": self.cursor, "limit": 500})).await?;
            let events = page["events"].as_array().cloned().unwrap_or_default();
            for event in &events {
                self.note(out, event);
            }
            if events.is_empty() {
                return Ok(());
            }
        }
    }
}

/// One line of the trace: when the event was committed (seconds since the
/// scenario started), its type, its worker's name and its details.
fn describe(event: &Value, started_ms: u64, names: &[(String, &str)]) -> String {
    let data = &event["data"];
    let worker = data["worker_id"].as_str().unwrap_or_default();
    let who = names.iter().find(|(id, _)| id == worker).map_or("", |(_, name)| *name);
    let transition = match (event["type"].as_str(), data["from"].as_str(), data["to"].as_str()) {
        (Some("worker.state_changed"), Some(from), Some(to)) => format!("{from} -> {to} "),
        _ => String::new(),
    };
    let detail = ["conversation_id", "state", "error", "kind", "summary", "body", "code"]
        .iter()
        .filter_map(|k| data[*k].as_str().map(|v| format!("{k}={v}")))
        .collect::<Vec<_>>()
        .join(" ");
    format!(
        "{:>7.2}s  {:<28} {who:<6} {transition}{detail}",
        event["at_ms"].as_u64().unwrap_or_else(fakechat::hub::now_ms).saturating_sub(started_ms) as f64 / 1000.0,
        event["type"].as_str().unwrap_or("?")
    )
}

/// Runs the scenario against the MCP endpoint at `mcp_url`.
pub async fn two_workers(mcp_url: &str, budget: Duration) -> anyhow::Result<Outcome> {
    let mut client = Client::connect(mcp_url).await?;
    let created =
        client.call("run_create", json!({"title": "two workers"})).await?.map_err(|e| anyhow::anyhow!("{e}"))?;
    let capability = created["root_capability"].as_str().context("no root capability")?.to_owned();
    let mut root = Root { client, capability, cursor: 0, started_ms: fakechat::hub::now_ms() };
    let mut out = Outcome::default();
    let spawn = |name: &str, scenario: &str| json!({"name": name, "assignment": {"objective": format!("Build {name}\nscenario: {scenario}")}});
    let a = root
        .call("worker_spawn", spawn("alpha", r#"ask_root "Which port?"; await_answer; complete "A built""#))
        .await?;
    let b = root.call("worker_spawn", spawn("beta", r#"progress "half way"; complete "B built""#)).await?;
    let a_id = a["worker"]["worker_id"].as_str().context("no worker id")?.to_owned();
    let b_id = b["worker"]["worker_id"].as_str().context("no worker id")?.to_owned();
    out.workers = vec![a_id.clone(), b_id.clone()];

    let question = root
        .wait(&mut out, budget, |e| {
            e["type"] == "worker.message" && e["data"]["kind"] == "question" && e["data"]["from"] == a_id.as_str()
        })
        .await?;
    let message_id = question["data"]["message_id"].clone();
    root.call("message_send", json!({"to": a_id, "kind": "answer", "body": "7777", "in_reply_to": message_id})).await?;
    // B may finish before A asks: completions seen while waiting for the question count.
    while !(out.completed.contains(&a_id) && out.completed.contains(&b_id)) {
        root.wait(&mut out, budget, |e| e["type"] == "worker.completed").await?;
    }
    root.call(
        "worker_followup",
        json!({"worker_id": a_id, "instructions": "Add a test.\nscenario: complete \"A tested\""}),
    )
    .await?;
    root.wait(&mut out, budget, |e| e["type"] == "worker.completed" && e["data"]["worker_id"] == a_id.as_str()).await?;
    Ok(out)
}

/// What the Execution Continuity scenarios left in fakechat's oracle, per
/// conversation bound to one of the workers.
fn oracle_of(hub: &fakechat::hub::Hub, conversation: &str) -> Value {
    hub.oracle()["conversations"][conversation].clone()
}

/// Checks that `conversation` holds exactly `want` user turns.
fn exactly(hub: &fakechat::hub::Hub, conversation: &str, want: usize, out: &Outcome) -> anyhow::Result<()> {
    let turns = oracle_of(hub, conversation)["user_turns"].as_array().map_or(0, Vec::len);
    if turns != want {
        bail!("{turns} user turns, not {want}: {:#}\n{}", hub.oracle(), out.trace.join("\n"));
    }
    Ok(())
}

/// Waits until every one of `conversations` has its last turn ended.
async fn all_idle(hub: &fakechat::hub::Hub, conversations: &[String], budget: Duration) -> anyhow::Result<()> {
    let deadline = Instant::now() + budget;
    while !conversations.iter().all(|c| oracle_of(hub, c)["state"] == "idle") {
        if Instant::now() > deadline {
            bail!("the conversations never went idle: {:#}", hub.oracle());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok(())
}

impl Root {
    async fn start(mcp_url: &str, title: &str) -> anyhow::Result<Root> {
        let mut client = Client::connect(mcp_url).await?;
        let created = client.call("run_create", json!({"title": title})).await?.map_err(|e| anyhow::anyhow!("{e}"))?;
        let capability = created["root_capability"].as_str().context("no root capability")?.to_owned();
        let mut root = Root { client, capability, cursor: 0, started_ms: fakechat::hub::now_ms() };
        root.call("run_continuation_set_default", json!({"policy": {"mode": "auto"}})).await?;
        Ok(root)
    }

    /// How many events of `kind` about `worker` the run's log holds.
    async fn events_of(&mut self, worker: &str, kind: &str) -> anyhow::Result<usize> {
        Ok(self.log_of(worker).await?.iter().filter(|e| e["type"] == kind).count())
    }

    /// Every event about `worker` the run's log holds, in order.
    async fn log_of(&mut self, worker: &str) -> anyhow::Result<Vec<Value>> {
        let (mut after, mut about) = (0, Vec::new());
        loop {
            let page = self.call("events_list", json!({"after_cursor": after, "limit": 500})).await?;
            let events = page["events"].as_array().cloned().unwrap_or_default();
            about.extend(events.iter().filter(|e| e["data"]["worker_id"] == worker).cloned());
            match page["cursor"].as_u64() {
                Some(cursor) if !events.is_empty() && cursor > after => after = cursor,
                _ => return Ok(about),
            }
        }
    }

    /// `worker`'s view in `worker_list` (what a client reads), polled until
    /// `wanted` holds of it (bounded by `budget`).
    async fn until_listed(
        &mut self,
        worker: &str,
        budget: Duration,
        what: &str,
        wanted: impl Fn(&Value) -> bool,
    ) -> anyhow::Result<Value> {
        let deadline = Instant::now() + budget;
        loop {
            let list = self.call("worker_list", json!({})).await?;
            let view = list["workers"].as_array().and_then(|all| all.iter().find(|w| w["worker_id"] == worker));
            let view = view.cloned().unwrap_or(Value::Null);
            if wanted(&view) {
                return Ok(view);
            }
            if Instant::now() > deadline {
                bail!("{what} never showed in worker_list; last seen: {view}");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    async fn spawn(&mut self, out: &mut Outcome, name: &str, scenario: &str) -> anyhow::Result<String> {
        let assignment = json!({"objective": format!("Build {name}\nscenario: {scenario}")});
        let spawned = self.call("worker_spawn", json!({"name": name, "assignment": assignment})).await?;
        let id = spawned["worker"]["worker_id"].as_str().context("no worker id")?.to_owned();
        out.workers.push(id.clone());
        out.names.push(name.to_owned());
        Ok(id)
    }

    fn conversation_of(out: &Outcome, worker: &str) -> anyhow::Result<String> {
        out.bound.iter().find(|(w, _)| w == worker).map(|(_, c)| c.clone()).context("the worker was never bound")
    }
}

/// Whether `e` is `worker`'s completion with `summary`.
fn completed(worker: &str, summary: &'static str) -> impl Fn(&Value) -> bool + use<> {
    let worker = worker.to_owned();
    move |e: &Value| {
        e["type"] == "worker.completed" && e["data"]["worker_id"] == worker.as_str() && e["data"]["summary"] == summary
    }
}

/// A fresh run (titled `title`) whose one worker `name` completed its first
/// turn ("first") and whose page went idle: root, what was seen, the
/// worker and its conversation.
async fn settled_worker(
    mcp_url: &str,
    hub: &fakechat::hub::Hub,
    title: &str,
    name: &str,
    budget: Duration,
) -> anyhow::Result<(Root, Outcome, String, String)> {
    let mut root = Root::start(mcp_url, title).await?;
    let mut out = Outcome::default();
    let worker = root.spawn(&mut out, name, r#"complete "first""#).await?;
    root.wait(&mut out, budget, completed(&worker, "first")).await?;
    let conversation = Root::conversation_of(&out, &worker)?;
    all_idle(hub, std::slice::from_ref(&conversation), budget).await?;
    Ok((root, out, worker, conversation))
}

/// What a browser asleep showed: how long after it woke the worker was
/// working again, idle and mid-turn.
#[derive(Debug)]
pub struct Asleep {
    /// From the wake-up to the completion of the follow-up that fell due
    /// while the browser was stopped.
    pub idle_back: Duration,
    /// From the wake-up to the daemon seeing the end of the turn that was
    /// running when the browser stopped.
    pub mid_turn_back: Duration,
}

/// The whole browser asleep (issue 44: a laptop lid closed), `asleep(true)`
/// stopping it and `asleep(false)` waking it. Idle: a follow-up falls due
/// while the browser is stopped; `worker_list` says the worker waits for
/// its browser (or its executor, when that is the browser); once it wakes
/// the follow-up goes in once. Mid-turn: the browser stops while a turn
/// runs and wakes `nap` later; the turn ends,
/// nothing is sent again and the stall guard does not fire. The oracle
/// counts exactly three user turns.
pub async fn browser_asleep(
    mcp_url: &str,
    hub: &fakechat::hub::Hub,
    asleep: impl Fn(bool) -> anyhow::Result<()>,
    nap: Duration,
    budget: Duration,
) -> anyhow::Result<Asleep> {
    let (mut root, mut out, worker, conversation) =
        settled_worker(mcp_url, hub, "browser asleep", "sleeper", budget).await?;
    let done = |summary| completed(&worker, summary);

    // Idle: the browser stops, then a follow-up falls due.
    asleep(true)?;
    let followup = "Again.\nscenario: complete \"second\"";
    let said = async {
        root.call("worker_followup", json!({"worker_id": worker, "instructions": followup})).await?;
        // The CDP agent says its browser does not answer; the extension's
        // connection lapses with it.
        let on = |w: &Value| w["waiting_for"]["on"] == "browser" || w["waiting_for"]["on"] == "executor";
        root.until_listed(&worker, budget, "waiting for its browser", on).await
    }
    .await;
    asleep(false)?;
    let woke = Instant::now();
    said?;
    root.wait(&mut out, budget, done("second")).await?;
    let idle_back = woke.elapsed();
    all_idle(hub, std::slice::from_ref(&conversation), budget).await?;

    // Mid-turn: the browser stops while the turn runs.
    let followup = "Once more.\nscenario: progress \"napping\"; sleep 3s; complete \"third\"";
    root.call("worker_followup", json!({"worker_id": worker, "instructions": followup})).await?;
    root.wait(&mut out, budget, |e| e["type"] == "worker.progress" && e["data"]["summary"] == "napping").await?;
    asleep(true)?;
    tokio::time::sleep(nap).await;
    asleep(false)?;
    let woke = Instant::now();
    // Its model's calls do not pass through the browser (it may complete
    // meanwhile): back is when the daemon sees the page's turn end.
    let idle = |e: &Value| {
        e["type"] == "conversation.state_changed" && e["data"]["worker_id"] == worker && e["data"]["state"] == "idle"
    };
    root.wait(&mut out, budget, idle).await?;
    let mid_turn_back = woke.elapsed();
    all_idle(hub, std::slice::from_ref(&conversation), budget).await?;
    if root.events_of(&worker, "worker.completed").await? != 3 {
        bail!("the turn that slept never completed\n{}", out.trace.join("\n"));
    }

    // Exactly once: the bootstrap and two follow-ups; no stall was raised.
    exactly(hub, &conversation, 3, &out)?;
    let stalled = root.events_of(&worker, "continuation.turn_stalled").await?;
    if stalled != 0 {
        bail!("the stall guard fired on a turn that was merely asleep\n{}", out.trace.join("\n"));
    }
    Ok(Asleep { idle_back, mid_turn_back })
}

/// How long after each lifecycle move the worker was working again.
#[derive(Debug)]
pub struct TabLifecycle {
    /// A follow-up asked for just after its tab was discarded: to its completion.
    pub discarded_with_wake: Duration,
    /// A follow-up asked for once the discarded tab was back: to its completion.
    pub discarded_then_wake: Duration,
    /// A follow-up asked for while its tab was frozen: to its completion
    /// (none where the browser freezes no page).
    pub frozen_with_wake: Option<Duration>,
}

/// The browser's lifecycle moves on a managed tab (issue 44): discarded
/// with a follow-up asked for at once, discarded with none (the follow-up
/// comes once the tab is back), and frozen with a follow-up due (where the
/// browser freezes pages). Each follow-up goes in exactly once; the oracle
/// counts one user turn for each, and the bootstrap.
pub async fn tab_lifecycle(
    mcp_url: &str,
    hub: &fakechat::hub::Hub,
    browser: &mut impl crate::lifecycle::Lifecycle,
    budget: Duration,
) -> anyhow::Result<TabLifecycle> {
    let (mut root, mut out, worker, conversation) =
        settled_worker(mcp_url, hub, "tab lifecycle", "lifer", budget).await?;
    let done = |summary| completed(&worker, summary);
    let conv = std::slice::from_ref(&conversation);
    let followup = |summary: &str| json!({"worker_id": worker, "instructions": format!("Go on.\nscenario: complete \"{summary}\"")});

    // Discarded, a follow-up asked for at once.
    browser.discard(&conversation).await?;
    let asked = Instant::now();
    root.call("worker_followup", followup("second")).await?;
    root.wait(&mut out, budget, done("second")).await?;
    let discarded_with_wake = asked.elapsed();
    all_idle(hub, conv, budget).await?;

    // Discarded with nothing due: the tab comes back by itself (the daemon
    // sees its page idle again), then a follow-up.
    root.catch_up(&mut out).await?;
    browser.discard(&conversation).await?;
    let back = |e: &Value| {
        e["type"] == "conversation.state_changed" && e["data"]["worker_id"] == worker && e["data"]["state"] == "idle"
    };
    root.wait(&mut out, budget, back).await?;
    let asked = Instant::now();
    root.call("worker_followup", followup("third")).await?;
    root.wait(&mut out, budget, done("third")).await?;
    let discarded_then_wake = asked.elapsed();
    all_idle(hub, conv, budget).await?;

    // Frozen, a follow-up due.
    let frozen_with_wake = match browser.freezes() {
        true => {
            browser.freeze(&conversation, true).await?;
            let asked = Instant::now();
            root.call("worker_followup", followup("fourth")).await?;
            root.wait(&mut out, budget, done("fourth")).await?;
            all_idle(hub, conv, budget).await?;
            Some(asked.elapsed())
        }
        false => None,
    };

    let want = if browser.freezes() { 4 } else { 3 };
    exactly(hub, &conversation, want, &out)?;
    Ok(TabLifecycle { discarded_with_wake, discarded_then_wake, frozen_with_wake })
}

/// Execution Continuity in the browser, with Auto Resume as the run's
/// default and nobody typing: alpha's assignment takes three turns (it
/// ends two of them unfinished, `status: working`) and completes; beta's
/// second turn ends on "Message delivery timed out" and it is recovered by
/// a fresh resume prompt, never a click on Retry. After both completed and
/// their turns ended, nothing more is sent.
pub async fn auto_resume(mcp_url: &str, hub: &fakechat::hub::Hub, budget: Duration) -> anyhow::Result<Outcome> {
    let mut root = Root::start(mcp_url, "auto resume").await?;
    let mut out = Outcome::default();
    let alpha = root
        .spawn(&mut out, "alpha", r#"progress "turn 1"; end_turn; progress "turn 2"; end_turn; complete "three turns""#)
        .await?;
    let beta =
        root.spawn(&mut out, "beta", r#"progress "before"; incident delivery_timeout; complete "recovered""#).await?;
    while !(out.completed.contains(&alpha) && out.completed.contains(&beta)) {
        root.wait(&mut out, budget, |e| e["type"] == "worker.completed").await?;
    }
    let conversations = [Root::conversation_of(&out, &alpha)?, Root::conversation_of(&out, &beta)?];
    all_idle(hub, &conversations, budget).await?;
    // Longer than the idle grace: a resume after completion would be sent by now.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let turns = |c: &str| oracle_of(hub, c)["user_turns"].as_array().map_or(0, Vec::len);
    if turns(&conversations[0]) != 3 || turns(&conversations[1]) != 2 {
        bail!("expected 3 turns for alpha and 2 for beta: {:#}\n{}", hub.oracle(), out.trace.join("\n"));
    }
    for c in &conversations {
        let seen = oracle_of(hub, c);
        if seen["retry_clicks"] != 0 || seen["stop_clicks"] != 0 || seen["errors"] != json!([]) {
            bail!("Retry or Stop was clicked, or the agent saw an error: {seen:#}");
        }
    }
    if oracle_of(hub, &conversations[1])["incidents"] != json!(["delivery_timeout"]) {
        bail!("beta's delivery timeout was not shown: {:#}", hub.oracle());
    }
    for (worker, attempts, reason) in [(&alpha, 2, "auto_resume"), (&beta, 1, "recovery")] {
        let got = root.call("worker_continuation_get", json!({"worker_id": worker})).await?;
        if got["attempts"] != attempts || got["last_reason"] != reason || got["in_flight"] != false {
            bail!("{worker}: expected {attempts} attempt(s), the last for {reason}: {got}");
        }
    }
    // The extension saw the running turns move on (streamed text) and said so.
    if root.events_of(&alpha, "conversation.progressed").await? == 0 {
        bail!("no conversation.progressed for alpha's streaming turns");
    }
    Ok(out)
}

/// Turns that never end, told apart by the page: kappa's turn hangs (the
/// page generating, nothing streaming) and is reported stalled once the
/// daemon's `--stalled-turn-after-ms` (`bound`) has passed; lambda's turn
/// streams text for longer than the bound without one tool call and is not
/// reported (the extension sees its text grow), then completes. Nothing is
/// sent into the hanging turn; nothing is clicked.
pub async fn turn_stall(
    mcp_url: &str,
    hub: &fakechat::hub::Hub,
    bound: Duration,
    budget: Duration,
) -> anyhow::Result<Outcome> {
    let mut root = Root::start(mcp_url, "turn stall").await?;
    let mut out = Outcome::default();
    let kappa = root.spawn(&mut out, "kappa", r#"progress "started"; hang"#).await?;
    let streams = (bound + bound / 2).as_secs();
    let lambda = root.spawn(&mut out, "lambda", &format!(r#"stream {streams}s; complete "streamed""#)).await?;
    let stalled = root.wait(&mut out, budget, |e| e["type"] == "continuation.turn_stalled").await?;
    if stalled["data"]["worker_id"] != kappa.as_str() || stalled["data"]["stall"] != "generating_without_progress" {
        bail!("expected kappa's hanging turn to be the one reported: {stalled}");
    }
    while !out.completed.contains(&lambda) {
        root.wait(&mut out, budget, |e| e["type"] == "worker.completed").await?;
    }
    if root.events_of(&lambda, "continuation.turn_stalled").await? != 0 {
        bail!("lambda's streaming turn was reported stalled:\n{}", out.trace.join("\n"));
    }
    if root.events_of(&lambda, "conversation.progressed").await? < 2 {
        bail!("lambda's page was not seen moving on all along:\n{}", out.trace.join("\n"));
    }
    let kappa_page = oracle_of(hub, &Root::conversation_of(&out, &kappa)?);
    if kappa_page["user_turns"].as_array().map_or(0, Vec::len) != 1 || kappa_page["state"] != "generating" {
        bail!("something was sent into kappa's hanging turn, or it ended: {kappa_page:#}");
    }
    if kappa_page["retry_clicks"] != 0 || kappa_page["stop_clicks"] != 0 {
        bail!("a click on the hanging page: {kappa_page:#}");
    }
    Ok(out)
}

/// "Too many requests" on gamma's tab holds every automatic continuation
/// (delta's too) for the daemon's `--rate-limit-wait-ms`, counted from the
/// sighting; the dialog is never clicked by the product (the operator
/// dismisses it, as a person would); then both are resumed and complete.
pub async fn rate_limit(
    mcp_url: &str,
    hub: &fakechat::hub::Hub,
    wait: Duration,
    budget: Duration,
) -> anyhow::Result<Outcome> {
    let mut root = Root::start(mcp_url, "rate limit").await?;
    let mut out = Outcome::default();
    let gamma =
        root.spawn(&mut out, "gamma", r#"progress "first"; incident rate_limit; complete "after the wait""#).await?;
    let limited = root.wait(&mut out, budget, |e| e["type"] == "continuation.rate_limited").await?;
    let limited_at = limited["at_ms"].as_u64().context("no at_ms")?;
    let delta = root.spawn(&mut out, "delta", r#"progress "one"; end_turn; complete "delta done""#).await?;
    let gamma_conversation = Root::conversation_of(&out, &gamma)?;
    hub.update(&gamma_conversation, |c| c.rate_limited = false);
    let mut resumed = Vec::new();
    while resumed.len() < 2 {
        let e = root.wait(&mut out, budget, |e| e["type"] == "execution.scheduled").await?;
        resumed
            .push((e["data"]["worker_id"].as_str().unwrap_or_default().to_owned(), e["at_ms"].as_u64().unwrap_or(0)));
    }
    for (worker, at) in &resumed {
        if *at < limited_at + wait.as_millis() as u64 {
            bail!(
                "{worker} was resumed {} ms after the rate limit, inside the wait:\n{}",
                at - limited_at,
                out.trace.join("\n")
            );
        }
    }
    while !(out.completed.contains(&gamma) && out.completed.contains(&delta)) {
        root.wait(&mut out, budget, |e| e["type"] == "worker.completed").await?;
    }
    for c in [gamma_conversation, Root::conversation_of(&out, &delta)?] {
        let seen = oracle_of(hub, &c);
        if seen["retry_clicks"] != 0 || seen["errors"] != json!([]) {
            bail!("a control was clicked or the agent saw an error: {seen:#}");
        }
    }
    Ok(out)
}

/// How long the scenario keeps ChatGPT's tool-approval card standing with a
/// send held behind it: long enough for several of the daemon's rechecks
/// when its `--executor-recheck-after-ms` is about a second.
pub const APPROVAL_HELD: Duration = Duration::from_secs(6);

/// ChatGPT's tool-approval card ("Allow ChatGPT to use <App>?") in eta's
/// running turn, with Auto Resume as the run's default: the daemon shows eta
/// `waiting_for: person` with a reason naming the card, and its log holds
/// the page's `conversation.state_changed` to `error` /
/// `TOOL_APPROVAL_REQUIRED` (what `events_list` shows an operator). A
/// follow-up asked for meanwhile is held: for [`APPROVAL_HELD`] nothing is
/// typed into the chat, neither it nor a resume, nothing is dispatched, and
/// Execution Continuity neither resumes nor reports a stall. Then a person
/// answers the card (`Hub::answer_approval`): eta waits for nothing, the
/// turn ends, and the follow-up is delivered exactly once and completes.
/// Nothing in the page clicked the card, Retry or Stop.
pub async fn approval_wait(mcp_url: &str, hub: &fakechat::hub::Hub, budget: Duration) -> anyhow::Result<Outcome> {
    let mut root = Root::start(mcp_url, "approval wait").await?;
    let mut out = Outcome::default();
    let eta = root.spawn(&mut out, "eta", r#"progress "calling a tool"; hang"#).await?;
    // A turn is running: eta reported progress from it, and the turn goes on.
    let mut progressed = false;
    while !progressed || Root::conversation_of(&out, &eta).is_err() {
        let e = root
            .wait(&mut out, budget, |e| {
                e["data"]["worker_id"] == eta.as_str()
                    && (e["type"] == "worker.progress" || e["type"] == "conversation.bound")
            })
            .await?;
        progressed |= e["type"] == "worker.progress";
    }
    let conversation = Root::conversation_of(&out, &eta)?;
    let page = |hub: &fakechat::hub::Hub| oracle_of(hub, &conversation);
    let turns = |hub: &fakechat::hub::Hub| page(hub)["user_turns"].as_array().map_or(0, Vec::len);
    if page(hub)["state"] != "generating" || turns(hub) != 1 {
        bail!("eta's turn is not the one running turn: {:#}", page(hub));
    }

    // ChatGPT holds the turn's tool call for the person.
    if !hub.approval(&conversation, Some(crate::APP_LABEL)) {
        bail!("fakechat has no conversation {conversation}");
    }
    let waiting =
        root.until_listed(&eta, budget, "eta waiting for a person", |w| w["waiting_for"]["on"] == "person").await?;
    let reason = waiting["waiting_for"]["next_step"].as_str().unwrap_or_default();
    if !reason.contains("TOOL_APPROVAL_REQUIRED") || !reason.contains("card") || waiting["state"] != "running" {
        bail!("eta's wait does not name the tool approval, or it is not running: {waiting}");
    }
    root.catch_up(&mut out).await?;
    let recorded = root.log_of(&eta).await?.into_iter().find(|e| {
        e["type"] == "conversation.state_changed"
            && e["data"]["state"] == "error"
            && e["data"]["error"] == "TOOL_APPROVAL_REQUIRED"
    });
    if recorded.is_none() {
        bail!("no conversation.state_changed to TOOL_APPROVAL_REQUIRED in the log:\n{}", out.trace.join("\n"));
    }

    // A follow-up asked for under the card is held.
    root.call(
        "worker_followup",
        json!({"worker_id": eta, "instructions": "Go on after the approval.\nscenario: complete \"after the approval\""}),
    )
    .await?;
    let held_until = Instant::now() + APPROVAL_HELD.min(budget);
    while Instant::now() < held_until {
        let seen = page(hub);
        if turns(hub) != 1 || seen["approval"]["answered"] != false || hub.approval_clicks(&conversation) != 0 {
            bail!("something was typed into eta's chat under the card, or the card was answered: {seen:#}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    root.catch_up(&mut out).await?;
    let log = root.log_of(&eta).await?;
    let sends: Vec<&Value> = log
        .iter()
        .filter(|e| e["type"] == "executor.command_queued" && e["data"]["intent"]["op"] == "send")
        .map(|e| &e["data"]["command_id"])
        .collect();
    if sends.len() != 1 {
        bail!("expected the follow-up as the one send queued:\n{}", out.trace.join("\n"));
    }
    let dispatched = |log: &[Value]| {
        log.iter()
            .filter(|e| e["type"] == "executor.command_dispatched")
            .map(|e| e["data"]["command_id"].clone())
            .collect::<Vec<_>>()
    };
    if dispatched(&log).iter().any(|c| sends.contains(&c)) {
        bail!("the follow-up was dispatched under the card:\n{}", out.trace.join("\n"));
    }
    let blocked = ["execution.scheduled", "continuation.stalled", "continuation.turn_stalled", "worker.hold_changed"];
    if let Some(e) = log.iter().find(|e| blocked.iter().any(|k| e["type"] == *k)) {
        bail!("Execution Continuity acted on a worker waiting for a person: {e}\n{}", out.trace.join("\n"));
    }
    let still = root.until_listed(&eta, budget, "eta", |w| !w.is_null()).await?;
    if still["waiting_for"]["on"] != "person" {
        bail!("eta stopped waiting for a person while the card stood: {still}");
    }

    // The person answers; the turn goes on, then ends.
    if !hub.answer_approval(&conversation) {
        bail!("the card was no longer waiting: {:#}", page(hub));
    }
    root.until_listed(&eta, budget, "eta no longer waiting", |w| w.get("waiting_for").is_none()).await?;
    if turns(hub) != 1 {
        bail!("the follow-up went into the turn still running after the answer: {:#}", page(hub));
    }
    hub.end_turn(&conversation, None);
    while !out.completed.contains(&eta) {
        root.wait(&mut out, budget, |e| e["type"] == "worker.completed").await?;
    }
    all_idle(hub, std::slice::from_ref(&conversation), budget).await?;
    root.catch_up(&mut out).await?;
    let seen = page(hub);
    if turns(hub) != 2 || seen["user_turns"][1]["bootstrap"] != false {
        bail!("expected the bootstrap and the follow-up, each once: {seen:#}\n{}", out.trace.join("\n"));
    }
    let log = root.log_of(&eta).await?;
    let followups = dispatched(&log).iter().filter(|c| sends.contains(c)).count();
    if followups != 1 || log.iter().any(|e| e["type"] == "execution.scheduled") {
        bail!("the follow-up was not dispatched once, or a resume was scheduled:\n{}", out.trace.join("\n"));
    }
    let continuation = root.call("worker_continuation_get", json!({"worker_id": eta})).await?;
    if continuation["attempts"] != 0 || continuation["in_flight"] != false {
        bail!("Execution Continuity made an attempt for eta: {continuation}");
    }
    if hub.approval_clicks(&conversation) != 0
        || seen["retry_clicks"] != 0
        || seen["stop_clicks"] != 0
        || seen["errors"] != json!([])
    {
        bail!("the card, Retry or Stop was clicked in the page, or the agent saw an error: {seen:#}");
    }
    Ok(out)
}

/// What the tab-capacity scenario saw.
#[derive(Debug)]
pub struct TabCapacity {
    /// The most managed tabs ever open at once (sampled at every event).
    pub most: usize,
    /// How many reopens of parked workers were queued.
    pub reopened: usize,
}

/// Tab capacity (the daemon runs with `--max-open-tabs 3`): eight workers
/// each complete their assignment, then a follow-up to each of the eight
/// wakes it in its own conversation. `tabs` counts the managed tabs open
/// now. Fails unless every conversation holds exactly its bootstrap and its
/// wake, each worker was bound to one conversation only, parked workers
/// were reopened, and never more than three tabs were open.
pub async fn tab_capacity<'a>(
    mcp_url: &str,
    hub: &fakechat::hub::Hub,
    tabs: impl Fn() -> std::pin::Pin<Box<dyn std::future::Future<Output = usize> + Send + 'a>> + Send,
    budget: Duration,
) -> anyhow::Result<TabCapacity> {
    let mut root = Root::start(mcp_url, "tab capacity").await?;
    root.call("run_continuation_set_default", json!({"policy": {"mode": "manual"}})).await?;
    let mut out = Outcome::default();
    for i in 0..8 {
        root.spawn(&mut out, &format!("w{i}"), &format!("complete \"w{i} built\"")).await?;
    }
    let workers = out.workers.clone();
    let mut most = 0;
    for round in ["built", "again"] {
        let mut done = std::collections::HashSet::new();
        while done.len() < workers.len() {
            let event = root.wait(&mut out, budget, |_| true).await?;
            most = most.max(tabs().await);
            if event["type"] == "worker.completed"
                && event["data"]["summary"].as_str().is_some_and(|s| s.ends_with(round))
            {
                done.insert(event["data"]["worker_id"].as_str().unwrap_or_default().to_owned());
            }
        }
        if round == "built" {
            for (i, worker) in workers.iter().enumerate() {
                let instructions = format!("Again.\nscenario: complete \"w{i} again\"");
                root.call("worker_followup", json!({"worker_id": worker, "instructions": instructions})).await?;
            }
        }
    }
    root.catch_up(&mut out).await?;
    let log = root.log_of_run().await?;
    let reopened =
        log.iter().filter(|e| e["type"] == "executor.command_queued" && e["data"]["intent"]["op"] == "open").count();
    let oracle = hub.oracle();
    let conversations = oracle["conversations"].as_object().cloned().unwrap_or_default();
    if conversations.len() != workers.len() {
        bail!("{} conversations for {} workers: {oracle:#}", conversations.len(), workers.len());
    }
    for (id, c) in &conversations {
        let turns = c["user_turns"].as_array().cloned().unwrap_or_default();
        let bootstraps: Vec<bool> = turns.iter().map(|t| t["bootstrap"].as_bool().unwrap_or(false)).collect();
        if bootstraps != [true, false] || c["errors"] != json!([]) {
            bail!("{id}: not its bootstrap then its wake, each once: {c:#}");
        }
    }
    for worker in &workers {
        let bound: Vec<&String> = out.bound.iter().filter(|(w, _)| w == worker).map(|(_, c)| c).collect();
        if bound.is_empty() || bound.iter().any(|c| *c != bound[0]) || !conversations.contains_key(bound[0]) {
            bail!("{worker} was not bound to one conversation of its own: {bound:?}");
        }
    }
    if most > 3 || reopened < 5 {
        bail!("{most} tabs open at most, {reopened} reopens; trace:\n{}", out.trace.join("\n"));
    }
    Ok(TabCapacity { most, reopened })
}

impl Root {
    /// Every event of the run, in order.
    async fn log_of_run(&mut self) -> anyhow::Result<Vec<Value>> {
        let (mut after, mut all) = (0, Vec::new());
        loop {
            let page = self.call("events_list", json!({"after_cursor": after, "limit": 500})).await?;
            let events = page["events"].as_array().cloned().unwrap_or_default();
            all.extend(events.iter().cloned());
            match page["cursor"].as_u64() {
                Some(cursor) if !events.is_empty() && cursor > after => after = cursor,
                _ => return Ok(all),
            }
        }
    }
}

/// What the rollover scenario saw.
#[derive(Debug)]
pub struct Rollover {
    /// The retired conversation and the fresh one.
    pub conversations: (String, String),
    /// The capsule the fresh conversation was given, as JSON bytes.
    pub capsule_bytes: usize,
    /// From the length notice's report to the fresh conversation's binding.
    pub rollover: Duration,
}

/// The rollover's steps in the run's log, in order: a crash test stops
/// the daemon or the carrier right after each.
pub const ROLLOVER_STEPS: [&str; 6] = [
    "conversation.state_changed",
    "worker.rolled_over",
    "executor.command_dispatched",
    "executor.command_acked",
    "conversation.created",
    "conversation.bound",
];

/// Worker rollover (the daemon's executor declares `conversation_rollover`),
/// resumable across a crash: a worker's conversation reaches its maximum
/// length mid-assignment; the worker rolls into a fresh conversation and
/// completes there. [`RolloverRun::finish`] fails unless the full
/// conversation got its bootstrap alone (nothing typed after the notice),
/// the fresh one exactly one rollover bootstrap, the worker was bound to
/// exactly those two in order and rolled over once, the work before the
/// notice was not redone, and the retired conversation's capability is
/// refused with `CONVERSATION_RETIRED`.
pub struct RolloverRun {
    root: Root,
    out: Outcome,
    worker: String,
    mcp_url: String,
    /// The step of [`ROLLOVER_STEPS`] seen last (after the notice), if any.
    step: Option<usize>,
    full_at: Option<u64>,
    bound_at: Option<u64>,
    completed: bool,
}

impl RolloverRun {
    /// Starts the run: a worker whose conversation fills up after its first
    /// step; its fresh conversation waits `pause` before going on (room for
    /// a crash test's restart: a tool call into a daemon that is down fails).
    pub async fn start(mcp_url: &str, pause: Duration) -> anyhow::Result<RolloverRun> {
        let mut root = Root::start(mcp_url, "rollover").await?;
        root.call("run_continuation_set_default", json!({"policy": {"mode": "manual"}})).await?;
        let mut out = Outcome::default();
        let scenario = format!(
            "progress \"part one\"; incident too_long; sleep {}ms; progress \"part two\"; complete \"rolled and done\"",
            pause.as_millis()
        );
        let worker = root.spawn(&mut out, "long", &scenario).await?;
        Ok(RolloverRun {
            root,
            out,
            worker,
            mcp_url: mcp_url.to_owned(),
            step: None,
            full_at: None,
            bound_at: None,
            completed: false,
        })
    }

    fn observe(&mut self, event: &Value) -> anyhow::Result<()> {
        let at = event["at_ms"].as_u64().unwrap_or_default();
        let kind = event["type"].as_str().unwrap_or_default();
        if kind == "conversation.state_changed" && event["data"]["error"] == "CONVERSATION_TOO_LONG" {
            self.full_at.get_or_insert(at);
        }
        if self.full_at.is_some() {
            let next = self.step.map_or(0, |s| s + 1);
            if ROLLOVER_STEPS.get(next) == Some(&kind) {
                self.step = Some(next);
            }
            if kind == "conversation.bound" {
                self.bound_at.get_or_insert(at);
            }
        }
        match kind {
            "worker.completed" => self.completed = true,
            "worker.failed" => bail!("the worker failed: {event}"),
            "executor.command_completed" if event["data"]["outcome"]["status"] != "ok" => {
                self.out.trace.push(format!("    {}", event["data"]["outcome"]));
            }
            _ => {}
        }
        Ok(())
    }

    /// Waits until step `index` of [`ROLLOVER_STEPS`] is in the log.
    pub async fn until(&mut self, index: usize, budget: Duration) -> anyhow::Result<()> {
        while self.step.is_none_or(|s| s < index) {
            let event = self.root.wait(&mut self.out, budget, |_| true).await?;
            self.observe(&event)?;
        }
        Ok(())
    }

    /// A new MCP session with the daemon at the same address (after its
    /// restart), retrying for up to 10 s.
    pub async fn reconnect(&mut self) -> anyhow::Result<()> {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            match Client::connect(&self.mcp_url).await {
                Ok(client) => {
                    self.root.client = client;
                    return Ok(());
                }
                Err(e) if Instant::now() > deadline => return Err(e.into()),
                Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
            }
        }
    }

    /// Waits for the worker's completion and checks what happened.
    pub async fn finish(mut self, hub: &fakechat::hub::Hub, budget: Duration) -> anyhow::Result<Rollover> {
        while !self.completed {
            let event = self.root.wait(&mut self.out, budget, |_| true).await?;
            self.observe(&event)?;
        }
        let (mut root, mut out, worker) = (self.root, self.out, self.worker);
        root.catch_up(&mut out).await?;
        let bound: Vec<String> = out.bound.iter().filter(|(w, _)| *w == worker).map(|(_, c)| c.clone()).collect();
        let [old, fresh] = &bound[..] else { bail!("bound to {bound:?}, not two conversations in turn") };
        if old == fresh {
            bail!("rolled over into the same conversation {old}");
        }
        let oracle = hub.oracle();
        let conversation = |id: &str| oracle["conversations"][id].clone();
        let bootstraps = |id: &str| -> Vec<bool> {
            conversation(id)["user_turns"]
                .as_array()
                .map(|turns| turns.iter().map(|t| t["bootstrap"].as_bool().unwrap_or(false)).collect())
                .unwrap_or_default()
        };
        if bootstraps(old) != [true] || conversation(old)["incidents"] != json!(["conversation_too_long"]) {
            bail!("the full conversation got more than its bootstrap: {:#}", conversation(old));
        }
        if bootstraps(fresh) != [true] || conversation(fresh)["errors"] != json!([]) {
            bail!("the fresh conversation did not get exactly its rollover bootstrap: {:#}", conversation(fresh));
        }
        let log = root.log_of(&worker).await?;
        let progress: Vec<&str> = log
            .iter()
            .filter(|e| e["type"] == "worker.progress")
            .filter_map(|e| e["data"]["summary"].as_str())
            .collect();
        if progress != ["part one", "part two"] {
            bail!("work before the notice redone or lost: {progress:?}");
        }
        let rolled: Vec<&Value> = log.iter().filter(|e| e["type"] == "worker.rolled_over").collect();
        let [rolled] = rolled[..] else { bail!("{} rollovers, not one", rolled.len()) };
        if rolled["data"]["retired"] != json!(old) || rolled["data"]["capsule"]["epoch"] != 1 {
            bail!("the rollover named the wrong conversation or epoch: {rolled}");
        }
        let capsule_bytes = serde_json::to_vec(&rolled["data"]["capsule"])?.len();
        // The retired conversation's credentials change nothing now.
        let old_capability = hub
            .read(old, |c| c.agent.as_ref().map(|m| m.capability.clone()))
            .flatten()
            .ok_or_else(|| anyhow::anyhow!("the full conversation's agent kept no capability"))?;
        let late =
            root.client.call("worker_progress", json!({"capability": old_capability, "summary": "late"})).await?;
        match late {
            Err(e) if e.code == "CONVERSATION_RETIRED" => {}
            other => bail!("the retired conversation's call was not refused as retired: {other:?}"),
        }
        let rollover = match (self.full_at, self.bound_at) {
            (Some(full), Some(bound)) => Duration::from_millis(bound.saturating_sub(full)),
            _ => bail!("no length notice or no fresh binding seen; trace:\n{}", out.trace.join("\n")),
        };
        Ok(Rollover { conversations: (old.clone(), fresh.clone()), capsule_bytes, rollover })
    }
}

/// [`RolloverRun`] with no crash.
pub async fn rollover(mcp_url: &str, hub: &fakechat::hub::Hub, budget: Duration) -> anyhow::Result<Rollover> {
    RolloverRun::start(mcp_url, Duration::ZERO).await?.finish(hub, budget).await
}

/// What the model-pinning scenario saw.
#[derive(Debug)]
pub struct ModelPinning {
    /// Per picker generation, the model each prompt of the pinned worker's
    /// conversation went in under.
    pub models: Vec<Vec<String>>,
    /// The refused workers' launch failures.
    pub refused: Vec<String>,
}

/// Model pinning (the executor declares `conversation_model` and
/// `conversation_effort`; fakechat's picker offers
/// `fakechat::fixtures::models()`), in each picker generation: a worker
/// pinned to o3 (behind a submenu in both) gets its bootstrap and its wake
/// under o3 (a new chat shows the account default, GPT-5.5); a worker
/// pinned to a model the picker does not offer fails closed with
/// `MODEL_UNAVAILABLE` and nothing is typed for it. A third round runs the
/// picker of 2026-08/09: its Radix trigger opens on `pointerdown` only, and
/// the worker is pinned to o3 with the effort Pro (Advanced → Effort): both
/// prompts go in under o3 and Pro.
pub async fn model_pinning(mcp_url: &str, hub: &fakechat::hub::Hub, budget: Duration) -> anyhow::Result<ModelPinning> {
    use fakechat::render::Generation;
    hub.set_models(fakechat::fixtures::models());
    let mut root = Root::start(mcp_url, "model pinning").await?;
    root.call("run_continuation_set_default", json!({"policy": {"mode": "manual"}})).await?;
    let mut out = Outcome::default();
    let spawn = |name: &str, model: &str, effort: Option<&str>| {
        let assignment = json!({"objective": format!("Build {name}\nscenario: complete \"{name} done\"")});
        let mut args = json!({"name": name, "assignment": assignment, "model": model});
        if let Some(effort) = effort {
            args["effort"] = json!(effort);
        }
        args
    };
    let (mut pinned_workers, mut refused) = (Vec::new(), Vec::new());
    let rounds = [
        ("a", Generation::A, false, None),
        ("b", Generation::B, false, None),
        ("radix", Generation::B, true, Some("Pro")),
    ];
    for (g, generation, picker_pointer_only, effort) in rounds {
        hub.set_defaults(fakechat::hub::Settings { generation, picker_pointer_only, ..hub.defaults() });
        let pinned = root.call("worker_spawn", spawn(&format!("pinned-{g}"), "o3", effort)).await?;
        let pinned = pinned["worker"]["worker_id"].as_str().context("no worker id")?.to_owned();
        let view = root.until_listed(&pinned, budget, "its model", |w| w["model"] == "o3").await?;
        let done = |e: &Value| e["type"] == "worker.completed" && e["data"]["worker_id"] == pinned.as_str();
        root.wait(&mut out, budget, done).await.with_context(|| format!("{g}: {view}"))?;
        // Its wake: the picker is verified again before anything is typed.
        let instructions = format!("Again.\nscenario: complete \"pinned-{g} again\"");
        root.call("worker_followup", json!({"worker_id": pinned, "instructions": instructions})).await?;
        let summary = format!("pinned-{g} again");
        let again = |e: &Value| e["type"] == "worker.completed" && e["data"]["summary"] == summary.as_str();
        root.wait(&mut out, budget, again).await?;
        let unpinnable = root.call("worker_spawn", spawn(&format!("unpinnable-{g}"), "GPT-9", effort)).await?;
        let unpinnable = unpinnable["worker"]["worker_id"].as_str().context("no worker id")?.to_owned();
        let failed = |e: &Value| {
            e["type"] == "worker.state_changed"
                && e["data"]["worker_id"] == unpinnable.as_str()
                && e["data"]["to"] == "launch_failed"
        };
        let failed = root.wait(&mut out, budget, failed).await?;
        refused.push(failed["data"]["reason"].as_str().unwrap_or_default().to_owned());
        pinned_workers.push(pinned);
    }
    root.catch_up(&mut out).await?;
    let oracle = hub.oracle();
    let mut models = Vec::new();
    for (worker, (_, _, _, effort)) in pinned_workers.iter().zip(rounds) {
        let conversation = Root::conversation_of(&out, worker)?;
        let turns = oracle["conversations"][&conversation]["user_turns"].as_array().cloned().unwrap_or_default();
        let used: Vec<String> = turns.iter().map(|t| t["model"].as_str().unwrap_or("none").to_owned()).collect();
        if used != ["o3", "o3"] {
            bail!("a pinned worker's prompts went in under {used:?}, not o3 twice");
        }
        if let Some(effort) = effort {
            let efforts: Vec<&str> = turns.iter().map(|t| t["effort"].as_str().unwrap_or("none")).collect();
            if efforts != [effort, effort] {
                bail!("the worker pinned to {effort} sent its prompts under the efforts {efforts:?}");
            }
        }
        models.push(used);
    }
    let conversations = oracle["conversations"].as_object().map_or(0, |c| c.len());
    if conversations != pinned_workers.len() {
        bail!("{conversations} conversations: something was typed for an unpinnable worker: {oracle:#}");
    }
    if refused.iter().any(|code| code != "MODEL_UNAVAILABLE") {
        bail!("the unpinnable workers failed with {refused:?}, not MODEL_UNAVAILABLE");
    }
    Ok(ModelPinning { models, refused })
}

/// What the ownership lifecycle showed.
#[derive(Debug)]
pub struct OwnershipLifecycle {
    /// The worker's conversation, as its executor bound it.
    pub conversation: String,
    /// The record.
    pub ownership_id: String,
    /// The main commit the worktree's branch landed at.
    pub landed: String,
}

fn git(dir: &std::path::Path, args: &[&str]) -> anyhow::Result<String> {
    let out = std::process::Command::new("git").arg("-C").arg(dir).args(args).output()?;
    if !out.status.success() {
        bail!("git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    }
    Ok(String::from_utf8(out.stdout)?.trim().to_owned())
}

/// Worktree ownership through a browser (issue 35, the plan's O9): root
/// creates a worker, the extension creates its conversation and its
/// executor binds the UUID; the worker's model (fakechat's agent, every
/// call attributed to its page) claims the fixture worktree `worktree` (of
/// `repo`, on branch `work/<name>`) in session `o9-s1`; the lookup names
/// its conversation; a follow-up resumes it in session `o9-s2`; another
/// run sees none of it and its claim is refused naming no one; the
/// worker commits there and submits, root lands it on main (Git confirms)
/// and records the worktree's removal; `who` (the CLI, given) by the
/// landed commit still names the worker, its session and its conversation.
pub async fn ownership_lifecycle(
    mcp_url: &str,
    repo: &std::path::Path,
    worktree: &std::path::Path,
    who: impl Fn(&str) -> anyhow::Result<Value>,
    budget: Duration,
) -> anyhow::Result<OwnershipLifecycle> {
    let mut root = Root::start(mcp_url, "ownership lifecycle").await?;
    let mut out = Outcome::default();
    let wt = worktree.display().to_string();
    let claim = json!({"worktree": wt, "session": "o9-s1", "lane": "e2e"});
    let worker = root.spawn(&mut out, "owner", &format!("call ownership_claim {claim}; complete \"claimed\"")).await?;
    let done = |summary| completed(&worker, summary);
    root.wait(&mut out, budget, done("claimed")).await?;
    let conversation = Root::conversation_of(&out, &worker)?;
    let found = root.call("ownership_who", json!({"worktree": wt})).await?;
    let record = found["records"].as_array().and_then(|r| r.last()).context("no record")?.clone();
    let ownership_id = record["ownership_id"].as_str().context("no ownership id")?.to_owned();
    let uuids = |r: &Value| -> Vec<String> {
        r["holder"]["conversations"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|c| c["uuid"].as_str().map(str::to_owned))
            .collect()
    };
    if record["state"] != "active"
        || record["holder"]["worker_id"] != worker.as_str()
        || uuids(&record) != [conversation.clone()]
    {
        bail!("the claim does not name the worker's conversation {conversation}: {record}");
    }

    // The session restarts: the worker resumes its worktree in a new one.
    let resume = json!({"worktree": wt, "session": "o9-s2", "parent_session": "o9-s1"});
    let followup = format!("Resume.\nscenario: call ownership_claim {resume}; complete \"resumed\"");
    root.call("worker_followup", json!({"worker_id": worker, "instructions": followup})).await?;
    root.wait(&mut out, budget, done("resumed")).await?;

    // Ownership is scoped to its run: another run neither sees the record
    // (by worktree, by id, in the ownership log) nor learns who holds it.
    let mut other = Root::start(mcp_url, "another run").await?;
    let by_path = other.call("ownership_who", json!({"worktree": wt})).await?;
    let by_id = other.call("ownership_who", json!({"ownership_id": ownership_id})).await?;
    let log = other.call("events_list", json!({"after_cursor": 0, "stream": "ownership"})).await?;
    if by_path["records"] != json!([]) || by_id["records"] != json!([]) || log.to_string().contains(&ownership_id) {
        bail!("another run sees the record: {by_path} {by_id} {log}");
    }
    let taken = other.client.call("ownership_claim", json!({"capability": other.capability, "worktree": wt})).await?;
    match taken {
        Err(e)
            if e.code == "OWNERSHIP_CONFLICT" && !e.message.contains(&ownership_id) && !e.message.contains(&worker) => {
        }
        other => bail!("another run's claim of a held worktree: {other:?}"),
    }
    other.call("run_cancel", json!({"reason": "seen"})).await?;

    // Work, submit, land.
    std::fs::write(worktree.join("o9.txt"), "o9\n")?;
    git(worktree, &["add", "o9.txt"])?;
    git(worktree, &["-c", "user.name=O9", "-c", "user.email=o9@localhost", "commit", "-q", "-m", "o9"])?;
    let submit = json!({"ownership_id": ownership_id, "op": "submit"});
    let followup = format!("Submit.\nscenario: call ownership_update {submit}; complete \"submitted\"");
    root.call("worker_followup", json!({"worker_id": worker, "instructions": followup})).await?;
    root.wait(&mut out, budget, done("submitted")).await?;
    let branch = git(worktree, &["symbolic-ref", "--short", "HEAD"])?;
    git(repo, &["merge", "-q", "--no-ff", "-m", "land o9", &branch])?;
    let landed = git(repo, &["rev-parse", "main"])?;
    let recorded = root.call("ownership_update", json!({"ownership_id": ownership_id, "op": "land"})).await?;
    if recorded["records"][0]["landed"]["commit"] != landed.as_str() {
        bail!("the landing was not recorded at {landed}: {recorded}");
    }
    git(repo, &["worktree", "remove", &wt])?;
    root.call("ownership_update", json!({"ownership_id": ownership_id, "op": "removed"})).await?;

    // Found by the landed commit, after the worktree is gone.
    let found = who(&landed)?;
    let record = found["records"].as_array().and_then(|r| r.last()).context("who found nothing")?;
    let holder = &record["holder"];
    if record["ownership_id"] != ownership_id.as_str()
        || holder["worker_id"] != worker.as_str()
        || holder["session"] != "o9-s2"
        || holder["earlier_sessions"] != json!(["o9-s1"])
        || uuids(record) != [conversation.clone()]
        || record["state"] != "removed"
    {
        bail!("who {landed} does not name the worker, its sessions and its conversation {conversation}: {record}");
    }
    // Every turn's calls were attributed to the worker's own page.
    let attributed = root.events_of(&worker, "caller.attributed").await?;
    if attributed < 3 {
        bail!("{attributed} of the worker's three turns were attributed");
    }
    Ok(OwnershipLifecycle { conversation, ownership_id, landed })
}
