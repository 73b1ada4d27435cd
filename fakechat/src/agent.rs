//! The scripted agent: plays the model behind every submitted turn.
//!
//! A turn carrying an orchestrator bootstrap makes it attach over MCP (as a
//! real ChatGPT conversation would, through the orchestrator's app), read its
//! assignment, and follow the scenario found there (a line `scenario: ...`);
//! a wake prompt makes it re-attach and follow the latest follow-up's
//! scenario, or resume where `end_turn` left off; so does a resume or
//! checkpoint prompt (Execution Continuity). Any other turn gets a short
//! streamed echo. Everything it does is streamed into the visible reply,
//! and a worker's turn ends with the continuation-state block of
//! `skills/durable-continuation-output` (`status: working | complete |
//! blocked`, then `summary:`, `current:`, `next:`), as a model following that
//! skill writes it.
//!
//! Scenario language, steps separated by `;` or new lines:
//! `progress "x"`, `ask_root "q"`, `await_answer`, `await_human "q"`,
//! `complete "done"`, `fail "why"`, `say "text"`, `end_turn`, `sleep 2s` (or `500ms`),
//! `incident delivery_timeout|something_went_wrong|rate_limit|deferral|too_long`,
//! `call <tool> {json}` (any tool, the worker's capability added).
//! After `incident too_long` the conversation takes no more turns; a
//! rollover's fresh conversation reads its capsule at attach and goes on
//! after the incident its epoch's predecessors ended on (as a model reading
//! "what is done" would), and a rollover prompt gets a `worker_checkpoint`.
//! An unknown step is an error shown in the page, never skipped.

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;

use crate::hub::{Hub, ToolAccess};
use crate::render::TurnError;
use mcp_client::Client;

/// One scenario step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// `worker_progress`.
    Progress(String),
    /// `message_send` a question to root.
    AskRoot(String),
    /// Wait (bounded) for root's answer to the last question.
    AwaitAnswer,
    /// `worker_await_human` (`question|choice|…`: choices offered with it), then end the turn.
    AwaitHuman(String),
    /// `worker_complete`.
    Complete(String),
    /// `worker_fail`.
    Fail(String),
    /// Stream some text.
    Say(String),
    /// Stop this turn without completing; later steps wait for a wake.
    EndTurn,
    /// Pause while streaming.
    Sleep(Duration),
    /// Keep streaming text for this long with no tool call: the page moves
    /// on while the worker reports nothing.
    Stream(Duration),
    /// A turn that never finishes: the page stays generating and nothing
    /// streams (bounded at a day, so no test waits for ever).
    Hang,
    /// Show an incident.
    Incident(Incident),
    /// Call any tool with these arguments (a JSON object on one line,
    /// without `;`), the worker's capability added: what a model does with
    /// a tool the scenario language has no word for.
    Call(String, String),
}

/// Incidents a scenario can trigger.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Incident {
    /// The turn ends with "Message delivery timed out".
    DeliveryTimeout,
    /// The turn ends with "Something went wrong".
    SomethingWentWrong,
    /// The rate-limit dialog appears; the turn ends.
    RateLimit,
    /// The deferral notice shows while the turn goes on.
    Deferral,
    /// The conversation reaches its maximum length: the turn ends with the
    /// length notice, and so does every later one in it.
    TooLong,
}

