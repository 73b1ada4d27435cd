//! The two-worker scenario, driven by a root MCP client: spawn A and B;
//! A asks root a question and completes once answered; B completes; root
//! follows up A, whose wake prompt lands in A's existing conversation.

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
}

struct Root {
    client: Client,
    capability: String,
    cursor: u64,
    started: Instant,
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
                self.cursor = event["cursor"].as_u64().unwrap_or(self.cursor);
                let names: Vec<(String, &str)> = out.workers.iter().cloned().zip(["alpha", "beta"]).collect();
                out.trace.push(describe(&event, self.started, &names));
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
                if wanted(&event) {
                    return Ok(event);
                }
            }
            self.cursor = page["cursor"].as_u64().unwrap_or(self.cursor);
        }
        bail!("timed out waiting; trace so far:\n{}", out.trace.join("\n"))
    }
}

fn describe(event: &Value, started: Instant, names: &[(String, &str)]) -> String {
    let data = &event["data"];
    let worker = data["worker_id"].as_str().unwrap_or_default();
    let who = names.iter().find(|(id, _)| id == worker).map_or("", |(_, name)| *name);
    let transition = match (event["type"].as_str(), data["from"].as_str(), data["to"].as_str()) {
        (Some("worker.state_changed"), Some(from), Some(to)) => format!("{from} -> {to} "),
        _ => String::new(),
    };
    let detail = ["conversation_id", "state", "kind", "summary", "body", "code"]
        .iter()
        .filter_map(|k| data[*k].as_str().map(|v| format!("{k}={v}")))
        .collect::<Vec<_>>()
        .join(" ");
    format!(
        "{:>7.2}s  {:<28} {who:<6} {transition}{detail}",
        started.elapsed().as_secs_f64(),
        event["type"].as_str().unwrap_or("?")
    )
}

/// Runs the scenario against the MCP endpoint at `mcp_url`.
pub async fn two_workers(mcp_url: &str, budget: Duration) -> anyhow::Result<Outcome> {
    let mut client = Client::connect(mcp_url).await?;
    let created =
        client.call("run_create", json!({"title": "two workers"})).await?.map_err(|e| anyhow::anyhow!("{e}"))?;
    let capability = created["root_capability"].as_str().context("no root capability")?.to_owned();
    let mut root = Root { client, capability, cursor: 0, started: Instant::now() };
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
