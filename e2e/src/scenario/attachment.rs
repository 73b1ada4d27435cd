//! A person's draft, typed (issue 44) or an attachment (issue 42), in a
//! real browser through the extension: words a person typed or a file they
//! chose in a managed tab's composer hold the worker's wake (nothing typed
//! beside them, nothing sent with them) until they remove or send them;
//! then the wake goes in once.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::bail;
use serde_json::{Value, json};

use super::{Outcome, Root, all_idle, oracle_of};
use crate::person::Person;

/// How long a held wake is watched for anything typed or sent: several of
/// the daemon's rechecks when its `--executor-recheck-after-ms` is a second.
const HELD: Duration = Duration::from_secs(4);

/// What the composer shows, read in the page as a person would see it: the
/// editor's text and how many attachment cards it holds.
const COMPOSER: &str = "(() => { const f = document.querySelector('#composer-region form'); \
     const e = f && f.querySelector('[contenteditable=\"true\"]'); \
     const t = document.getElementById('composer-attachments'); \
     return JSON.stringify({ text: e ? e.innerText.trim() : null, \
       files: t ? t.querySelectorAll('button[aria-label=\"Remove file\"], button[aria-label^=\"Remove \"]').length : -1 }); })()";
/// The person's click on the last card's remove button.
const REMOVE: &str = "(() => { const b = [...document.querySelectorAll('#composer-attachments button')].pop(); \
     if (!b) return false; b.click(); return true; })()";
/// The person types their own words into the composer.
const TYPE: &str = "(() => { const e = document.querySelector('#composer-region form [contenteditable=\"true\"]'); \
     if (!e) return false; e.focus(); return document.execCommand('insertText', false, 'my own words'); })()";
/// The person's click on the composer's send button.
const SEND: &str = "(() => { const b = document.querySelector('#composer-actions button'); \
     if (!b) return false; b.click(); return true; })()";