/// Parses a scenario.
pub fn parse(script: &str) -> Result<Vec<Step>, String> {
    let mut steps = Vec::new();
    for raw in script.split([';', '\n']) {
        let raw = raw.trim();
        if raw.is_empty() {
            continue;
        }
        let (word, arg) = match raw.split_once(char::is_whitespace) {
            Some((w, a)) => (w, a.trim()),
            None => (raw, ""),
        };
        let quoted = || -> Result<String, String> {
            arg.strip_prefix('"')
                .and_then(|a| a.strip_suffix('"'))
                .map(str::to_owned)
                .ok_or_else(|| format!("`{word}` needs a quoted argument, got `{arg}`"))
        };
        let step = match word {
            "progress" => Step::Progress(quoted()?),
            "ask_root" => Step::AskRoot(quoted()?),
            "await_human" => Step::AwaitHuman(quoted()?),
            "complete" => Step::Complete(quoted()?),
            "fail" => Step::Fail(quoted()?),
            "say" => Step::Say(quoted()?),
            "await_answer" if arg.is_empty() => Step::AwaitAnswer,
            "end_turn" if arg.is_empty() => Step::EndTurn,
            "sleep" => Step::Sleep(parse_duration(arg).ok_or_else(|| format!("bad duration `{arg}`"))?),
            "stream" => Step::Stream(parse_duration(arg).ok_or_else(|| format!("bad duration `{arg}`"))?),
            "hang" if arg.is_empty() => Step::Hang,
            "incident" => Step::Incident(match arg {
                "delivery_timeout" => Incident::DeliveryTimeout,
                "something_went_wrong" => Incident::SomethingWentWrong,
                "rate_limit" => Incident::RateLimit,
                "deferral" => Incident::Deferral,
                "too_long" => Incident::TooLong,
                other => return Err(format!("unknown incident `{other}`")),
            }),
            "call" => {
                let (tool, args) = arg.split_once(char::is_whitespace).unwrap_or((arg, "{}"));
                let parsed: serde_json::Value =
                    serde_json::from_str(args).map_err(|e| format!("`call {tool}` needs a JSON object: {e}"))?;
                if tool.is_empty() || !parsed.is_object() {
                    return Err(format!("`call` needs a tool and a JSON object, got `{arg}`"));
                }
                Step::Call(tool.to_owned(), args.to_owned())
            }
            other => return Err(format!("unknown scenario step `{other}`")),
        };
        steps.push(step);
    }
    Ok(steps)
}

fn parse_duration(text: &str) -> Option<Duration> {
    if let Some(ms) = text.strip_suffix("ms") {
        return ms.parse().ok().map(Duration::from_millis);
    }
    text.strip_suffix('s')?.parse::<f64>().ok().filter(|s| *s >= 0.0 && *s <= 600.0).map(Duration::from_secs_f64)
}

/// The scenario in a text: everything after `scenario:` on its line.
pub fn scenario_in(text: &str) -> Option<&str> {
    text.lines().find_map(|l| l.trim().strip_prefix("scenario:")).map(str::trim)
}

/// What the agent remembers in a conversation between turns.
#[derive(Debug, Clone)]
pub struct Memory {
    /// The worker's capability.
    pub capability: String,
    /// Steps not yet run (after an `end_turn`).
    pub remaining: Vec<Step>,
    /// The last question's message id.
    pub question: Option<String>,
    /// Events cursor for answers.
    pub cursor: u64,
    /// Follow-ups already acted on.
    pub followups_seen: usize,
}

fn attach_identity(text: &str) -> Option<String> {
    text.split('"').find(|p| p.starts_with("att_") && p.len() > 40).map(str::to_owned)
}

/// Plays the model for one submitted turn.
pub async fn respond(hub: Arc<Hub>, conversation: String, text: String) {
    let mut hold = hub.hold_replies.subscribe();
    if *hold.borrow_and_update() {
        let _ = tokio::time::timeout(Duration::from_secs(60), hold.wait_for(|held| !held)).await;
    }
    let worker_turn = [
        "[orchestrator bootstrap v",
        "[orchestrator wake v",
        "[orchestrator resume v",
        "[orchestrator checkpoint v",
        "[orchestrator rollover bootstrap v",
        "[orchestrator rollover v",
    ]
    .iter()
    .any(|marker| text.contains(marker));
    let outcome = if hub.read(&conversation, |c| c.full).unwrap_or(false) {
        Ok(Some(TurnError::TooLong))
    } else if worker_turn {
        work(&hub, &conversation, &text).await
    } else {
        stream(&hub, &conversation, &format!("You said: {text}")).await;
        Ok(None)
    };
    match outcome {
        Ok(error) => hub.end_turn(&conversation, error),
        Err(e) => {
            let message = format!("\n[fakechat agent error] {e}");
            hub.update(&conversation, |c| c.errors.push(e.to_string()));
            hub.say(&conversation, &message);
            hub.end_turn(&conversation, None);
        }
    }
}

