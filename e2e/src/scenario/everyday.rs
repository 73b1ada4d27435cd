//! A person's everyday browser and daemon (issue 44): the extension's
//! background stopped by the browser, idle and in the middle of a command;
//! the daemon away for seconds and for longer than the reconnect backoff's
//! cap. Each follow-up goes in exactly once, counted in fakechat's oracle.

use std::time::{Duration, Instant};

use anyhow::bail;
use mcp_client::Client;
use serde_json::{Value, json};

use super::{Outcome, all_idle, completed, oracle_of, settled_worker};
use crate::lifecycle::Lifecycle;

fn followup(worker: &str, summary: &str) -> Value {
    json!({"worker_id": worker, "instructions": format!("Go on.\nscenario: complete \"{summary}\"")})
}

/// The user turns `conversation` holds, checked against `want`.
fn exactly(hub: &fakechat::hub::Hub, conversation: &str, want: usize, out: &Outcome) -> anyhow::Result<()> {
    let turns = oracle_of(hub, conversation)["user_turns"].as_array().map_or(0, Vec::len);
    if turns != want {
        bail!("{turns} user turns, not {want}: {:#}\n{}", hub.oracle(), out.trace.join("\n"));
    }
    Ok(())
}

/// How long after the background was stopped its worker's follow-up completed.
#[derive(Debug)]
pub struct BackgroundStopped {
    /// Stopped while nothing ran; the follow-up was asked for right after.
    pub idle: Duration,
    /// Stopped as the follow-up's command was seen at each moment.
    pub mid_command: Vec<(&'static str, Duration)>,
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
        let stopped = Instant::now();
        root.wait(&mut out, budget, completed(&worker, summary)).await?;
        mid_command.push((moment, stopped.elapsed()));
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
        daemon.start_again(&[])?;
        let started = Instant::now();
        until_said(browser, "it is connected", budget, |s| s.starts_with("Live")).await?;
        seen.push(Away { away: gone.elapsed() - started.elapsed(), back: started.elapsed() });
        root.client = Client::connect(&url).await?;
        root.call("worker_followup", followup(&worker, summary)).await?;
        root.wait(&mut out, budget, completed(&worker, summary)).await?;
        all_idle(hub, std::slice::from_ref(&conversation), budget).await?;
    }
    exactly(hub, &conversation, 1 + outages.len(), &out)?;
    Ok(seen)
}
