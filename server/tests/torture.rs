//! Crash torture (issue 15), Jepsen style. A seeded workload (spawns,
//! follow-ups, messages, progress, pool ensure/scale/recover, lost tabs)
//! drives the real daemon binary and two fake executors over the real
//! bridge, while worker "models" answer every prompt their conversation
//! receives. The daemon is SIGKILLed at seeded points and restarted on the
//! same address. Every call is recorded as ok, failed or unknown; at the end
//! the history is checked:
//!
//! - **once per key**: every idempotency key names one effect (one worker,
//!   one follow-up), however often it was retried across crashes;
//! - **exactly once**: every follow-up in the log was submitted into its
//!   worker's conversation exactly once (or, its wake having missed its
//!   deadline, carried by a newer follow-up's wake), and every bootstrap once;
//! - **gapless**: the run's cursors are 1..=head;
//! - **durable**: the events before each kill are unchanged after it;
//! - **rebuilt**: when nothing happened between the kill and the look after
//!   the restart, the state folded from the log equals the state before;
//! - **live**: after the last restart every acknowledged follow-up is
//!   completed and no command stays open, within a bound;
//! - **no panic** in the daemon's log.
//!
//! Conversations fill up (the fake's `ConversationFull`): their workers
//! roll over to fresh conversations, and a follow-up a rollover carried
//! counts as delivered (the fresh conversation's capsule names it).
//!
//! The executors misbehave too: one never re-sends its states after a
//! reconnect, loses idle reports (the daemon must inspect) and misses the
//! deadline of some wakes (the daemon must send them again); tabs are
//! reported closed both ways (the pool must recover them); a model sometimes
//! sends a late completion of older work after a newer follow-up (it must be
//! refused and close nothing).
//!
//! Quick mode (CI): `TORTURE_KILLS` kills (default 20). Long mode:
//! `TORTURE_MINUTES=N`, or `cargo xtask torture --minutes N`. The seed is
//! `TORTURE_SEED` (default fixed) and is printed, so a failure reproduces
//! its schedule.

mod support;

/// Worktree ownership killed at each of its eight boundaries.
#[path = "torture/ownership.rs"]
mod ownership;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use e2e::history::{Rng, Submitted, exactly_once, gapless};
use fake_executor::{FakeConfig, FakeExecutor, Fault, Op};
use protocol::WorkerId;
use serde_json::{Value, json};
use support::{Attempt, Daemon, Mcp, credential};

/// The daemon flags: a short recheck bound so a lost idle report costs little.
/// (No tab capacity: its parks need a turn that ends after its model's
/// calls, and this harness's models answer after the simulated turn ended.)
const DAEMON_ARGS: [&str; 10] = [
    "--executor-recheck-after-ms",
    "300",
    "--pool-pacing-ms",
    "20",
    "--max-launches",
    "4",
    "--max-active-workers",
    "64",
    "--executor-heartbeat-ms",
    "1000",
];
/// How long the system may take to finish everything after the last restart.
const SETTLE: Duration = Duration::from_secs(60);

/// One call in the history.
#[derive(Debug, Clone)]
struct Call {
    tool: &'static str,
    key: Option<String>,
    outcome: Attempt,
}

/// What the driver and the models recorded.
#[derive(Default)]
struct History {
    calls: Vec<Call>,
    kills: usize,
    /// Comparisons of the state before a kill and after its restart.
    rebuilt_checked: usize,
}

impl History {
    fn record(&mut self, tool: &'static str, key: Option<String>, outcome: &Attempt) {
        self.calls.push(Call { tool, key, outcome: outcome.clone() });
    }

    fn count(&self, pick: impl Fn(&Attempt) -> bool) -> usize {
        self.calls.iter().filter(|c| pick(&c.outcome)).count()
    }
}

/// The daemon's address and a generation that moves at every restart.
struct Target {
    addr: String,
    generation: AtomicU64,
    /// Set while the driver kills and restarts: models hold their calls.
    paused: AtomicBool,
    /// Models holding (acknowledging the pause).
    holding: AtomicBool,
}

