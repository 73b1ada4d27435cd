//! `orchestrator canary run`: the gates G1D, G0, G2–G6 against one
//! deployment, as root over MCP (zero manual relay: the runner plays Main),
//! each leaving a chained receipt (`canary::receipt`). It stops at the first
//! failure or uncertainty with a typed reason and says the claim reached.
//!
//! The gates' faults (a person's own chat, a lost target, a browser
//! restart) come from outside the product: a loopback fault hook the test
//! rig serves (`--faults http://127.0.0.1:PORT/fault`), or a person asked on
//! the terminal (`--faults prompt`). The runner never touches a browser.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use canary::{Counts, Deployment, Evidence, Executor, Gate, Receipt, Target, Verdict, Writer};
use serde_json::{Value, json};

/// Where faults come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Faults {
    /// A loopback hook: `POST` a JSON fault, 200 once it is done.
    Hook {
        /// `host:port` (loopback).
        authority: String,
        /// The path.
        path: String,
    },
    /// A person at the terminal does each, then presses Enter.
    Prompt,
    /// None: gates that need a fault stop as uncertain.
    None,
}

impl Faults {
    /// `prompt`, `none`, or `http://127.0.0.1:PORT/path` (loopback only).
    pub fn parse(text: &str) -> anyhow::Result<Faults> {
        match text {
            "prompt" => Ok(Faults::Prompt),
            "none" => Ok(Faults::None),
            url => {
                let endpoint = mcp_client::Endpoint::parse(url)?;
                if !carrier_webext::bridge::loopback_host(&endpoint.authority) {
                    anyhow::bail!("the fault hook must be on loopback: {url}");
                }
                Ok(Faults::Hook { authority: endpoint.authority, path: endpoint.path })
            }
        }
    }
}

/// One run's settings.
#[derive(Debug, Clone)]
pub struct Config {
    /// The daemon's MCP endpoint.
    pub mcp_url: String,
    /// The daemon's state directory (its admin token).
    pub state_dir: PathBuf,
    /// Where the receipts go (a new directory).
    pub receipts: PathBuf,
    /// The gates, in the order given (default: every one).
    pub gates: Vec<Gate>,
    /// The carrier the executors must be (`webext`, `cdp`), if named.
    pub carrier: Option<String>,
    /// fakechat or the real site.
    pub target: Target,
    /// Workers for G0, G2–G4 and G6 (the seed's 3).
    pub workers: u32,
    /// Where faults come from.
    pub faults: Faults,
    /// How long any one wait inside a gate may take.
    pub gate_timeout: Duration,
    /// The most prompts the whole run may send into conversations.
    pub prompt_budget: u32,
    /// The least time between two prompts the runner itself causes.
    pub pacing: Duration,
    /// Whether worker calls must be proven to come from their own
    /// conversations (the runs are created so, and the claims say which).
    pub attribution: canary::Attribution,
}

/// How a run ended.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// The claim reached.
    pub claim: String,
    /// The typed stop reason, if it stopped early.
    pub stopped: Option<String>,
    /// Every conversation the run had the pool create or reopen (they
    /// stay in the account's history).
    pub conversations: Vec<String>,
    /// The chain's head hash, to keep elsewhere.
    pub head: Option<String>,
}

/// The executors an admin status lists, as receipts name them.
fn executors_of(admin: &crate::admin::Status) -> Vec<Executor> {
    admin
        .executors
        .iter()
        .map(|e| Executor {
            id: e.executor_id.clone(),
            carrier: e.kind.map(|k| format!("{k:?}").to_lowercase()).unwrap_or_else(|| "unknown".into()),
            browser: e.browser.clone().unwrap_or_else(|| "unknown".into()),
            generation: e.instance.clone(),
            os: e.os.clone().unwrap_or_default(),
        })
        .collect()
}

/// Codes that mean a person must act (counted as manual interactions):
/// the host's setup states, a rate limit, a tool-approval card.
fn needs_person(code: &str) -> bool {
    use protocol::error::ErrorCode;
    let Some(code) = ErrorCode::ALL.iter().find(|c| c.as_str() == code) else { return false };
    // A drifted tab is the gate's failure (`IDENTITY_DRIFT`), not a setup.
    (code.is_host_state() && *code != ErrorCode::ConversationIdentityDrift)
        || code.waits_for_person()
        || *code == ErrorCode::RateLimited
}

/// A gate's end short of a pass.
type Stop = Verdict;

/// The longest one MCP call may take before the gate stops as uncertain.
mod steps;

const CALL_TIMEOUT: Duration = Duration::from_secs(60);

/// How long G1D waits for a first carrier to connect before it stops
/// `SETUP_REQUIRED: BROWSER_CONTROL_UNAVAILABLE`.
const CARRIER_WAIT: Duration = Duration::from_secs(30);

/// What a gate hands back for its receipt.
#[derive(Default)]
struct Seen {
    observations: Vec<String>,
    counts: Counts,
    inputs: Value,
    events: Vec<String>,
}

impl Seen {
    fn note(&mut self, text: impl Into<String>) {
        let text = text.into();
        tracing::info!("canary: {text}");
        self.observations.push(text);
    }
}

struct Runner {
    cfg: Config,
    root: mcp_client::Client,
    cap: String,
    run_id: String,
    deployment: Deployment,
    prompts: u32,
    /// Setup states met, by code (each counts once per gate).
    manual: BTreeSet<String>,
    /// The slots' conversations when G2 ended, for G4–G6 to compare with.
    conversations: BTreeMap<u32, String>,
    /// How many workers the pool should hold now.
    desired: u32,
    /// Codes tolerated while a gate's own fault is being recovered.
    tolerated: BTreeSet<&'static str>,
    /// The log's cursor up to which [`Runner::watch`] has looked.
    watched: u64,
    /// Every conversation a pool of this run held.
    created: BTreeSet<String>,
    /// The workers whose tab went (`conversation.closed`), in log order:
    /// a loss recovered between two looks at the status still counts.
    closed: Vec<String>,
    /// The runs this invocation started (the main one, G0's).
    started: Vec<String>,
}

