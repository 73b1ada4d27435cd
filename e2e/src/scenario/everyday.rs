//! A person's everyday browser and daemon (issue 44): the extension's
//! background stopped by the browser, idle and in the middle of a command;
//! the daemon away for seconds and for longer than the reconnect backoff's
//! cap. Each follow-up goes in exactly once, counted in fakechat's oracle.

use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use mcp_client::Client;
use serde_json::{Value, json};

use super::{all_idle, completed, exactly, oracle_of, settled_worker};
use crate::lifecycle::Lifecycle;

pub(super) fn followup(worker: &str, summary: &str) -> Value {
    json!({"worker_id": worker, "instructions": format!("Go on.\nscenario: complete \"{summary}\"")})
}

/// How long after the background was stopped its worker's follow-up completed.
#[derive(Debug)]
pub struct BackgroundStopped {
    /// Stopped while nothing ran; the follow-up was asked for right after.
    pub idle: Duration,
    /// Stopped as the follow-up's command was seen at each moment: whether
    /// the command was still unfinished then (it completed after the stop:
    /// a race the test cannot steer, so it is reported, not required), and
    /// the time to completion.
    pub mid_command: Vec<(&'static str, bool, Duration)>,
}

/// The browser stops the extension's background (an MV3 service worker
/// idled out, updated or crashed): while idle, then as a follow-up's
/// command is dispatched and as it is acknowledged (the extension is then
/// submitting it). Whatever wakes the background next, its journal carries
/// the command: the follow-up goes in once, or the command fails closed;
/// the oracle counts the bootstrap and three follow-ups.
pub async fn background_stopped(
    mcp_url: &str,
    hub: &fakechat::hub::Hub,
    browser: &mut impl Lifecycle,
    budget: Duration,
) -> anyhow::Result<BackgroundStopped> {
    let (mut root, mut out, worker, conversation) =
        settled_worker(mcp_url, hub, "background stopped", "steady", budget).await?;
    let conv = std::slice::from_ref(&conversation);

    browser.stop_background().await?;
    let stopped = Instant::now();
    root.call("worker_followup", followup(&worker, "after an idle stop")).await?;
    root.wait(&mut out, budget, completed(&worker, "after an idle stop")).await?;
    let idle = stopped.elapsed();
    all_idle(hub, conv, budget).await?;

    let mut mid_command = Vec::new();
    for (moment, summary) in
        [("executor.command_dispatched", "stopped at dispatch"), ("executor.command_acked", "stopped at ack")]
    {
        root.catch_up(&mut out).await?;
        root.call("worker_followup", followup(&worker, summary)).await?;
        let of_worker = worker.clone();
        root.wait(&mut out, budget, move |e| e["type"] == moment && e["data"]["worker_id"] == of_worker.as_str())
            .await?;
        browser.stop_background().await?;
        let (stopped, stopped_ms) = (Instant::now(), fakechat::hub::now_ms());
        let of_worker = worker.clone();
        let finished =
            move |e: &Value| e["type"] == "executor.command_completed" && e["data"]["worker_id"] == of_worker.as_str();
        // The command's result and the worker's completion come in either order.
        let cursor = root.cursor;
        let finished = root.wait(&mut out, budget, finished).await?;
        let unfinished = finished["at_ms"].as_u64().is_some_and(|at| at >= stopped_ms);
        root.cursor = cursor;
        root.wait(&mut out, budget, completed(&worker, summary)).await?;
        mid_command.push((moment, unfinished, stopped.elapsed()));
        all_idle(hub, conv, budget).await?;
    }
    exactly(hub, &conversation, 4, &out)?;
    Ok(BackgroundStopped { idle, mid_command })
}

/// One time the daemon was away.
#[derive(Debug)]
pub struct Away {
    /// How long its port was closed.
    pub away: Duration,
    /// From its start again to the popup saying it is connected.
    pub back: Duration,
}

/// The words the extension's popup shows, polled until `wanted` holds of them.
async fn until_said(
    browser: &mut impl Lifecycle,
    what: &str,
    budget: Duration,
    wanted: impl Fn(&str) -> bool,
) -> anyhow::Result<String> {
    let deadline = Instant::now() + budget;
    loop {
        let said = browser.said().await?;
        if wanted(&said) {
            return Ok(said);
        }
        if Instant::now() > deadline {
            bail!("the popup never said {what}; last: {said:?}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The daemon away (killed: its port closed) for each of `outages`, then
/// started again on the same address and state. While it is away the
/// popup says it is not reachable and that the extension tries again by
/// itself; once back the extension reconnects with no one's help, and a
/// follow-up goes in exactly once.
pub async fn daemon_away(
    daemon: &mut crate::daemon::Daemon,
    hub: &fakechat::hub::Hub,
    browser: &mut impl Lifecycle,
    outages: &[Duration],
    budget: Duration,
) -> anyhow::Result<Vec<Away>> {
    const SUMMARIES: [&str; 3] = ["after the first outage", "after the second outage", "after the third outage"];
    anyhow::ensure!(outages.len() <= SUMMARIES.len(), "at most {} outages", SUMMARIES.len());
    let url = daemon.mcp_url();
    let (mut root, mut out, worker, conversation) = settled_worker(&url, hub, "daemon away", "patient", budget).await?;
    let mut seen = Vec::new();
    for (&away, summary) in outages.iter().zip(SUMMARIES) {
        daemon.kill();
        let gone = Instant::now();
        until_said(browser, "the daemon is not reachable", budget, |s| {
            s.contains("not reachable") && s.contains("trying again by itself")
        })
        .await?;
        tokio::time::sleep(away.saturating_sub(gone.elapsed())).await;
        daemon.start_again()?;
        let started = Instant::now();
        until_said(browser, "it is connected", budget, |s| s.starts_with("Live")).await?;
        let back = started.elapsed();
        // The backoff's cap (10 s, docs/setup.md), an attempt, and the popup's look.
        if back > Duration::from_secs(13) {
            bail!("the extension came back {back:?} after the daemon, past the backoff's cap");
        }
        seen.push(Away { away: gone.elapsed() - back, back });
        root.client = Client::connect(&url).await?;
        root.call("worker_followup", followup(&worker, summary)).await?;
        root.wait(&mut out, budget, completed(&worker, summary)).await?;
        all_idle(hub, std::slice::from_ref(&conversation), budget).await?;
    }
    exactly(hub, &conversation, 1 + outages.len(), &out)?;
    Ok(seen)
}

/// One browser restart.
#[derive(Debug)]
pub struct Restarted {
    /// Whether the last session's tabs were restored.
    pub restore_tabs: bool,
    /// Tabs showing the worker's conversation once the browser was back,
    /// before any command (restored ones, none of them managed).
    pub restored: usize,
    /// From the follow-up asked for (with its tabs restored: once the
    /// browser was back; without: while it was closed, counted from its
    /// start again) to its completion.
    pub back: Duration,
}

/// The browser started again on its profile while a person's own chat
/// (made elsewhere) and a tab of theirs showing the worker's conversation
/// are open: first quit and started with its tabs restored; then cut off
/// (no tab is reported closed), a follow-up asked while it is gone (so it
/// reaches the extension before the extension says the tab is gone), and
/// started without them. No tab id from before is trusted: each follow-up
/// goes in once through a tab opened afresh at its conversation (the
/// browser's own tab list has exactly one more tab showing it), no tab
/// holds a keystroke of ours, and the person's chat keeps its one turn.
pub async fn browser_restarted(
    mcp_url: &str,
    hub: &fakechat::hub::Hub,
    browser: &mut impl crate::restart::Restarts,
    budget: Duration,
) -> anyhow::Result<Vec<Restarted>> {
    let person =
        hub.submit(None, None, "a person's own chat", None, None, None).map_err(|e| anyhow::anyhow!("{e:?}"))?;
    hub.say(&person, "Their answer.");
    hub.end_turn(&person, None);
    browser.open(&format!("https://chatgpt.com/c/{person}")).await?;
    let (mut root, mut out, worker, conversation) =
        settled_worker(mcp_url, hub, "browser restarted", "restored", budget).await?;
    browser.open(&format!("https://chatgpt.com/c/{conversation}")).await?;

    let mut seen = Vec::new();
    for (restore_tabs, summary) in [(true, "after a restart with its tabs"), (false, "after a restart without them")] {
        let early = !restore_tabs;
        browser.end(restore_tabs).await?;
        if early {
            root.call("worker_followup", followup(&worker, summary)).await?;
        }
        let asked = Instant::now();
        browser.start(restore_tabs).await?;
        if !browser.connected(budget).await? {
            bail!("the extension did not reconnect after the browser restarted");
        }
        // Restored tabs, looked at before anything is asked of the worker (a
        // follow-up asked early may be typing into its new tab already).
        let restored = match early {
            true => 0,
            false => {
                let paths = browser.composers_empty().await.context("the tabs once restarted")?;
                if !paths.iter().any(|p| p.contains(&person)) {
                    bail!("the person's tab was not restored: {paths:?}");
                }
                paths.iter().filter(|p| p.contains(&conversation)).count()
            }
        };
        let asked = if early { asked } else { Instant::now() };
        if !early {
            root.call("worker_followup", followup(&worker, summary)).await?;
        }
        root.wait(&mut out, budget, completed(&worker, summary)).await?;
        seen.push(Restarted { restore_tabs, restored, back: asked.elapsed() });
        all_idle(hub, std::slice::from_ref(&conversation), budget).await?;
        // The follow-up went in through a tab the extension opened after the
        // restart, never through a restored one its old id may name.
        let after = browser.composers_empty().await?.iter().filter(|p| p.contains(&conversation)).count();
        if after != restored + 1 {
            bail!("{restored} restored tabs showed the conversation, {after} after the follow-up, not one more");
        }
    }
    exactly(hub, &conversation, 3, &out)?;
    exactly(hub, &person, 1, &out)?;
    Ok(seen)
}

/// A person closes a worker's tab. Its conversation lives on: the next
/// follow-up opens it again at its exact URL in a new tab and goes in once
/// (before, the daemon sent it into no tab and the worker was stranded).
/// How long the follow-up took.
pub async fn tab_closed(
    mcp_url: &str,
    hub: &fakechat::hub::Hub,
    person: &mut impl crate::person::Person,
    budget: Duration,
) -> anyhow::Result<Duration> {
    let (mut root, mut out, worker, conversation) =
        settled_worker(mcp_url, hub, "tab closed", "closed", budget).await?;
    person.close(&conversation).await?;
    let closed = |e: &Value| e["type"] == "conversation.closed" && e["data"]["worker_id"] == worker.as_str();
    root.wait(&mut out, budget, closed).await?;
    let asked = Instant::now();
    root.call("worker_followup", followup(&worker, "after its tab was closed")).await?;
    root.wait(&mut out, budget, completed(&worker, "after its tab was closed")).await?;
    let back = asked.elapsed();
    all_idle(hub, std::slice::from_ref(&conversation), budget).await?;
    exactly(hub, &conversation, 2, &out)?;
    Ok(back)
}

/// A person navigates a worker's tab to `theirs`, a conversation of their
/// own. The drift is reported and the worker fenced: a follow-up is sent
/// nowhere (neither conversation gets a turn for [`HELD`]) and the worker
/// says what happened and what to do.
pub async fn tab_navigated(
    mcp_url: &str,
    hub: &fakechat::hub::Hub,
    person: &mut impl crate::person::Person,
    theirs: &str,
    budget: Duration,
) -> anyhow::Result<Value> {
    const HELD: Duration = Duration::from_secs(3);
    let (mut root, mut out, worker, conversation) =
        settled_worker(mcp_url, hub, "tab navigated", "moved", budget).await?;
    let before = oracle_of(hub, theirs)["user_turns"].as_array().map_or(0, Vec::len);
    person.run(&conversation, &format!("location.assign('/c/{theirs}'); true")).await?;
    let drift = |e: &Value| {
        e["type"] == "conversation.error"
            && e["data"]["worker_id"] == worker.as_str()
            && e["data"]["code"] == "CONVERSATION_IDENTITY_DRIFT"
    };
    root.wait(&mut out, budget, drift).await?;
    root.call("worker_followup", followup(&worker, "never")).await?;
    let said = |w: &Value| {
        w["waiting_for"]["on"] == "person"
            && w["waiting_for"]["next_step"].as_str().is_some_and(|s| s.contains("CONVERSATION_IDENTITY_DRIFT"))
    };
    let listed = root.until_listed(&worker, budget, "the drift", said).await?;
    tokio::time::sleep(HELD).await;
    exactly(hub, &conversation, 1, &out)?;
    exactly(hub, theirs, before, &out)?;
    Ok(listed["waiting_for"].clone())
}

/// A person moves a worker's tab between windows and hides it: dragged
/// out into a window of its own, that window minimized, shown again under
/// a window of theirs that has the focus, dragged back beside other tabs.
/// After each move a follow-up goes in once through the same tab (the
/// browser keeps a moved tab's id), and nothing else is opened. What the
/// browser said after each move, and how long its follow-up took.
pub async fn tab_placed(
    mcp_url: &str,
    hub: &fakechat::hub::Hub,
    person: &mut impl crate::person::Person,
    budget: Duration,
) -> anyhow::Result<Vec<(crate::person::Place, crate::person::Placed, Duration)>> {
    use crate::person::Place;
    const MOVES: [(Place, &str); 4] = [
        (Place::NewWindow, "in a window of its own"),
        (Place::Minimized, "in a minimized window"),
        (Place::Covered, "under another window"),
        (Place::Back, "dragged back"),
    ];
    let (mut root, mut out, worker, conversation) = settled_worker(mcp_url, hub, "tab placed", "mover", budget).await?;
    let mut seen = Vec::new();
    for (to, summary) in MOVES {
        let placed = person.place(&conversation, to).await.with_context(|| format!("{to:?}"))?;
        if !placed.same_tab {
            bail!("the tab moved {to:?} changed its id: {placed:?}");
        }
        // Minimized, the page is hidden (a covered one stays visible in a
        // headless browser, which computes no occlusion).
        if to == Place::Minimized && (placed.window != "minimized" || placed.visibility != "hidden") {
            bail!("a minimized tab: {placed:?}");
        }
        let asked = Instant::now();
        root.call("worker_followup", followup(&worker, summary)).await?;
        root.wait(&mut out, budget, completed(&worker, summary)).await?;
        seen.push((to, placed, asked.elapsed()));
        all_idle(hub, std::slice::from_ref(&conversation), budget).await?;
    }
    exactly(hub, &conversation, 1 + MOVES.len(), &out)?;
    // One page sent them all (fakechat names a tab in its session storage,
    // which moves with the tab).
    let turns = oracle_of(hub, &conversation)["user_turns"].clone();
    let senders: std::collections::BTreeSet<String> =
        turns.as_array().into_iter().flatten().map(|t| t["tab"].to_string()).collect();
    if senders.len() != 1 || senders.contains("null") {
        bail!("the turns came from {} tabs, not one: {turns}", senders.len());
    }
    Ok(seen)
}