/// Plays each worker conversation's model: on a bootstrap it attaches; on a
/// wake it attaches, reads follow-up N and completes it naming N. Sometimes
/// (seeded) it also sends a late completion of the previous follow-up, which
/// must be refused once newer work exists. Prompts of one conversation are
/// answered in order; one that must wait never holds up other conversations.
fn models(
    executors: Vec<Arc<FakeExecutor>>,
    target: Arc<Target>,
    history: Arc<Mutex<History>>,
    stop: Arc<AtomicBool>,
    seed: u64,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let mut rng = Rng(seed ^ 0x6d6f_6465_6c73);
        let mut taken: Vec<usize> = vec![0; executors.len()];
        // (conversation, prompt, unresolved tries), oldest first.
        let mut pending: Vec<(String, String, u32)> = Vec::new();
        let mut sessions: HashMap<String, (u64, Mcp)> = HashMap::new();
        let mut late: HashSet<String> = HashSet::new();
        while !stop.load(Ordering::SeqCst) {
            if target.paused.load(Ordering::SeqCst) {
                target.holding.store(true, Ordering::SeqCst);
                std::thread::sleep(Duration::from_millis(5));
                continue;
            }
            target.holding.store(false, Ordering::SeqCst);
            for (i, executor) in executors.iter().enumerate() {
                let stats = executor.stats();
                for (conversation, prompt) in &stats.submissions[taken[i]..] {
                    pending.push((conversation.to_string(), prompt.clone(), 0));
                }
                taken[i] = stats.submissions.len();
            }
            let mut waiting: HashSet<String> = HashSet::new();
            let mut i = 0;
            while i < pending.len() && !target.paused.load(Ordering::SeqCst) {
                let conversation = pending[i].0.clone();
                if waiting.contains(&conversation) {
                    i += 1;
                    continue;
                }
                let generation = target.generation.load(Ordering::SeqCst);
                if sessions.get(&conversation).is_none_or(|(g, _)| *g != generation) {
                    let Some(mcp) = Mcp::try_connect_at(&target.addr, "/mcp") else { break };
                    sessions.insert(conversation.clone(), (generation, mcp));
                }
                let peer = &sessions[&conversation].1;
                match answer(peer, &pending[i].1, &history, &mut rng, &mut late) {
                    Answer::Done => {
                        pending.remove(i);
                    }
                    Answer::Again => {
                        sessions.remove(&conversation);
                        waiting.insert(conversation);
                        i += 1;
                    }
                    // Not bound yet, or admitted to a session that died with a
                    // daemon (its answer lost): a while, then it is let go.
                    Answer::Unresolved if pending[i].2 < 400 => {
                        pending[i].2 += 1;
                        waiting.insert(conversation);
                        i += 1;
                    }
                    Answer::Unresolved => {
                        pending.remove(i);
                    }
                }
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    })
}

/// What became of one prompt.
enum Answer {
    /// Answered (or nothing to do).
    Done,
    /// No answer from the daemon: try again.
    Again,
    /// `PEER_IDENTITY_UNRESOLVED`: try again for a while.
    Unresolved,
}