/// Theta completes its assignment. A person types their own words in its
/// tab and a follow-up falls due: theta shows `waiting_for: person` naming
/// the draft, and for [`HELD`] nothing is typed or sent; the person sends
/// their words (their own turn) and the follow-up goes in exactly once
/// after it. Then the person attaches `file` and a follow-up falls due: the
/// same hold; they remove the file and the follow-up goes in once. Then
/// they attach it again and send it (their own turn, no text), and the
/// third follow-up goes in once. No wake ever carries a file or their words.
pub async fn attachment_wait(
    mcp_url: &str,
    hub: &fakechat::hub::Hub,
    person: &mut dyn Person,
    file: &Path,
    budget: Duration,
) -> anyhow::Result<Outcome> {
    let mut root = Root::start(mcp_url, "attachment wait").await?;
    let mut out = Outcome::default();
    let theta = root.spawn(&mut out, "theta", r#"complete "first""#).await?;
    while !out.completed.contains(&theta) {
        root.wait(&mut out, budget, |e| e["type"] == "worker.completed").await?;
    }
    let conversation = Root::conversation_of(&out, &theta)?;
    all_idle(hub, std::slice::from_ref(&conversation), budget).await?;
    let turns = |hub: &fakechat::hub::Hub| oracle_of(hub, &conversation)["user_turns"].as_array().cloned();
    let name = file.file_name().and_then(|n| n.to_str()).unwrap_or_default().to_owned();

    for (round, typed, way) in [(1, true, SEND), (2, false, REMOVE), (3, false, SEND)] {
        let before = turns(hub).map_or(0, |t| t.len());
        let draft = match typed {
            true => {
                if person.run(&conversation, TYPE).await? != Value::Bool(true) {
                    bail!("round {round}: the person could not type");
                }
                json!({"files": 0, "text": "my own words"})
            }
            false => {
                person.attach(&conversation, file).await?;
                json!({"files": 1, "text": ""})
            }
        };
        let shown = composer(person, &conversation).await?;
        if shown != draft {
            bail!("round {round}: the composer does not show the person's draft alone: {shown}");
        }
        // The page tells the daemon (the extension's report), then a wake falls due.
        let reported = |e: &Value| {
            e["type"] == "conversation.state_changed"
                && e["data"]["worker_id"] == theta.as_str()
                && e["data"]["error"] == "COMPOSER_HAS_DRAFT"
        };
        root.wait(&mut out, budget, reported).await?;
        let instructions = format!("Go on, round {round}.\nscenario: complete \"round {round}\"");
        root.call("worker_followup", json!({"worker_id": theta, "instructions": instructions})).await?;
        let waiting = root
            .until_listed(&theta, budget, "theta waiting for a person", |w| w["waiting_for"]["on"] == "person")
            .await?;
        let reason = waiting["waiting_for"]["next_step"].as_str().unwrap_or_default();
        if !reason.contains("COMPOSER_HAS_DRAFT") {
            bail!("round {round}: theta's wait does not name the draft: {waiting}");
        }
        let held_until = Instant::now() + HELD.min(budget);
        while Instant::now() < held_until {
            let shown = composer(person, &conversation).await?;
            if turns(hub).map_or(0, |t| t.len()) != before || shown != draft {
                bail!("round {round}: something was typed or sent beside the person's draft: {shown}");
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        if person.run(&conversation, way).await? != Value::Bool(true) {
            bail!("round {round}: the person's click found no button");
        }
        // Sent: the person's own turn comes first.
        let wanted = before + if way == SEND { 2 } else { 1 };
        let deadline = Instant::now() + budget;
        while turns(hub).map_or(0, |t| t.len()) < wanted || oracle_of(hub, &conversation)["state"] != "idle" {
            if Instant::now() > deadline {
                bail!(
                    "round {round}: the wake never went in: {:#}\n{}",
                    oracle_of(hub, &conversation),
                    out.trace.join("\n")
                );
            }
            root.catch_up(&mut out).await?;
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        root.until_listed(&theta, budget, "theta no longer waiting", |w| w.get("waiting_for").is_none()).await?;
    }
    // Settle, then read the record: nothing more may arrive.
    tokio::time::sleep(Duration::from_secs(2)).await;
    root.catch_up(&mut out).await?;
    let seen = oracle_of(hub, &conversation);
    let all = turns(hub).unwrap_or_default();
    let files = |t: &Value| t["attachments"].as_array().map_or(0, Vec::len);
    let words = "my own words".len() as u64;
    let shape: Vec<(bool, usize, u64)> =
        all.iter().map(|t| (t["bootstrap"] == true, files(t), t["len"].as_u64().unwrap_or(0))).collect();
    // bootstrap; the person's words; wake 1; wake 2; the person's file alone; wake 3.
    let wake = |n: usize| shape.get(n).is_some_and(|&(b, f, len)| !b && f == 0 && len > 0 && len != words);
    let shaped = shape.len() == 6
        && shape[0].0
        && shape[1] == (false, 0, words)
        && shape[4] == (false, 1, 0)
        && [2, 3, 5].into_iter().all(wake);
    if !shaped {
        bail!(
            "expected the bootstrap, the person's words, wakes 1 and 2, their file, wake 3, each once: {shape:?}\n{seen:#}"
        );
    }
    if all[4]["attachments"] != json!([name]) {
        bail!("the person's turn does not carry their file: {}", all[4]);
    }
    if seen["retry_clicks"] != 0 || seen["stop_clicks"] != 0 || seen["errors"] != json!([]) {
        bail!("Retry or Stop was clicked, or the agent saw an error: {seen:#}");
    }
    Ok(out)
}

/// The composer as the page shows it.
async fn composer(person: &mut dyn Person, conversation: &str) -> anyhow::Result<Value> {
    let text = person.run(conversation, COMPOSER).await?;
    Ok(serde_json::from_str(text.as_str().unwrap_or("null"))?)
}