/// Runs the gates in order, writing receipts, until the first stop. The
/// operator's Ctrl-C or SIGTERM (`canary stop`) stops the gate under way
/// (its receipt says so) and retires this run's pools ([`crate::canary_stop`]).
pub async fn run(cfg: Config) -> anyhow::Result<Outcome> {
    let _one = crate::canary_stop::RunLock::take(&cfg.state_dir)?;
    let mut writer = Writer::create(&cfg.receipts, cfg.target)?.with_attribution(cfg.attribution);
    // However the daemon is exposed (a tunnel's secret, OAuth's owner key),
    // its state directory holds the secret `/mcp` then wants even on
    // loopback: sent as a bearer, never written into a receipt.
    let secret = crate::exposure::load_secret(&cfg.state_dir)?;
    let mut root = mcp_client::Client::connect_bearing(&cfg.mcp_url, secret.as_deref()).await?;
    let (cap, run_id) = new_run(&mut root, &cfg, "canary").await?;
    let mut runner = Runner {
        cfg: cfg.clone(),
        root,
        cap,
        run_id,
        deployment: Deployment::default(),
        prompts: 0,
        manual: BTreeSet::new(),
        conversations: BTreeMap::new(),
        desired: 0,
        tolerated: BTreeSet::new(),
        watched: 0,
        created: BTreeSet::new(),
        closed: Vec::new(),
        started: Vec::new(),
    };
    runner.started.push(runner.run_id.clone());
    // Where the run runs, once: the daemon's machine and its executors' as
    // they said it before the first gate (one platform per chain).
    let platform = match runner.carrier_connected().await {
        Ok(admin) => {
            let d = admin.deployment.as_ref();
            let executors = executors_of(&admin);
            canary::Platform::of(d.map_or("", |d| d.os.as_str()), d.map_or("", |d| d.arch.as_str()), &executors)
        }
        Err(_) => canary::Platform::of("", "", &[]),
    };
    let mut stopped = None;
    let mut operator = std::pin::pin!(crate::canary_stop::operator_stop());
    let mut interrupted = false;
    for gate in &cfg.gates {
        let started_at_ms = now_ms();
        let clock = Instant::now();
        let before = runner.cursor().await.ok();
        runner.manual.clear();
        runner.tolerated.clear();
        runner.watched = before.unwrap_or(0);
        let mut seen = Seen::default();
        // A pass is read against the whole gate's log: a stop code logged
        // after the gate's last wait still stops it.
        let judged = async {
            let met = runner.gate(*gate, &mut seen).await;
            first_cause(met, runner.watch().await)
        };
        let verdict = tokio::select! {
            judged = judged => match judged {
                Ok(()) => Verdict::Pass,
                Err(stop) => stop,
            },
            () = &mut operator => {
                interrupted = true;
                uncertain(format!("{}: Ctrl-C or SIGTERM mid-gate", crate::canary_stop::STOPPED_BY_OPERATOR))
            }
        };
        let after = runner.cursor().await.ok();
        seen.counts.manual_interactions = runner.manual.len() as u32;
        for code in &runner.manual {
            seen.note(format!("a person had to act: {code}"));
        }
        // G2–G6 require zero manual interactions.
        let verdict = match (&verdict, runner.manual.first()) {
            (Verdict::Pass, Some(code)) if *gate != Gate::G1D => Verdict::SetupRequired(code.clone()),
            _ => verdict,
        };
        let receipt = Receipt {
            schema: 0,
            sequence: 0,
            gate: *gate,
            verdict: verdict.clone(),
            stop_reason: None,
            claim: None,
            target: cfg.target,
            carrier: runner.carrier_name(),
            attribution: cfg.attribution,
            platform: platform.clone(),
            deployment: runner.deployment.clone(),
            inputs: seen.inputs,
            observations: seen.observations,
            evidence: Evidence {
                run_id: Some(runner.run_id.clone()),
                cursor_before: before,
                cursor_after: after,
                event_ids: seen.events,
            },
            counts: seen.counts,
            started_at_ms,
            elapsed_ms: clock.elapsed().as_millis() as u64,
            previous_sha256: None,
        };
        writer.append(receipt)?;
        if let Some(reason) = verdict.stop_reason(*gate) {
            stopped = Some(reason);
            break;
        }
    }
    if interrupted {
        crate::canary_stop::after_interrupt(&mut runner.root, &cfg.state_dir, &runner.started).await?;
    }
    let conversations = runner.created.into_iter().collect();
    let chain = canary::verify(&cfg.receipts)?;
    Ok(Outcome { claim: chain.summary.claim.clone(), stopped, conversations, head: chain.head().map(str::to_owned) })
}

/// What stops a gate: what its calls `met`, unless that is an uncertainty
/// and its log names a stop of its own, which comes first in time (an
/// ambiguous submission is logged before a call meets the slot it left
/// needing reconciliation). A pass still needs a quiet log.
fn first_cause(met: Result<(), Stop>, log: Result<(), Stop>) -> Result<(), Stop> {
    match (met, log) {
        (Err(Verdict::Uncertain(_)), Err(logged)) => Err(logged),
        (Err(stop), _) => Err(stop),
        (Ok(()), log) => log,
    }
}

/// A run of its own, with root's capability, kept in the canary's state
/// directory until it is retired (`canary stop`).
async fn new_run(root: &mut mcp_client::Client, cfg: &Config, title: &str) -> anyhow::Result<(String, String)> {
    let state_dir = &cfg.state_dir;
    let attribution = match cfg.attribution {
        canary::Attribution::Required => "required",
        canary::Attribution::CapabilityOnly => "capability_only",
    };
    let created = root.call("run_create", json!({"title": title, "attribution": attribution})).await?;
    let created = created.map_err(|e| anyhow::anyhow!("run_create: {e}"))?;
    // The receipts say what the daemon made the run, not only what was asked.
    let made = created["run"]["attribution"].as_str().unwrap_or("required");
    anyhow::ensure!(made == attribution, "run_create made a run with attribution {made}, not {attribution}");
    let cap = created["root_capability"].as_str().unwrap_or_default().to_owned();
    let run_id = created["run"]["run_id"].as_str().unwrap_or_default().to_owned();
    let run = crate::canary_stop::CanaryRun { run_id: run_id.clone(), capability: cap.clone() };
    crate::canary_stop::remember(state_dir, run)?;
    Ok((cap, run_id))
}

/// A queued command's op when it puts a prompt into a conversation
/// (`create` with its bootstrap, `send`), from `executor.command_queued`.
fn prompt_op(event: &Value) -> Option<&str> {
    if event["type"] != "executor.command_queued" {
        return None;
    }
    event["data"]["intent"]["op"].as_str().filter(|op| matches!(*op, "create" | "send"))
}

fn now_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

fn uncertain(why: impl Into<String>) -> Stop {
    Verdict::Uncertain(why.into())
}