/// Answers one prompt as its conversation's model would.
fn answer(peer: &Mcp, prompt: &str, history: &Mutex<History>, rng: &mut Rng, late: &mut HashSet<String>) -> Answer {
    let Some(attach) = prompt.split('"').find(|p| p.starts_with("att_")) else { return Answer::Done };
    let attached = peer.attempt("worker_attach", json!({"attach_identity": attach}));
    history.lock().unwrap().record("worker_attach", None, &attached);
    let me = match attached {
        Attempt::Ok(me) => me,
        Attempt::Failed(code, _) if code == "PEER_IDENTITY_UNRESOLVED" => return Answer::Unresolved,
        // A retired pool worker, for one: nothing to do.
        Attempt::Failed(..) => return Answer::Done,
        Attempt::Unknown => return Answer::Again,
    };
    // A fresh conversation after a rollover goes on with the open work its
    // capsule names, as a model reading it would.
    let open = me["continuation"]["open"].as_array().and_then(|o| o.last()).and_then(Value::as_u64);
    let named = prompt.split("follow-up #").nth(1).and_then(|t| t.split('.').next()?.parse::<u32>().ok());
    let Some(seq) = named.or(open.filter(|n| *n > 0).map(|n| n as u32)) else {
        return Answer::Done; // A bootstrap: attached, parked until a follow-up.
    };
    let cap = me["capability"].clone();
    let worker = me["worker"]["worker_id"].as_str().unwrap().to_owned();
    let newest = me["followups_from"].as_u64().unwrap() as usize + me["followups"].as_array().unwrap().len() - 1;
    if seq as usize != newest {
        return Answer::Done; // Superseded before it was read: the newer wake follows.
    }
    if seq > 1 && !late.contains(&worker) && rng.chance(30) {
        // A late completion of the previous follow-up: refused, closes nothing.
        late.insert(worker.clone());
        let stale = peer.attempt("worker_complete", json!({"capability": cap, "summary": "late", "followup": seq - 1}));
        history.lock().unwrap().record("late_complete", None, &stale);
        if let Attempt::Ok(v) = &stale {
            panic!("a late completion of follow-up {} was accepted after #{seq}: {v}", seq - 1);
        }
    }
    let done =
        peer.attempt("worker_complete", json!({"capability": cap, "summary": format!("done #{seq}"), "followup": seq}));
    history.lock().unwrap().record("worker_complete", None, &done);
    match done {
        Attempt::Ok(_) => Answer::Done,
        // Superseded meanwhile: the newer follow-up's wake follows.
        Attempt::Failed(code, _) if code == "CONFLICT" => Answer::Done,
        // Completed already by an earlier attempt whose answer was lost.
        Attempt::Failed(code, _) if code == "INVALID_TRANSITION" => Answer::Done,
        // The conversation rolled over between this model's attach and its
        // report: the fresh conversation's capsule carries the follow-up,
        // and its model completes it.
        Attempt::Failed(code, _) if code == "CONVERSATION_RETIRED" => Answer::Done,
        Attempt::Failed(code, message) => panic!("worker_complete #{seq}: {code}: {message}"),
        Attempt::Unknown => Answer::Again,
    }
}

/// The driver's view of the run.
struct Driver {
    rng: Rng,
    history: Arc<Mutex<History>>,
    root: Mcp,
    cap: String,
    /// Spawn keys issued, with the worker each ok answer named.
    spawned: BTreeMap<String, Option<String>>,
    /// Follow-up keys issued: (key, worker, instructions) and the seq answered.
    followups: Vec<(String, String, String, Option<u64>)>,
    /// Calls whose outcome was unknown, to retry with the same key.
    unknown: Vec<(&'static str, Value, String)>,
    next: u64,
}

impl Driver {
    fn call(&mut self, tool: &'static str, mut args: Value, key: Option<String>) -> Attempt {
        args["capability"] = json!(self.cap);
        if let Some(key) = &key {
            args["idempotency_key"] = json!(key);
        }
        let outcome = self.root.attempt(tool, args.clone());
        self.history.lock().unwrap().record(tool, key.clone(), &outcome);
        if let (Attempt::Unknown, Some(key)) = (&outcome, key) {
            self.unknown.push((tool, args, key));
        }
        outcome
    }

    fn workers(&self) -> Vec<String> {
        self.spawned.values().flatten().cloned().collect()
    }

    fn note(&mut self, tool: &str, key: &str, outcome: &Attempt) {
        let Attempt::Ok(v) = outcome else { return };
        match tool {
            "worker_spawn" => {
                let id = v["worker"]["worker_id"].as_str().unwrap().to_owned();
                let first = self.spawned.get_mut(key).unwrap();
                assert!(first.as_ref().is_none_or(|f| *f == id), "spawn key {key} named two workers");
                *first = Some(id);
            }
            "worker_followup" => {
                let seq = v["seq"].as_u64().unwrap();
                let entry = self.followups.iter_mut().find(|f| f.0 == key).unwrap();
                assert!(entry.3.is_none_or(|s| s == seq), "follow-up key {key} answered two numbers");
                entry.3 = Some(seq);
            }
            _ => {}
        }
    }