/// Streams `text` over a short while, a few characters at a time.
async fn stream(hub: &Hub, conversation: &str, text: &str) {
    let chars: Vec<char> = text.chars().collect();
    for chunk in chars.chunks(12) {
        hub.say(conversation, &chunk.iter().collect::<String>());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The conversation's connection to the orchestrator's app, as ChatGPT's
/// connector makes it: every call carries an `x-request-id`
/// (`wfr_<id>/<suffix>`) whose id is the turn's (one for all the turn's
/// calls), and the same id lands in the conversation's page data as
/// `metadata.request_id` (CHATGPT-DOM.md, "Tool calls in the conversation").
pub struct Connector {
    /// The MCP client (stateless, or a kept session).
    pub mcp: Client,
    hub: Arc<Hub>,
    conversation: String,
    app: String,
}

impl Connector {
    /// Calls `tool` as the conversation's model: the page shows the call.
    async fn call(
        &mut self,
        tool: &str,
        args: serde_json::Value,
    ) -> Result<Result<serde_json::Value, mcp_client::ToolError>, mcp_client::Error> {
        let id = self.hub.tool_call(&self.conversation, None, tool, &self.app);
        let suffix = &uuid::Uuid::new_v4().simple().to_string()[..4];
        let header = format!("{id}/{suffix}");
        let headers: &[(&str, &str)] = match *self.hub.request_ids.borrow() {
            crate::hub::RequestIds::Stripped => &[],
            _ => &[("x-request-id", &header)],
        };
        self.mcp.call_with(tool, args, headers).await
    }
}

async fn call(mcp: &mut Connector, tool: &str, args: serde_json::Value) -> anyhow::Result<serde_json::Value> {
    mcp.call(tool, args).await?.map_err(|e| anyhow::anyhow!("{tool} refused: {e}"))
}

/// Connects and attaches, retrying while the orchestrator is unreachable
/// (restarting) for up to 10 s, as a host retries a failed app call. A tool
/// refusal is not retried.
async fn attach_with_retry(
    hub: &Arc<Hub>,
    conversation: &str,
    url: &str,
    attach: &str,
    (app, label, catalog): (&str, &str, Option<String>),
) -> anyhow::Result<(Connector, serde_json::Value)> {
    let mut attempts = 0;
    loop {
        let kept = hub.sessions.lock().unwrap().as_mut().and_then(|s| s.remove(conversation));
        let attempt = async {
            // ChatGPT's connector is reported to keep no MCP session between
            // batches: stateless calls, unless the test keeps sessions.
            let client = match kept {
                Some(mcp) => mcp,
                None if hub.sessions.lock().unwrap().is_some() => Client::connect(url).await?,
                None => Client::stateless(url)?,
            };
            let mut mcp = Connector {
                mcp: client,
                hub: hub.clone(),
                conversation: conversation.to_owned(),
                app: label.to_owned(),
            };
            // ChatGPT fetches an app's tool list once and keeps it until the
            // app is refreshed; the model calls with what that list says.
            let catalog = match catalog.clone() {
                Some(stamp) => Some(stamp),
                None => {
                    let stamp = protocol::catalog::stamp_in_tools(&mcp.mcp.list_tools().await?);
                    if let Some(stamp) = &stamp {
                        hub.cache_catalog(app, stamp);
                    }
                    stamp
                }
            };
            let mut args = json!({ "attach_identity": attach });
            if let Some(stamp) = catalog {
                args["catalog"] = json!(stamp);
            }
            let reply = mcp.call("worker_attach", args).await?;
            anyhow::Ok((mcp, reply))
        };
        match attempt.await {
            Ok((mcp, Ok(attached))) => return Ok((mcp, attached)),
            Ok((_, Err(refused))) => anyhow::bail!("worker_attach refused: {refused}"),
            Err(e) if attempts >= 40 => return Err(e),
            Err(_) => {
                attempts += 1;
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
        }
    }
}

/// Attaches, picks the steps for this turn, runs them. `Ok(Some(_))` ends the
/// turn with an error shown inside it.
async fn work(hub: &Arc<Hub>, conversation: &str, text: &str) -> anyhow::Result<Option<TurnError>> {
    let url =
        hub.mcp_url.clone().ok_or_else(|| anyhow::anyhow!("fakechat has no --mcp-url: the app is not connected"))?;
    let attach = attach_identity(text).ok_or_else(|| anyhow::anyhow!("no attach identity in the prompt"))?;
    // A conversation reaches an app's tools only once the app is selected
    // in it (or inherited from its Project).
    let access = match hub.tool_access(conversation) {
        ToolAccess::Orchestrator { app, label, catalog } => (app, label, catalog),
        ToolAccess::None => anyhow::bail!("no app is selected in this chat: worker_attach is not available"),
        ToolAccess::OtherApp(label) => anyhow::bail!("the app selected in this chat ({label}) has no worker_attach"),
    };
    stream(hub, conversation, "Attaching to the orchestrator… ").await;
    let (mut mcp, attached) =
        attach_with_retry(hub, conversation, &url, &attach, (&access.0, &access.1, access.2)).await?;
    let capability = attached["capability"].as_str().unwrap_or_default().to_owned();
    let followups: Vec<String> = attached["followups"]
        .as_array()
        .map(|a| a.iter().filter_map(|f| f.as_str().map(str::to_owned)).collect())
        .unwrap_or_default();
    let mut memory = hub.read(conversation, |c| c.agent.clone()).flatten().unwrap_or(Memory {
        capability: capability.clone(),
        remaining: Vec::new(),
        question: None,
        cursor: 0,
        followups_seen: 0,
    });
    memory.capability = capability;
    // Asked to checkpoint before a rollover: what is left, then end the turn.
    if text.contains("[orchestrator rollover v") {
        let note = format!("next: {:?}", memory.remaining.first());
        call(&mut mcp, "worker_checkpoint", json!({"capability": memory.capability, "note": note})).await?;
        stream(hub, conversation, "• checkpoint written\n").await;
        hub.update(conversation, |c| c.agent = Some(memory));
        return Ok(None);
    }
    let steps = if followups.len() > memory.followups_seen {
        let latest = followups.last().cloned().unwrap_or_default();
        memory.followups_seen = followups.len();
        match scenario_in(&latest) {
            Some(script) => parse(script).map_err(anyhow::Error::msg)?,
            None if !memory.remaining.is_empty() => std::mem::take(&mut memory.remaining),
            None => vec![Step::Complete(format!("follow-up done: {latest}"))],
        }
    } else if !memory.remaining.is_empty() {
        std::mem::take(&mut memory.remaining)
    } else {
        let assignment = &attached["assignment"];
        let objective = assignment["objective"].as_str().unwrap_or_default();
        let constraints: Vec<&str> = assignment["constraints"]
            .as_array()
            .map(|a| a.iter().filter_map(|c| c.as_str()).collect())
            .unwrap_or_default();
        let script = scenario_in(objective).or_else(|| constraints.iter().find_map(|c| scenario_in(c)));
        match script {
            Some(script) => after_capsule(parse(script).map_err(anyhow::Error::msg)?, &attached["continuation"]),
            // A parked pool worker's assignment says to wait for tasks: a
            // model reads that and ends its turn with nothing to report.
            None if objective.contains("Wait for targeted tasks") => vec![],
            None => vec![Step::Complete(format!("done: {objective}"))],
        }
    };
    stream(hub, conversation, &format!("attached; {} step(s).\n", steps.len())).await;
    let result = run(hub, conversation, &mut mcp, &mut memory, steps).await;
    hub.update(conversation, |c| c.agent = Some(memory));
    if let Some(kept) = hub.sessions.lock().unwrap().as_mut() {
        kept.insert(conversation.to_owned(), mcp.mcp);
    }
    result
}

/// What is left of a scenario for a fresh conversation after a rollover:
/// the steps after the incident that ended its predecessor (the `epoch`-th
/// `too_long`), or after the progress its capsule last reports.
fn after_capsule(steps: Vec<Step>, capsule: &serde_json::Value) -> Vec<Step> {
    let Some(epoch) = capsule["epoch"].as_u64().filter(|e| *e > 0) else { return steps };
    let ends = steps.iter().enumerate().filter(|(_, s)| **s == Step::Incident(Incident::TooLong)).map(|(i, _)| i);
    let last_progress = capsule["last_progress"].as_str();
    let done = ends
        .clone()
        .nth(epoch as usize - 1)
        .or_else(|| steps.iter().rposition(|s| matches!(s, Step::Progress(p) if Some(p.as_str()) == last_progress)));
    steps.into_iter().skip(done.map_or(0, |i| i + 1)).collect()
}

async fn run(
    hub: &Hub,
    conversation: &str,
    mcp: &mut Connector,
    memory: &mut Memory,
    steps: Vec<Step>,
) -> anyhow::Result<Option<TurnError>> {
    let cap = memory.capability.clone();
    let mut steps = steps.into_iter();
    while let Some(step) = steps.next() {
        match step {
            Step::Progress(summary) => {
                let sent = call(mcp, "worker_progress", json!({"capability": cap, "summary": summary.clone()})).await;
                if let Err(e) = sent {
                    memory.remaining = std::iter::once(Step::Progress(summary)).chain(steps).collect();
                    return Err(e);
                }
                stream(hub, conversation, &format!("• progress: {summary}\n")).await;
            }
            Step::AskRoot(question) => {
                let sent = call(
                    mcp,
                    "message_send",
                    json!({"capability": cap, "to": "/root", "kind": "question", "body": question}),
                )
                .await?;
                memory.question = sent["message_id"].as_str().map(str::to_owned);
                stream(hub, conversation, &format!("• asked root: {question}\n")).await;
            }
            Step::AwaitAnswer => {
                let answer = await_answer(mcp, memory).await?;
                stream(hub, conversation, &format!("• root answered: {answer}\n")).await;
            }
            Step::AwaitHuman(asked) => {
                // `question|choice|choice…`: the choices are offered with it.
                let mut parts = asked.split('|');
                let reason = parts.next().unwrap_or_default().to_owned();
                let choices: Vec<&str> = parts.collect();
                call(mcp, "worker_await_human", json!({"capability": cap, "reason": reason, "choices": choices}))
                    .await?;
                memory.remaining = steps.collect();
                stream(hub, conversation, &format!("• waiting for a person: {reason}\n")).await;
                stream(hub, conversation, &status_block("blocked", &reason, &memory.remaining)).await;
                return Ok(None);
            }
            Step::Complete(summary) => {
                let sent = call(mcp, "worker_complete", json!({"capability": cap, "summary": summary.clone()})).await;
                // A model whose report did not go through (the orchestrator
                // was away, or refused it) makes it again when it is resumed,
                // as with a progress report above.
                if let Err(e) = sent {
                    memory.remaining = std::iter::once(Step::Complete(summary)).chain(steps).collect();
                    return Err(e);
                }
                stream(hub, conversation, &format!("• completed: {summary}\n")).await;
                stream(hub, conversation, &status_block("complete", &summary, &[])).await;
            }
            Step::Fail(reason) => {
                call(mcp, "worker_fail", json!({"capability": cap, "reason": reason})).await?;
                stream(hub, conversation, &format!("• failed: {reason}\n")).await;
                stream(hub, conversation, &status_block("blocked", &reason, &[])).await;
            }
            Step::Say(text) => stream(hub, conversation, &format!("{text}\n")).await,
            Step::Sleep(d) => {
                stream(hub, conversation, "…").await;
                tokio::time::sleep(d).await;
            }
            Step::Stream(d) => {
                let until = tokio::time::Instant::now() + d;
                while tokio::time::Instant::now() < until {
                    hub.say(conversation, "thinking out loud… ");
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
            }
            Step::Hang => tokio::time::sleep(Duration::from_secs(24 * 3600)).await,
            Step::EndTurn => {
                memory.remaining = steps.collect();
                stream(hub, conversation, "(ending this turn here)\n").await;
                stream(hub, conversation, &status_block("working", "part of the assignment", &memory.remaining)).await;
                return Ok(None);
            }
            Step::Incident(Incident::Deferral) => {
                hub.update(conversation, |c| {
                    c.deferral = true;
                    c.incidents.push("deferral".into());
                });
            }
            Step::Incident(Incident::RateLimit) => {
                memory.remaining = steps.collect();
                hub.update(conversation, |c| {
                    c.rate_limited = true;
                    c.incidents.push("rate_limited".into());
                });
                return Ok(None);
            }
            Step::Incident(Incident::DeliveryTimeout) => {
                memory.remaining = steps.collect();
                return Ok(Some(TurnError::DeliveryTimeout));
            }
            Step::Incident(Incident::SomethingWentWrong) => {
                memory.remaining = steps.collect();
                return Ok(Some(TurnError::SomethingWentWrong));
            }
            Step::Incident(Incident::TooLong) => {
                memory.remaining = steps.collect();
                hub.update(conversation, |c| c.full = true);
                return Ok(Some(TurnError::TooLong));
            }
            Step::Call(tool, args) => {
                let mut args: serde_json::Value = serde_json::from_str(&args)?;
                args["capability"] = json!(cap);
                call(mcp, &tool, args).await?;
                stream(hub, conversation, &format!("• {tool}: ok\n")).await;
            }
        }
    }
    Ok(None)
}

/// The continuation-state block a model following
/// `skills/durable-continuation-output` ends its response with.
fn status_block(status: &str, summary: &str, remaining: &[Step]) -> String {
    let next = remaining.first().map_or_else(|| "none".to_owned(), |step| format!("{step:?}"));
    let current = if status == "working" { "between steps" } else { "none" };
    format!("\nstatus: {status}\nsummary: {summary}\ncurrent: {current}\nnext: {next}\n")
}

/// Waits (bounded: 10 waits of up to 30 s) for an answer to the last question.
async fn await_answer(mcp: &mut Connector, memory: &mut Memory) -> anyhow::Result<String> {
    let question = memory.question.clone().ok_or_else(|| anyhow::anyhow!("await_answer without a question"))?;
    for _ in 0..10 {
        let page = call(
            mcp,
            "events_wait",
            json!({"capability": memory.capability, "after_cursor": memory.cursor, "timeout_ms": 30_000}),
        )
        .await?;
        for event in page["events"].as_array().into_iter().flatten() {
            memory.cursor = event["cursor"].as_u64().unwrap_or(memory.cursor);
            let data = &event["data"];
            if event["type"] == "worker.message" && data["in_reply_to"] == question.as_str() {
                return Ok(data["body"].as_str().unwrap_or_default().to_owned());
            }
        }
        memory.cursor = page["cursor"].as_u64().unwrap_or(memory.cursor);
    }
    anyhow::bail!("no answer from root within the agent's bound")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scenarios_parse_and_unknown_steps_are_errors() {
        let steps = parse(
            r#"progress "x"; ask_root "q?"; await_answer; sleep 250ms; incident deferral; end_turn; complete "done""#,
        )
        .unwrap();
        assert_eq!(steps.len(), 7);
        assert_eq!(steps[3], Step::Sleep(Duration::from_millis(250)));
        assert_eq!(parse("sleep 2s").unwrap(), vec![Step::Sleep(Duration::from_secs(2))]);
        assert_eq!(parse("stream 30s; hang").unwrap(), vec![Step::Stream(Duration::from_secs(30)), Step::Hang]);
        assert!(parse("hang now").is_err());
        assert_eq!(parse("dance").unwrap_err(), "unknown scenario step `dance`");
        assert!(parse("progress x").unwrap_err().contains("quoted"));
        assert!(parse("incident meteor").unwrap_err().contains("meteor"));
        assert_eq!(scenario_in("Build A\nscenario: complete \"ok\""), Some("complete \"ok\""));
        assert_eq!(parse(r#"await_human "which db?""#).unwrap(), vec![Step::AwaitHuman("which db?".into())]);
        let call = parse(r#"call ownership_claim {"worktree": "/w", "session": "s"}"#).unwrap();
        assert_eq!(call, vec![Step::Call("ownership_claim".into(), r#"{"worktree": "/w", "session": "s"}"#.into())]);
        assert!(parse("call ownership_claim [1]").unwrap_err().contains("JSON object"));
        assert!(parse("call ownership_claim {oops").unwrap_err().contains("JSON object"));
    }

    #[test]
    fn an_unfinished_turn_ends_with_the_skills_working_block() {
        let block = status_block("working", "part", &[Step::Complete("done".into())]);
        let lines: Vec<&str> = block.trim().lines().collect();
        assert_eq!(lines.len(), 4);
        assert_eq!(lines[0], "status: working");
        assert!(lines[1].starts_with("summary: ") && lines[2].starts_with("current: "));
        assert!(lines[3].starts_with("next: ") && lines[3].contains("Complete"));
        assert!(status_block("complete", "ok", &[]).ends_with("next: none\n"));
    }
}