fn fail(why: impl Into<String>) -> Stop {
    Verdict::Fail(why.into())
}

impl Runner {
    async fn gate(&mut self, gate: Gate, seen: &mut Seen) -> Result<(), Stop> {
        match gate {
            Gate::G1D => self.g1d(seen).await,
            Gate::G0 => self.g0(seen).await,
            Gate::G2 => self.g2(seen).await,
            Gate::G3 => self.g3(seen).await,
            Gate::G4 => self.g4(seen).await,
            Gate::G5 => self.g5(seen).await,
            Gate::G6 => self.g6(seen).await,
        }
    }

    fn carrier_name(&self) -> String {
        let kinds: BTreeSet<&str> = self.deployment.executors.iter().map(|e| e.carrier.as_str()).collect();
        match kinds.len() {
            0 => self.cfg.carrier.clone().unwrap_or_else(|| "none".into()),
            _ => kinds.into_iter().collect::<Vec<_>>().join("+"),
        }
    }

    /// A root call; a tool's refusal ends the gate with its code.
    async fn call(&mut self, tool: &str, mut args: Value) -> Result<Value, Stop> {
        args["capability"] = json!(self.cap);
        let call = self.root.call(tool, args);
        let Ok(answered) = tokio::time::timeout(CALL_TIMEOUT, call).await else {
            return Err(uncertain(format!("TIMEOUT: {tool} unanswered for {} s", CALL_TIMEOUT.as_secs())));
        };
        match answered {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(e)) if self.tolerated.contains(e.code.as_str()) => Err(uncertain(format!("{tool}: {}", e.code))),
            Ok(Err(e)) if needs_person(&e.code) => {
                self.manual.insert(e.code.clone());
                Err(Verdict::SetupRequired(e.code))
            }
            Ok(Err(e)) if e.code == "RECONCILE_REQUIRED" || e.code == "OUTCOME_UNKNOWN" => Err(uncertain(e.code)),
            Ok(Err(e)) => Err(fail(format!("{tool}: {}", e.code))),
            Err(e) => Err(uncertain(format!("DAEMON_UNREACHABLE: {e}"))),
        }
    }

    /// The daemon's admin read once a carrier is connected, or
    /// [`CARRIER_WAIT`] has passed: a person runs the canary right after
    /// starting a carrier, which may still be connecting.
    async fn carrier_connected(&self) -> Result<crate::admin::Status, Stop> {
        let mut admin = self.admin().await?;
        let wait = CARRIER_WAIT.min(self.cfg.gate_timeout);
        let until = Instant::now() + wait;
        if admin.executors.is_empty() {
            eprintln!("canary: waiting up to {} s for a carrier to connect", wait.as_secs());
        }
        while admin.executors.is_empty() && Instant::now() < until {
            tokio::time::sleep(Duration::from_millis(250)).await;
            admin = self.admin().await?;
        }
        Ok(admin)
    }

    /// The daemon's admin read (its executors and deployment).
    async fn admin(&self) -> Result<crate::admin::Status, Stop> {
        crate::admin::fetch(&crate::admin::authority_of(&self.cfg.mcp_url), &self.cfg.state_dir)
            .await
            .map_err(|e| uncertain(format!("ADMIN_UNREACHABLE: {e}")))
    }

    /// A task's words for the model, with fakechat's `scenario:` line (how
    /// its model plays the task) on a rehearsal only: ChatGPT gets the words.
    fn task(&self, words: String, scenario: &str) -> String {
        match self.cfg.target {
            Target::Fakechat => format!("{words}\nscenario: {scenario}"),
            Target::Live => words,
        }
    }

    async fn status(&mut self) -> Result<Value, Stop> {
        self.call("runtime_status", json!({})).await
    }

    async fn cursor(&mut self) -> Result<u64, Stop> {
        let run = self.call("run_get", json!({})).await?;
        Ok(run["run"]["cursor"].as_u64().unwrap_or(0))
    }

    /// Every event of the run after `cursor`.
    async fn events_after(&mut self, mut cursor: u64) -> Result<Vec<Value>, Stop> {
        let mut out = Vec::new();
        loop {
            let page = self.call("events_list", json!({"after_cursor": cursor, "limit": 500})).await?;
            let events = page["events"].as_array().cloned().unwrap_or_default();
            if events.is_empty() {
                return Ok(out);
            }
            cursor = page["cursor"].as_u64().unwrap_or(cursor);
            out.extend(events);
        }
    }

    /// Reads the log since the last look: a code a person must act on
    /// (a rate limit, a sign-out, an approval card, a stale app) stops the
    /// gate as a setup state, an effect whose outcome is unknown as
    /// uncertain; codes the gate's own fault causes are tolerated.
    async fn watch(&mut self) -> Result<(), Stop> {
        let events = self.events_after(self.watched).await?;
        for e in &events {
            self.watched = self.watched.max(e["cursor"].as_u64().unwrap_or(0));
            // The run-wide budget counts every prompt, whatever caused it.
            if prompt_op(e).is_some() {
                self.prompts += 1;
            }
            let data = &e["data"];
            if e["type"] == "conversation.closed" {
                self.closed.push(data["worker_id"].as_str().unwrap_or_default().to_owned());
            }
            let mut codes: Vec<&str> = [&data["code"], &data["error"], &data["outcome"]["code"]]
                .into_iter()
                .filter_map(Value::as_str)
                .collect();
            if e["type"] == "continuation.rate_limited" {
                codes.push("RATE_LIMITED");
            }
            for code in codes.into_iter().filter(|c| !self.tolerated.contains(c)) {
                if needs_person(code) {
                    self.manual.insert(code.to_owned());
                    return Err(Verdict::SetupRequired(code.to_owned()));
                }
                if matches!(code, "OUTCOME_UNKNOWN" | "AMBIGUOUS_SUBMISSION" | "RECONCILE_REQUIRED" | "HOST_UI_CHANGED")
                {
                    return Err(uncertain(code));
                }
                if code == "CONVERSATION_IDENTITY_DRIFT" {
                    return Err(fail("IDENTITY_DRIFT: a managed tab shows another conversation"));
                }
            }
        }
        if self.prompts > self.cfg.prompt_budget {
            return Err(fail(format!("PROMPT_BUDGET_EXCEEDED: {} > {}", self.prompts, self.cfg.prompt_budget)));
        }
        Ok(())
    }

    /// Polls `runtime_status` until `done` holds, within the gate timeout.
    /// A reason a person must resolve stops the gate at once (counted),
    /// unless the gate's own fault is being recovered from it.
    async fn until(&mut self, what: &str, done: impl Fn(&Value) -> bool) -> Result<Value, Stop> {
        let deadline = Instant::now() + self.cfg.gate_timeout;
        loop {
            let status = self.status().await?;
            if done(&status) {
                return Ok(status);
            }
            self.watch().await?;
            let reasons: Vec<String> = status["reasons"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|r| r.as_str().map(str::to_owned))
                .collect();
            if let Some(code) = reasons.iter().find(|r| needs_person(r) && !self.tolerated.contains(r.as_str())) {
                self.manual.insert(code.clone());
                return Err(Verdict::SetupRequired(code.clone()));
            }
            if status["state"] == "RECONCILE_REQUIRED" {
                return Err(uncertain("RECONCILE_REQUIRED"));
            }
            self.attribution_works().await?;
            if Instant::now() >= deadline {
                return Err(uncertain(format!("TIMEOUT: {what} (pool {})", status["state"])));
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }

    /// Counts effects and prompts in the run's log after `cursor`.
    async fn effects_since(&mut self, cursor: u64, seen: &mut Seen) -> Result<Vec<Value>, Stop> {
        let events = self.events_after(cursor).await?;
        for e in &events {
            if e["type"] == "executor.command_queued" {
                seen.counts.effects += 1;
            }
            if prompt_op(e).is_some() {
                seen.counts.prompts_sent += 1;
            }
        }
        self.watch().await?;
        Ok(events)
    }

    /// Stops before a step that would send `more` prompts past the budget.
    fn budget(&self, more: u32) -> Result<(), Stop> {
        if self.prompts + more > self.cfg.prompt_budget {
            return Err(fail(format!(
                "PROMPT_BUDGET: {} sent, {more} more needed, budget {}",
                self.prompts, self.cfg.prompt_budget
            )));
        }
        Ok(())
    }

    /// Has `fault` done (by the hook or the person); what the hook
    /// answered (a person's line), which may name what was made.
    async fn fault(&mut self, seen: &mut Seen, fault: Value, ask: &str) -> Result<String, Stop> {
        seen.note(format!("fault: {ask}"));
        match self.cfg.faults.clone() {
            Faults::Hook { authority, path } => {
                let posted = mcp_client::post_json(&authority, &path, &fault);
                match tokio::time::timeout(self.cfg.gate_timeout, posted).await {
                    Ok(Ok((200, body))) => Ok(body),
                    Ok(Ok((status, body))) => {
                        Err(uncertain(format!("FAULT_NOT_INJECTED: HTTP {status}: {}", body.trim())))
                    }
                    Ok(Err(e)) => Err(uncertain(format!("FAULT_NOT_INJECTED: {e}"))),
                    Err(_) => Err(uncertain("FAULT_NOT_INJECTED: the hook did not answer in time")),
                }
            }
            Faults::Prompt => {
                // The object a hook would get, on a line of its own: what to do, in full.
                eprintln!("\ncanary: fault {fault}");
                eprintln!("canary: please {ask}, then press Enter (within {} s)", self.cfg.gate_timeout.as_secs());
                let line = tokio::task::spawn_blocking(|| {
                    let mut line = String::new();
                    std::io::stdin().read_line(&mut line).map(|n| (n, line))
                });
                // End of input is no confirmation: a run without a person never "does" a fault.
                match tokio::time::timeout(self.cfg.gate_timeout, line).await {
                    Ok(Ok(Ok((n, line)))) if n > 0 => Ok(line.trim().to_owned()),
                    _ => Err(uncertain("FAULT_NOT_CONFIRMED")),
                }
            }
            Faults::None => Err(uncertain("FAULT_UNAVAILABLE: run with --faults")),
        }
    }

    fn slots(status: &Value) -> Vec<Value> {
        status["slots"].as_array().cloned().unwrap_or_default()
    }

    /// READY with exactly `n` admitted, parked slots.
    fn ready_with(n: usize) -> impl Fn(&Value) -> bool {
        move |s: &Value| {
            let slots = Runner::slots(s);
            s["state"] == "READY"
                && slots.len() == n
                && slots.iter().all(|x| x["admitted"] == true && x["conversation_id"].is_string())
        }
    }

    fn conversations_of(status: &Value) -> BTreeMap<u32, String> {
        Runner::slots(status)
            .iter()
            .filter_map(|s| Some((s["slot"].as_u64()? as u32, s["conversation_id"].as_str()?.to_owned())))
            .collect()
    }

    fn count(&mut self, status: &Value, seen: &mut Seen) {
        self.created.extend(Runner::conversations_of(status).into_values());
        let slots = Runner::slots(status);
        let conversations: BTreeSet<&str> = slots.iter().filter_map(|s| s["conversation_id"].as_str()).collect();
        seen.counts.workers = slots.len() as u32;
        seen.counts.conversations = conversations.len() as u32;
        // A target per parked slot whose executor holds it (the executors
        // keep target handles to themselves; see docs/canary.md).
        seen.counts.targets =
            slots.iter().filter(|s| s["health"] == "parked" && s["executor_id"].is_string()).count() as u32;
    }

    /// G1D: which deployment answers, and how its carriers read the pages
    /// the run will touch (the pre-flight: nothing is prompted before).
    async fn g1d(&mut self, seen: &mut Seen) -> Result<(), Stop> {
        let admin = self.admin().await?;
        let tools = self.root.list_tools().await.map_err(|e| uncertain(format!("TOOLS_UNREADABLE: {e}")))?;
        let tools_sha256 = canary::receipt::sha256(serde_json::to_string(&tools).unwrap_or_default().as_bytes());
        let d = admin
            .deployment
            .clone()
            .ok_or_else(|| fail("NO_DEPLOYMENT_IDENTITY: the daemon is older than the canary"))?;
        let status = self.status().await?;
        if status["deployment"]["instance_id"] != json!(d.identity.instance_id) {
            return Err(fail("INSTANCE_MISMATCH: runtime_status and /admin/status name different instances"));
        }
        // Exactly this deployment: its own state directory, the instance
        // `canary deploy` started (when it did), a build that can be named.
        let ours = std::fs::canonicalize(&self.cfg.state_dir).ok();
        if d.state_root.as_deref().map(|r| std::fs::canonicalize(r).ok()) != Some(ours) {
            return Err(fail(format!("STATE_ROOT_MISMATCH: the daemon runs on {:?}", d.state_root)));
        }
        if let Ok(bytes) = std::fs::read(self.cfg.state_dir.join("canary.json")) {
            let deployed: Value = serde_json::from_slice(&bytes).unwrap_or_default();
            if deployed["deployment"]["instance_id"] != json!(d.identity.instance_id) {
                return Err(fail("INSTANCE_MISMATCH: not the daemon `canary deploy` started (restarted since?)"));
            }
        }
        if d.build_id == "unknown" || d.identity.commit == "unknown" {
            return Err(fail("BUILD_UNNAMED: the daemon cannot name its binary or source"));
        }
        self.deployment = Deployment {
            commit: d.identity.commit.clone(),
            tree: d.identity.tree.clone(),
            build_id: d.build_id.clone(),
            instance_id: d.identity.instance_id.clone(),
            state_root: d.state_root.clone().unwrap_or_default(),
            tools_sha256,
            executors: executors_of(&admin),
            app_label: admin.app_label.clone(),
            project_url: admin.worker_project_url.clone(),
        };
        seen.inputs = json!({"mcp_url": self.cfg.mcp_url, "carrier": self.cfg.carrier, "target": self.cfg.target});
        seen.note(format!(
            "daemon {} at commit {} (tree {}), instance {}, {} tools",
            admin.version,
            d.identity.commit,
            d.identity.tree,
            d.identity.instance_id,
            tools.len()
        ));
        for e in &self.deployment.executors {
            let os = canary::receipt::or_unsaid(&e.os);
            seen.note(format!("executor {} ({}) on {} ({os})", e.id, e.carrier, e.browser));
        }
        let releases: Vec<Option<String>> = admin.executors.iter().map(|e| e.release.clone()).collect();
        if let Some(refusal) = crate::canary_deploy::build_refusal(&d.identity.tree, &admin.version, &releases) {
            if self.cfg.target == Target::Live {
                return Err(fail(refusal));
            }
            seen.note(format!("a live run would stop here: {refusal}"));
        }
        if self.cfg.target == Target::Live && self.deployment.executors.iter().any(|e| e.carrier == "fake") {
            return Err(fail("CARRIER_MISMATCH: a fake executor cannot speak for chatgpt.com"));
        }
        if self.deployment.executors.is_empty() {
            self.manual.insert("BROWSER_CONTROL_UNAVAILABLE".into());
            return Err(Verdict::SetupRequired("BROWSER_CONTROL_UNAVAILABLE".into()));
        }
        if let Some(want) = &self.cfg.carrier
            && self.deployment.executors.iter().any(|e| &e.carrier != want)
        {
            return Err(fail(format!("CARRIER_MISMATCH: asked for {want}, connected {}", self.carrier_name())));
        }
        if self.deployment.app_label.is_none() {
            return Err(Verdict::SetupRequired("HOST_APP_BINDING_NOT_READY".into()));
        }
        self.inspect_pages(seen).await
    }

    /// G0: three managed conversations in three targets; a person's own
    /// chat and a navigation in one of them leave the others untouched.
    /// In a run of its own, whose pool is stopped after, so G2 starts fresh.
    async fn g0(&mut self, seen: &mut Seen) -> Result<(), Stop> {
        let (cap, run_id) = new_run(&mut self.root, &self.cfg, "canary G0")
            .await
            .map_err(|e| uncertain(format!("DAEMON_UNREACHABLE: {e}")))?;
        self.started.push(run_id.clone());
        let main = (std::mem::replace(&mut self.cap, cap), std::mem::replace(&mut self.run_id, run_id));
        let (desired, watched) = (self.desired, std::mem::replace(&mut self.watched, 0));
        let witnessed = self.g0_witness(seen).await;
        // Its workers retire whatever the witness saw.
        let stopped = self.call("runtime_stop", json!({})).await;
        (self.cap, self.run_id) = main;
        (self.desired, self.watched) = (desired, watched);
        witnessed.and(stopped.map(|_| ()))
    }

    async fn g0_witness(&mut self, seen: &mut Seen) -> Result<(), Stop> {
        let n = self.cfg.workers.max(3);
        self.ensure(n, seen).await?;
        let before = self.cursor().await?;
        let status = self.status().await?;
        let conversations = Runner::conversations_of(&status);
        let (moved_slot, moved) = conversations.iter().next().map(|(s, c)| (*s, c.clone())).unwrap_or_default();
        let moved_worker = Runner::slots(&status)
            .iter()
            .find(|s| s["slot"] == moved_slot)
            .and_then(|s| s["worker_id"].as_str().map(str::to_owned))
            .unwrap_or_default();
        let mine = self
            .fault(
                seen,
                json!({"fault": "person_chat"}),
                "open a chat of your own in this browser, send one message in it, then paste its address here",
            )
            .await?;
        // The navigation is the witness's own fault (to the person's own
        // chat): what it causes from here on stops nothing, but its drift
        // must be said: a carrier that sees its managed tab show another
        // conversation reports `CONVERSATION_IDENTITY_DRIFT` (the seed's G0).
        self.tolerated.insert("CONVERSATION_IDENTITY_DRIFT");
        self.tolerated.insert("NOT_CONVERSATION_PAGE");
        let theirs = mine.trim().rsplit('/').next().unwrap_or_default().to_owned();
        let to = format!("https://chatgpt.com/c/{theirs}");
        self.fault(
            seen,
            json!({"fault": "navigate", "conversation_id": moved, "to": to}),
            &format!("in the tab showing conversation {moved}, open your own chat {to}"),
        )
        .await?;
        let deadline = Instant::now() + Duration::from_secs(10).min(self.cfg.gate_timeout);
        loop {
            let drifted = self.events_after(before).await?.iter().any(|e| {
                e["type"] == "conversation.error"
                    && e["data"]["worker_id"] == moved_worker.as_str()
                    && e["data"]["code"] == "CONVERSATION_IDENTITY_DRIFT"
            });
            if drifted {
                seen.note(format!("slot {moved_slot}'s carrier reported its tab's drift"));
                break;
            }
            if Instant::now() >= deadline {
                return Err(fail(format!(
                    "DRIFT_UNSEEN: slot {moved_slot}'s tab showed another conversation and no carrier said so within 10 s"
                )));
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        let events = self.effects_since(before, seen).await?;
        let after = self.status().await?;
        // The person's own chat is never adopted, whatever the hook names it.
        let mine = mine.rsplit('/').next().unwrap_or_default().to_owned();
        if mine.len() >= 8 {
            // The drift report names it; nothing else may.
            let adopted =
                events.iter().filter(|e| e["type"] != "conversation.error").any(|e| e.to_string().contains(&mine))
                    || Runner::conversations_of(&after).values().any(|c| *c == mine);
            if adopted {
                return Err(fail("ISOLATION: the person's own chat was touched"));
            }
            seen.note(format!("the person's own chat {mine} was never touched"));
        }
        for (slot, conversation) in &conversations {
            if *slot == moved_slot {
                continue;
            }
            let now = Runner::conversations_of(&after).get(slot).cloned();
            if now.as_deref() != Some(conversation.as_str()) {
                return Err(fail(format!("ISOLATION: slot {slot} changed conversation")));
            }
        }
        let touched: BTreeSet<String> = events
            .iter()
            .filter(|e| prompt_op(e).is_some())
            .filter_map(|e| e["data"]["worker_id"].as_str().map(str::to_owned))
            .collect();
        if !touched.is_empty() {
            return Err(fail(format!("ISOLATION: prompts sent to {} worker(s) after the person acted", touched.len())));
        }
        seen.note(format!(
            "{} managed conversations; after a person's own chat and a navigation in slot {moved_slot}'s tab, the others kept theirs and got no prompt",
            conversations.len()
        ));
        if let Some((slot, conversation)) = conversations.iter().find(|(s, _)| **s != moved_slot) {
            self.g0_wake(*slot, conversation, seen).await?;
        }
        let after = self.status().await?;
        self.count(&after, seen);
        Ok(())
    }

    async fn ensure(&mut self, n: u32, seen: &mut Seen) -> Result<Value, Stop> {
        let before = self.cursor().await?;
        let have = Runner::slots(&self.status().await?).len() as u32;
        self.budget(n.saturating_sub(have))?;
        tokio::time::sleep(self.cfg.pacing).await;
        let out = self.call("runtime_ensure", json!({"desired_workers": n})).await?;
        self.desired = n;
        let status = self.until(&format!("{n} admitted parked workers"), Runner::ready_with(n as usize)).await?;
        self.created.extend(Runner::conversations_of(&status).into_values());
        self.effects_since(before, seen).await?;
        seen.events.push(format!("{}:{before}..", self.run_id));
        Ok(json!({"outcome": out["outcome"], "status": status}))
    }

    /// G2: `runtime_ensure(3)` from nothing; a repeat does nothing.
    async fn g2(&mut self, seen: &mut Seen) -> Result<(), Stop> {
        let n = self.cfg.workers;
        seen.inputs = json!({"desired_workers": n});
        let first = self.ensure(n, seen).await?;
        let status = &first["status"];
        let slots = Runner::slots(status);
        let conversations = Runner::conversations_of(status);
        let distinct: BTreeSet<&String> = conversations.values().collect();
        if distinct.len() != n as usize {
            return Err(fail(format!("CONVERSATIONS: {} distinct for {n} workers", distinct.len())));
        }
        let workers: BTreeSet<&str> = slots.iter().filter_map(|s| s["worker_id"].as_str()).collect();
        if workers.len() != n as usize || !slots.iter().all(|s| s["admitted"] == true && s["can_act"] == true) {
            return Err(fail("ADMISSION: not every worker is a distinct admitted peer that can act"));
        }
        self.count(status, seen);
        seen.note(format!("ensure({n}): {n} admitted workers in {} distinct conversations", distinct.len()));
        let replay_from = self.cursor().await?;
        let mut replay = Seen::default();
        let again = self.call("runtime_ensure", json!({"desired_workers": n})).await?;
        let outcome = &again["outcome"];
        let nothing = ["provisioned", "retiring", "recovering"]
            .iter()
            .all(|k| outcome[k].as_array().is_none_or(|a| a.is_empty()));
        self.effects_since(replay_from, &mut replay).await?;
        if !nothing || replay.counts.effects > 0 {
            return Err(fail(format!("REPLAY_NOT_IDEMPOTENT: {outcome}, {} effects", replay.counts.effects)));
        }
        seen.note("a repeated ensure created nothing: 0 workers, 0 conversations, 0 effects");
        self.conversations = conversations;
        Ok(())
    }

    /// G3: one bounded task per worker, collected once, each by its own worker.
    async fn g3(&mut self, seen: &mut Seen) -> Result<(), Stop> {
        let status = self.until("a ready pool", Runner::ready_with(self.desired as usize)).await?;
        let before = self.cursor().await?;
        self.watch().await?;
        let closed_before = self.closed.len();
        let nonce = format!("{:08x}", now_ms() & 0xffff_ffff);
        let slots: Vec<u32> =
            Runner::slots(&status).iter().filter_map(|s| s["slot"].as_u64().map(|n| n as u32)).collect();
        self.budget(slots.len() as u32)?;
        let mut tasks = Vec::new();
        for slot in &slots {
            let mark = format!("canary-G3-{nonce}-s{slot}");
            let instructions = self.task(
                format!(
                    "Canary task for slot {slot}. Call worker_complete with the summary {mark} and do nothing else."
                ),
                &format!("complete \"{mark}\""),
            );
            let key = format!("canary-{nonce}-{slot}");
            let task = self
                .call("task_dispatch", json!({"instructions": instructions, "slot": slot, "idempotency_key": key}))
                .await?;
            let id = task["task_id"].as_str().or(task["task"]["task_id"].as_str()).unwrap_or_default().to_owned();
            tasks.push((*slot, id, mark));
            tokio::time::sleep(self.cfg.pacing).await;
        }
        seen.inputs = json!({"tasks": tasks.len(), "nonce": nonce});
        let deadline = Instant::now() + self.cfg.gate_timeout;
        let mut results = BTreeMap::new();
        while results.len() < tasks.len() {
            self.watch().await?;
            // Nothing may be lost while the tasks run: a lost target is a fault nobody asked for.
            let now = self.status().await?;
            if let Some(worker) = self.closed.get(closed_before) {
                let slot = Runner::slots(&now)
                    .iter()
                    .find(|s| s["worker_id"] == worker.as_str())
                    .map_or_else(|| "?".to_owned(), |s| s["slot"].to_string());
                return Err(uncertain(format!("TARGET_LOST: slot {slot}")));
            }
            for slot in Runner::slots(&now) {
                match slot["health"].as_str() {
                    Some("lost" | "recovering") => {
                        return Err(uncertain(format!("TARGET_LOST: slot {}", slot["slot"])));
                    }
                    Some("reconcile_required") => return Err(uncertain("RECONCILE_REQUIRED")),
                    _ => {}
                }
            }
            for (slot, id, _) in &tasks {
                if results.contains_key(slot) {
                    continue;
                }
                let got = self.call("task_collect", json!({"task_id": id})).await?;
                if got["status"] == "completed" {
                    results.insert(*slot, got["result"].as_str().unwrap_or_default().to_owned());
                }
            }
            if Instant::now() >= deadline {
                return Err(uncertain(format!("TIMEOUT: {} of {} tasks collected", results.len(), tasks.len())));
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        for (slot, _, mark) in &tasks {
            let result = &results[slot];
            let theirs = tasks.iter().any(|(other, _, m)| other != slot && result.contains(m.as_str()));
            if theirs || !result.contains(mark.as_str()) {
                seen.counts.cross_attributions += 1;
            }
        }
        let events = self.effects_since(before, seen).await?;
        let mut completions: BTreeMap<String, u32> = BTreeMap::new();
        for e in events.iter().filter(|e| e["type"] == "worker.completed") {
            *completions.entry(e["data"]["worker_id"].as_str().unwrap_or_default().to_owned()).or_default() += 1;
            seen.events.push(format!("{}:{}", self.run_id, e["cursor"]));
        }
        seen.counts.duplicates = completions.values().map(|n| n.saturating_sub(1)).sum();
        let now = self.status().await?;
        self.count(&now, seen);
        seen.note(format!(
            "{} tasks dispatched to their slots and collected: {} cross-attributed, {} duplicated",
            tasks.len(),
            seen.counts.cross_attributions,
            seen.counts.duplicates
        ));
        if seen.counts.cross_attributions > 0 {
            return Err(fail("CROSS_ATTRIBUTION"));
        }
        if seen.counts.duplicates > 0 {
            return Err(fail("DUPLICATE_EXECUTION"));
        }
        Ok(())
    }

    /// G4: one target lost; only that worker is reopened, in its own conversation.
    async fn g4(&mut self, seen: &mut Seen) -> Result<(), Stop> {
        let status = self.until("a ready pool", Runner::ready_with(self.desired as usize)).await?;
        let before = self.cursor().await?;
        let slots = Runner::slots(&status);
        let Some(victim) = slots.first().cloned() else { return Err(fail("NO_WORKERS")) };
        let slot = victim["slot"].as_u64().unwrap_or(0) as u32;
        let conversation = victim["conversation_id"].as_str().unwrap_or_default().to_owned();
        let epochs: BTreeMap<u32, u64> = slots
            .iter()
            .filter_map(|s| Some((s["slot"].as_u64()? as u32, s["continuation_epoch"].as_u64()?)))
            .collect();
        self.fault(
            seen,
            json!({"fault": "lose_target", "conversation_id": conversation}),
            &format!("close the browser tab showing conversation {conversation} (only that one)"),
        )
        .await?;
        self.until("the lost slot seen", |s| {
            Runner::slots(s).iter().any(|x| x["slot"] == slot && x["health"] != "parked")
        })
        .await?;
        // The seed's G4 recovers the lost worker with `runtime_recover`.
        self.call("runtime_recover", json!({})).await?;
        let after = self.until("the slot reopened", Runner::ready_with(self.desired as usize)).await?;
        let events = self.effects_since(before, seen).await?;
        if let Some(e) = events.iter().find(|e| prompt_op(e).is_some()) {
            return Err(fail(format!(
                "BLIND_REPLAY: a {} prompt was queued while reopening",
                prompt_op(e).unwrap_or("?")
            )));
        }
        let now = Runner::conversations_of(&after);
        if now.get(&slot) != Some(&conversation) {
            return Err(fail(format!("REOPENED_ELSEWHERE: slot {slot} now holds {:?}", now.get(&slot))));
        }
        for s in Runner::slots(&after) {
            let n = s["slot"].as_u64().unwrap_or(0) as u32;
            let epoch = s["continuation_epoch"].as_u64().unwrap_or(0);
            if n != slot && Some(&epoch) != epochs.get(&n) {
                return Err(fail(format!("COLLATERAL: slot {n} was reopened too")));
            }
            if n != slot && now.get(&n) != self.conversations.get(&n) && self.conversations.contains_key(&n) {
                return Err(fail(format!("COLLATERAL: slot {n} changed conversation")));
            }
        }
        self.count(&after, seen);
        seen.note(format!(
            "slot {slot}'s target lost and reopened on its own conversation {conversation}; the others untouched"
        ));
        Ok(())
    }

    /// G5: 3 → 5 → 2, never retiring a busy or targeted worker.
    async fn g5(&mut self, seen: &mut Seen) -> Result<(), Stop> {
        let (up, down) = (self.cfg.workers + 2, 2);
        seen.inputs = json!({"from": self.desired, "up": up, "down": down});
        let before = self.cursor().await?;
        let have = self.desired;
        self.budget(up.saturating_sub(have) + 1)?;
        self.call("runtime_scale", json!({"desired_workers": up})).await?;
        self.desired = up;
        let grown = self.until(&format!("{up} workers"), Runner::ready_with(up as usize)).await?;
        self.created.extend(Runner::conversations_of(&grown).into_values());
        let kept: BTreeMap<u32, String> = Runner::conversations_of(&grown);
        for (slot, conversation) in &self.conversations {
            if kept.get(slot) != Some(conversation) {
                return Err(fail(format!("SCALE_UP_REPLACED: slot {slot}")));
            }
        }
        seen.note(format!("scaled {have} → {up}: only the missing workers were added"));
        // Make one worker busy (targeted, its task running) before scaling down.
        let busy_slot = *kept.keys().last().unwrap_or(&0);
        let mark = format!("canary-G5-{:08x}", now_ms() & 0xffff_ffff);
        let task = self
            .call(
                "task_dispatch",
                json!({
                    "instructions": self.task(
                        format!("Canary task: write three short paragraphs about lighthouses, then call worker_complete with the summary {mark}."),
                        &format!("stream 20s; complete \"{mark}\""),
                    ),
                    "slot": busy_slot,
                    "idempotency_key": mark,
                }),
            )
            .await?;
        let task_id = task["task_id"].as_str().unwrap_or_default().to_owned();
        let out = self.call("runtime_scale", json!({"desired_workers": down})).await?;
        let protected: Vec<u64> =
            out["outcome"]["protected"].as_array().into_iter().flatten().filter_map(Value::as_u64).collect();
        let retiring: Vec<u64> =
            out["outcome"]["retiring"].as_array().into_iter().flatten().filter_map(Value::as_u64).collect();
        if retiring.contains(&(busy_slot as u64)) {
            return Err(fail(format!("EVICTED_BUSY: slot {busy_slot}")));
        }
        seen.note(format!(
            "scaled {up} → {down} with slot {busy_slot} busy: retiring {retiring:?}, protected {protected:?}"
        ));
        // The busy worker finishes; then the pool settles at the floor it can keep.
        let deadline = Instant::now() + self.cfg.gate_timeout;
        loop {
            self.watch().await?;
            let got = self.call("task_collect", json!({"task_id": task_id})).await?;
            if got["status"] == "completed" {
                break;
            }
            if Instant::now() >= deadline {
                return Err(uncertain("TIMEOUT: the busy worker's task"));
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        self.call("runtime_scale", json!({"desired_workers": down})).await?;
        self.desired = down;
        let settled = self.until(&format!("{down} workers"), Runner::ready_with(down as usize)).await?;
        self.effects_since(before, seen).await?;
        let left = Runner::conversations_of(&settled);
        if !left.contains_key(&busy_slot) && protected.contains(&(busy_slot as u64)) {
            seen.note(format!("slot {busy_slot} retired only after its task was done"));
        }
        self.conversations = left;
        self.count(&settled, seen);
        seen.note(format!("settled at {down}: {:?}", self.conversations.keys().collect::<Vec<_>>()));
        Ok(())
    }

    /// G6: the browser control lost or the browser restarted; one ensure
    /// reopens the exact conversations, no duplicates, no blind replay.
    async fn g6(&mut self, seen: &mut Seen) -> Result<(), Stop> {
        let n = self.desired.max(1);
        let status = self.until("a ready pool", Runner::ready_with(n as usize)).await?;
        let before = self.cursor().await?;
        let conversations = Runner::conversations_of(&status);
        let workers: BTreeSet<String> =
            Runner::slots(&status).iter().filter_map(|s| s["worker_id"].as_str().map(str::to_owned)).collect();
        let starts = |admin: &crate::admin::Status| -> BTreeSet<String> {
            admin.executors.iter().filter_map(|e| e.instance.clone()).collect()
        };
        let before_starts = starts(&self.admin().await?);
        // While the browser is away the pool says so: that is the fault, not a person's setup.
        self.tolerated.insert("BROWSER_CONTROL_UNAVAILABLE");
        self.restart_daemon(seen).await?;
        // Chrome's own remote-debugging route asks again for the new browser's connection.
        let ask = match self.carrier_name().split('+').any(|c| c == "cdp") {
            true => {
                "quit the browser and start it again (same profile); when Chrome asks to allow remote debugging, click Allow"
            }
            false => "quit the browser and start it again (same profile)",
        };
        self.fault(seen, json!({"fault": "restart_browser"}), ask).await?;
        // The restart must be seen: the targets lost, or the carrier started anew.
        let deadline = Instant::now() + self.cfg.gate_timeout;
        loop {
            let lost = Runner::slots(&self.status().await?).iter().any(|s| s["health"] != "parked");
            if lost || starts(&self.admin().await?) != before_starts {
                break;
            }
            if Instant::now() >= deadline {
                return Err(uncertain("RESTART_NOT_SEEN: every target stayed as it was"));
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        self.call("runtime_ensure", json!({"desired_workers": n})).await?;
        let after = self.until("the pool reconstructed", Runner::ready_with(n as usize)).await?;
        let events = self.effects_since(before, seen).await?;
        let now = Runner::conversations_of(&after);
        if now != conversations {
            return Err(fail(format!("NOT_EXACT: conversations {conversations:?} became {now:?}")));
        }
        let again: BTreeSet<String> =
            Runner::slots(&after).iter().filter_map(|s| s["worker_id"].as_str().map(str::to_owned)).collect();
        if again != workers {
            return Err(fail("DUPLICATE_WORKERS: the logical workers changed"));
        }
        let creates = events.iter().filter(|e| prompt_op(e) == Some("create")).count();
        let sends = events.iter().filter(|e| prompt_op(e) == Some("send")).count();
        if creates > 0 || sends > 0 {
            return Err(fail(format!("BLIND_REPLAY: {creates} conversations created, {sends} prompts sent")));
        }
        self.count(&after, seen);
        seen.note(format!(
            "after the browser restart one ensure reopened the same {} conversations for the same workers: 0 created, 0 prompts",
            now.len()
        ));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What stops a gate as a person's to resolve, from the protocol's own
    /// classes: a challenge page and a person's draft too; a drifted tab is
    /// the gate's failure; an unknown word is nothing.
    #[test]
    fn a_person_must_act_on_the_hosts_setup_states() {
        for code in
            ["CHATGPT_CHALLENGE", "CHATGPT_SIGNED_OUT", "COMPOSER_HAS_DRAFT", "TOOL_APPROVAL_REQUIRED", "RATE_LIMITED"]
        {
            assert!(needs_person(code), "{code}");
        }
        for code in ["CONVERSATION_IDENTITY_DRIFT", "OUTCOME_UNKNOWN", "chatgpt_challenge", ""] {
            assert!(!needs_person(code), "{code}");
        }
    }

    /// CI run 2 of session 24: an executor killed mid-send stopped G3 as
    /// `RECONCILE_REQUIRED` (a call met the slot the ambiguous submission
    /// left) where the log already said `AMBIGUOUS_SUBMISSION`: the log's
    /// cause comes first; a failure or a setup state a call met stands.
    #[test]
    fn a_gate_stops_on_the_first_cause_its_log_names() {
        let ambiguous = || Err(uncertain("AMBIGUOUS_SUBMISSION"));
        assert_eq!(first_cause(Err(uncertain("RECONCILE_REQUIRED")), ambiguous()), ambiguous());
        assert_eq!(first_cause(Err(fail("ISOLATION: x")), ambiguous()), Err(fail("ISOLATION: x")));
        let setup = Err(Verdict::SetupRequired("RATE_LIMITED".into()));
        assert_eq!(first_cause(setup.clone(), ambiguous()), setup);
        assert_eq!(first_cause(Err(uncertain("TIMEOUT: x")), Ok(())), Err(uncertain("TIMEOUT: x")));
        assert_eq!(first_cause(Ok(()), ambiguous()), ambiguous());
        assert_eq!(first_cause(Ok(()), Ok(())), Ok(()));
    }
}