    /// One seeded step of the workload.
    fn step(&mut self, executors: &[Arc<FakeExecutor>]) {
        self.next += 1;
        let n = self.next;
        let workers = self.workers();
        match self.rng.below(100) {
            0..=24 if self.spawned.len() < 24 => {
                let key = format!("spawn-{n}");
                self.spawned.insert(key.clone(), None);
                let args = json!({"name": format!("w{n}"), "assignment": {"objective": format!("work {n}")}});
                let out = self.call("worker_spawn", args, Some(key.clone()));
                self.note("worker_spawn", &key, &out);
            }
            0..=59 if !workers.is_empty() => {
                let worker = workers[self.rng.below(workers.len() as u64) as usize].clone();
                let (key, text) = (format!("fu-{n}"), format!("task {n}"));
                self.followups.push((key.clone(), worker.clone(), text.clone(), None));
                let out =
                    self.call("worker_followup", json!({"worker_id": worker, "instructions": text}), Some(key.clone()));
                self.note("worker_followup", &key, &out);
            }
            60..=69 => {
                let desired = self.rng.below(3);
                let tool = if self.rng.chance(50) { "runtime_ensure" } else { "runtime_scale" };
                self.call(tool, json!({"desired_workers": desired}), None);
            }
            70..=79 => {
                // A pool tab closes, reported one way or the other; recover reopens it.
                let status = self.root.attempt("runtime_status", json!({"capability": self.cap}));
                if let Attempt::Ok(status) = status {
                    let parked: Vec<&Value> =
                        status["slots"].as_array().unwrap().iter().filter(|s| s["health"] == "parked").collect();
                    if !parked.is_empty() {
                        let slot = parked[self.rng.below(parked.len() as u64) as usize];
                        let worker: WorkerId = slot["worker_id"].as_str().unwrap().parse().unwrap();
                        let executor =
                            executors.iter().find(|e| e.stats().conversations.iter().any(|(w, _)| *w == worker));
                        if let Some(executor) = executor {
                            if self.rng.chance(50) {
                                executor.lose_tab(&worker);
                            } else {
                                executor.lose_tab_as_state(&worker);
                            }
                        }
                    }
                }
                self.call("runtime_recover", json!({}), None);
            }
            _ => {
                let key = format!("msg-{n}");
                let body = format!("note {n}");
                self.call("message_broadcast", json!({"kind": "information", "body": body}), Some(key));
            }
        }
    }

    /// Retries every call whose outcome was unknown, with its key: each must
    /// now answer as if it ran once.
    fn retry_unknown(&mut self) {
        for (tool, args, key) in std::mem::take(&mut self.unknown) {
            let outcome = self.root.attempt(tool, args.clone());
            self.history.lock().unwrap().record(tool, Some(key.clone()), &outcome);
            match &outcome {
                Attempt::Unknown => self.unknown.push((tool, args, key)),
                ok @ Attempt::Ok(_) => self.note(tool, &key, ok),
                // A key's retry answers as its first run did, or runs it now:
                // a refusal here means the key lost its effect or its answer.
                Attempt::Failed(code, message) if matches!(tool, "worker_spawn" | "worker_followup") => {
                    panic!("retrying {tool} with key {key} was refused: {code}: {message}")
                }
                Attempt::Failed(..) => {}
            }
        }
    }

    /// The run's events, and the worker list when nothing was appended while
    /// it was read (so the two describe the same moment).
    fn snapshot(&self) -> (Vec<Value>, Option<Value>) {
        let first = self.events();
        let list = self.root.ok("worker_list", json!({"capability": self.cap}));
        let again = self.events();
        let still = first.len() == again.len();
        (again, still.then_some(list))
    }

    fn events(&self) -> Vec<Value> {
        let mut all = Vec::new();
        let mut cursor = 0;
        loop {
            let page =
                self.root.ok("events_list", json!({"capability": self.cap, "after_cursor": cursor, "limit": 500}));
            let events = page["events"].as_array().unwrap();
            if events.is_empty() {
                return all;
            }
            all.extend(events.iter().cloned());
            cursor = page["cursor"].as_u64().unwrap();
        }
    }
}

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_torture_keeps_every_invariant_across_seeded_kills() {
    let seed = env_u64("TORTURE_SEED").unwrap_or(0x7041_7475_7265);
    let kills_wanted = env_u64("TORTURE_KILLS").unwrap_or(20) as usize;
    let minutes = env_u64("TORTURE_MINUTES");
    println!("torture: seed {seed:#x}, {}", minutes.map_or(format!("{kills_wanted} kills"), |m| format!("{m} min")));
    let state = tempfile::tempdir().unwrap();
    let log_path = state.path().join("daemon.log");
    let log = || std::fs::OpenOptions::new().create(true).append(true).open(&log_path).unwrap();
    let mut daemon = Daemon::start_logging_to(state.path(), "127.0.0.1:0", &DAEMON_ARGS, log());
    let addr = daemon.addr.clone();
    let mut rng = Rng(seed);

    // Executor A misbehaves: no resync after reconnecting, and lost idle reports.
    let mut faulty = FakeConfig::new(format!("ws://{addr}/executor"), credential(state.path(), "ext-a"), "ext-a")
        .fault(Fault::NoResync);
    for _ in 0..6 {
        faulty = faulty.fault_after(rng.below(20) as usize, Fault::LoseIdleReport(Op::Send));
    }
    for _ in 0..3 {
        faulty = faulty.fault_after(rng.below(20) as usize, Fault::MissDeadline(Op::Send));
    }
    // Conversations fill up: their workers roll over to fresh ones.
    for _ in 0..2 {
        faulty = faulty.fault_after(rng.below(4) as usize, Fault::ConversationFull(Op::Send));
    }
    faulty.reconnect_delay = Duration::from_millis(50);
    let mut polite = FakeConfig::new(format!("ws://{addr}/executor"), credential(state.path(), "ext-b"), "ext-b");
    polite.reconnect_delay = Duration::from_millis(50);
    let executors = vec![Arc::new(FakeExecutor::start(faulty)), Arc::new(FakeExecutor::start(polite))];

    let target = Arc::new(Target {
        addr: addr.clone(),
        generation: AtomicU64::new(0),
        paused: AtomicBool::new(false),
        holding: AtomicBool::new(false),
    });
    let history = Arc::new(Mutex::new(History::default()));
    let stop = Arc::new(AtomicBool::new(false));
    let models = models(executors.clone(), target.clone(), history.clone(), stop.clone(), seed);

    let root = Mcp::connect(&addr);
    let cap = root.ok("run_create", json!({"title": "torture"}))["root_capability"].as_str().unwrap().to_owned();
    let mut driver = Driver {
        rng: Rng(seed ^ 0x6472_6976_6572),
        history: history.clone(),
        root,
        cap,
        spawned: BTreeMap::new(),
        followups: Vec::new(),
        unknown: Vec::new(),
        next: 0,
    };

    let started = Instant::now();
    let mut kills = 0;
    loop {
        let done = match minutes {
            Some(m) => started.elapsed() >= Duration::from_secs(m * 60),
            None => kills >= kills_wanted,
        };
        if done {
            break;
        }
        for _ in 0..(3 + driver.rng.below(10)) {
            driver.step(&executors);
        }
        // Kill at a seeded moment, while models and executors are busy.
        std::thread::sleep(Duration::from_millis(driver.rng.below(40)));
        // Sometimes hold the models first, so the look after the restart can
        // compare the state rebuilt from the log with the state before.
        let quiet = driver.rng.chance(50);
        if quiet {
            target.paused.store(true, Ordering::SeqCst);
            let deadline = Instant::now() + SETTLE;
            while !target.holding.load(Ordering::SeqCst) {
                // A models thread that died (a model's call refused with a
                // code it did not expect) holds nothing: its panic is the finding.
                if models.is_finished() {
                    std::panic::resume_unwind(models.join().expect_err("the models thread ended early"));
                }
                assert!(Instant::now() < deadline, "the models never held within {SETTLE:?}");
                std::thread::sleep(Duration::from_millis(2));
            }
        }
        let (seen, before) = driver.snapshot();
        daemon.kill();
        kills += 1;
        daemon = Daemon::start_logging_to(state.path(), &addr, &DAEMON_ARGS, log());
        target.generation.fetch_add(1, Ordering::SeqCst);
        driver.root = Mcp::connect(&addr);
        let (now, after) = driver.snapshot();
        assert!(now.len() >= seen.len(), "events lost in kill {kills}");
        assert_eq!(now[..seen.len()], seen[..], "history changed across kill {kills}");
        if let (Some(before), Some(after)) = (before, after)
            && now.len() == seen.len()
        {
            assert_eq!(after, before, "the state rebuilt from the log differs after kill {kills}");
            history.lock().unwrap().rebuilt_checked += 1;
        }
        target.paused.store(false, Ordering::SeqCst);
        driver.retry_unknown();
    }
    history.lock().unwrap().kills = kills;
    assert!(
        history.lock().unwrap().rebuilt_checked > 0 || kills < 5,
        "no kill was quiet enough to compare the rebuilt state: the check never ran"
    );

    // Liveness: after the last restart, with no more kills, everything settles.
    let deadline = Instant::now() + SETTLE;
    loop {
        driver.retry_unknown();
        let list = driver.root.ok("worker_list", json!({"capability": driver.cap}));
        let workers: HashMap<String, Value> = list["workers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|w| (w["worker_id"].as_str().unwrap().to_owned(), w.clone()))
            .collect();
        let events = driver.events();
        let open = open_commands(&events);
        let pending: Vec<&(String, String, String, Option<u64>)> = driver
            .followups
            .iter()
            .filter(|(_, worker, _, seq)| {
                seq.is_some_and(|s| {
                    let completed = events.iter().any(|e| {
                        e["type"] == "worker.completed"
                            && e["data"]["worker_id"] == worker.as_str()
                            && completions_before(&events, e) >= s
                    });
                    !completed && workers.get(worker).is_some_and(|w| w["state"] != "cancelled")
                })
            })
            .collect();
        let unattached = driver.workers().iter().filter(|w| workers[*w]["attach_count"] == 0).count();
        if open.is_empty() && pending.is_empty() && unattached == 0 && driver.unknown.is_empty() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "not settled {SETTLE:?} after the last restart: {} open commands {open:?}, {} follow-ups pending, {unattached} workers never attached",
            open.len(),
            pending.len()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    stop.store(true, Ordering::SeqCst);
    models.join().unwrap();

    let events = driver.events();
    check_history(&driver, &events, &executors);
    let log = std::fs::read_to_string(&log_path).unwrap();
    assert!(!log.contains("panicked"), "the daemon panicked:\n{log}");

    let summary = {
        let h = history.lock().unwrap();
        let effects: usize = executors.iter().map(|e| e.stats().submissions.len()).sum();
        let late = h.calls.iter().filter(|c| c.tool == "late_complete").count();
        let inspects = events.iter().filter(|e| e["data"]["intent"]["op"] == "inspect").count();
        let retried = events
            .iter()
            .filter(|e| e["type"] == "executor.command_queued")
            .filter(|e| e["data"]["idempotency_key"].as_str().is_some_and(|k| k.contains(":attempt")))
            .count();
        let lost: usize = executors.iter().map(|e| e.stats().lost_tabs.len()).sum();
        let reopened: usize = executors.iter().map(|e| e.stats().reopened.len()).sum();
        format!(
            "torture: seed {seed:#x}: {} kills, {} calls ({} ok, {} failed, {} unknown), {} executor effects, {} events, \
         {} workers, {} follow-ups, {} late completions refused, {inspects} inspects of stale states, \
         {retried} wakes sent again after a missed deadline, \
         {lost} tabs lost and {reopened} reopened, {} rebuilt-state checks, {:.0?}: every invariant held",
            h.kills,
            h.calls.len(),
            h.count(|a| matches!(a, Attempt::Ok(_))),
            h.count(|a| matches!(a, Attempt::Failed(..))),
            h.count(|a| matches!(a, Attempt::Unknown)),
            effects,
            events.len(),
            driver.workers().len(),
            driver.followups.iter().filter(|f| f.3.is_some()).count(),
            late,
            h.rebuilt_checked,
            started.elapsed(),
        )
    };
    println!("{summary}");
    for e in executors {
        Arc::into_inner(e).expect("models stopped").stop().await;
    }
}

/// How many follow-ups the worker of completion `event` had when it completed.
fn completions_before(events: &[Value], event: &Value) -> u64 {
    let worker = &event["data"]["worker_id"];
    let at = event["cursor"].as_u64().unwrap();
    events
        .iter()
        .filter(|e| e["type"] == "worker.followup" && e["data"]["worker_id"] == *worker)
        .filter(|e| e["cursor"].as_u64().unwrap() < at)
        .count() as u64
}

/// Commands queued but neither completed nor cancelled.
fn open_commands(events: &[Value]) -> Vec<String> {
    let mut open: Vec<String> = Vec::new();
    for e in events {
        let id = e["data"]["command_id"].as_str().map(str::to_owned);
        match (e["type"].as_str().unwrap(), id) {
            ("executor.command_queued", Some(id)) => open.push(id),
            ("executor.command_completed" | "executor.command_cancelled", Some(id)) => open.retain(|c| *c != id),
            _ => {}
        }
    }
    open
}

/// The safety invariants over the whole history.
fn check_history(driver: &Driver, events: &[Value], executors: &[Arc<FakeExecutor>]) {
    // Every ok answer to one key names the same effect, however often it was retried.
    let mut answers: HashMap<String, Value> = HashMap::new();
    for call in &driver.history.lock().unwrap().calls {
        let (Some(key), Attempt::Ok(v)) = (&call.key, &call.outcome) else { continue };
        let effect = match call.tool {
            "worker_spawn" => v["worker"]["worker_id"].clone(),
            "worker_followup" => v["seq"].clone(),
            _ => v.clone(),
        };
        let first = answers.entry(key.clone()).or_insert_with(|| effect.clone());
        assert_eq!(*first, effect, "key {key} answered two effects");
    }

    gapless(events).unwrap();

    // Once per key: one worker per spawn key (by name), one follow-up per key (by text).
    for (key, worker) in &driver.spawned {
        let name = format!("/root/w{}", key.trim_start_matches("spawn-"));
        let created = events.iter().filter(|e| e["type"] == "worker.created" && e["data"]["path"] == name).count();
        assert!(created <= 1, "spawn key {key} created {created} workers");
        if worker.is_some() {
            assert_eq!(created, 1, "an acknowledged spawn ({key}) is missing");
        }
    }
    for (key, _, text, seq) in &driver.followups {
        let logged = events
            .iter()
            .filter(|e| e["type"] == "worker.followup" && e["data"]["instructions"] == text.as_str())
            .count();
        assert!(logged <= 1, "follow-up key {key} recorded {logged} times");
        if seq.is_some() {
            assert_eq!(logged, 1, "an acknowledged follow-up ({key}) is missing");
        }
    }

    // Exactly once into the conversation: every bootstrap and every
    // follow-up in the log (or a newer one carrying it), submitted once.
    let mut submitted = Submitted::default();
    for executor in executors {
        let stats = executor.stats();
        for (conversation, prompt) in &stats.submissions {
            let worker = stats.conversations.iter().find(|(_, c)| c == conversation).map(|(w, _)| w.to_string());
            let worker = worker.expect("submissions go to created conversations");
            match prompt.split("follow-up #").nth(1).and_then(|t| t.split('.').next()) {
                Some(seq) => *submitted.followups.entry((worker, seq.parse().unwrap())).or_default() += 1,
                None => *submitted.bootstraps.entry(conversation.to_string()).or_default() += 1,
            }
        }
    }
    let tally = exactly_once(events, &submitted);
    assert!(tally.duplicates.is_empty() && tally.lost.is_empty() && tally.stray.is_empty(), "{tally:?}");
    let rollovers = events.iter().filter(|e| e["type"] == "worker.rolled_over").count();
    eprintln!("torture: {rollovers} rollovers of full conversations");
    let conversations: usize = executors.iter().map(|e| e.stats().conversations.len()).sum();
    let creates = events.iter().filter(|e| e["type"] == "conversation.bound").count();
    assert_eq!(conversations, creates, "a conversation was created twice");
}
