//! A hostile day (issue 44): a pool of workers kept busy with follow-ups
//! while a seeded random sequence of what a person's browser and machine
//! do falls on them: the extension's background stopped, tabs discarded,
//! frozen, moved between windows, hidden and closed, the browser asleep
//! and crashed (its tabs restored or not), and the daemon SIGKILLed as the
//! crash torture does it. A person's own chat stays open beside them.
//! At the end the history is checked as the torture's is
//! ([`crate::history`]): a gapless log, every bootstrap and follow-up into
//! its conversation exactly once (fakechat's oracle counts the prompts),
//! no follow-up waiting longer than [`STALL`], and the person's chat
//! untouched.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::time::{Duration, Instant};

use anyhow::Context;
use mcp_client::Client;
use serde_json::{Value, json};

use super::{Outcome, Root, all_idle};
use crate::history::{Rng, Submitted, Tally, exactly_once, gapless};
use crate::lifecycle::{ChromiumLifecycle, Lifecycle};
use crate::person::{ChromiumHands, Person, Place};

/// The longest a follow-up may take from asked to completed, whatever fell
/// on it: the longest disruption (the browser asleep 20 s, or crashed and
/// started again), the reconnect backoff's cap (10 s), a recheck, a turn.
pub const STALL: Duration = Duration::from_secs(150);

/// How long the test's hands get for one act on a tab (a frozen page may
/// never answer a look).
const HANDS: Duration = Duration::from_secs(20);

/// A day: its seed, its length and its pool.
#[derive(Debug, Clone, Copy)]
pub struct Day {
    pub seed: u64,
    pub length: Duration,
    pub workers: usize,
}

/// What falls on the pool during the day.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Disruption {
    /// The browser stops the extension's service worker.
    BackgroundStopped,
    /// Memory Saver discards a worker's tab.
    TabDiscarded,
    /// Energy Saver freezes a worker's tab for 2–20 s (until a person
    /// shows it).
    TabFrozen,
    /// A person drags a worker's tab to another window, or hides it.
    TabMoved,
    /// A person closes a worker's tab.
    TabClosed,
    /// The machine sleeps: every browser process stopped for 2–20 s.
    BrowserAsleep,
    /// The browser crashes and is started again, its tabs restored or not.
    BrowserCrashed,
    /// The daemon is SIGKILLed and started again 0–4 s later.
    DaemonKilled,
}

/// The disruptions and their weights (a browser crash costs the most time).
const DISRUPTIONS: [(Disruption, u64); 8] = [
    (Disruption::BackgroundStopped, 3),
    (Disruption::TabDiscarded, 3),
    (Disruption::TabFrozen, 2),
    (Disruption::TabMoved, 3),
    (Disruption::TabClosed, 2),
    (Disruption::BrowserAsleep, 2),
    (Disruption::BrowserCrashed, 1),
    (Disruption::DaemonKilled, 3),
];

/// A disruption drawn by its weight.
fn weighted(rng: &mut Rng) -> Disruption {
    let mut pick = rng.below(DISRUPTIONS.iter().map(|(_, w)| w).sum());
    for (what, weight) in DISRUPTIONS {
        match pick.checked_sub(weight) {
            Some(rest) => pick = rest,
            None => return what,
        }
    }
    unreachable!("the pick is below the weights' sum")
}

/// A day's figures.
#[derive(Debug)]
pub struct Soak {
    pub day: Day,
    /// Disruptions made, by kind.
    pub made: BTreeMap<Disruption, usize>,
    /// Disruptions the test's hands could not make at that moment (the tab
    /// was closed, frozen or not yet open again), by kind.
    pub not_made: BTreeMap<Disruption, usize>,
    /// Follow-ups asked for (the bootstraps not counted).
    pub asked: usize,
    /// Follow-ups that never completed within [`STALL`] of the day's end.
    pub unfinished: Vec<String>,
    /// From each follow-up asked to its worker's completion, sorted.
    pub back: Vec<Duration>,
    /// What the daemon's log shows of its recoveries: commands that failed
    /// (by code), tabs it saw closed or drifting, stalls it reported.
    pub recoveries: BTreeMap<String, usize>,
    /// Exactly once, from the oracle.
    pub tally: Tally,
    /// User turns in the person's own chat (one: theirs).
    pub person_turns: usize,
    /// How long the whole run took, settling included.
    pub took: Duration,
    /// The run's events, one line each, for a day that went wrong.
    pub trace: Vec<String>,
}

impl Soak {
    /// The `q` quantile (0..=1) of the time back to working.
    pub fn back_at(&self, q: f64) -> Duration {
        let Some(last) = self.back.len().checked_sub(1) else { return Duration::ZERO };
        self.back[((last as f64) * q).round() as usize]
    }

    /// What broke an invariant; empty on a good day.
    pub fn problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        if !self.tally.duplicates.is_empty() {
            problems.push(format!("prompts went in more than once: {:?}", self.tally.duplicates));
        }
        if !self.tally.stray.is_empty() {
            problems.push(format!("wakes named follow-ups their worker never had: {:?}", self.tally.stray));
        }
        if !self.tally.lost.is_empty() {
            problems.push(format!("follow-ups never went in: {:?}", self.tally.lost));
        }
        if !self.unfinished.is_empty() {
            problems.push(format!("follow-ups never completed: {:?}", self.unfinished));
        }
        if let Some(longest) = self.back.last().filter(|b| **b > STALL) {
            problems.push(format!("a follow-up took {longest:?}, past the stall bound {STALL:?}"));
        }
        for (what, tried) in &self.not_made {
            if *tried >= 3 && !self.made.contains_key(what) {
                problems.push(format!("{what:?} was tried {tried} times and never made (see the trace)"));
            }
        }
        if self.person_turns != 1 {
            problems.push(format!("the person's own chat has {} user turns, not their one", self.person_turns));
        }
        problems
    }
}

impl fmt::Display for Soak {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Day { seed, length, workers } = self.day;
        writeln!(f, "soak: seed {seed}, {} min, {workers} workers, took {:.0?}", length.as_secs() / 60, self.took)?;
        writeln!(f, "  disruptions made: {:?}", self.made)?;
        writeln!(f, "  not made (no tab to act on): {:?}", self.not_made)?;
        writeln!(
            f,
            "  follow-ups: {} asked, {} delivered once, {} carried by a newer one, {} duplicates, {} lost, {} stray, {} unfinished",
            self.asked,
            self.tally.delivered,
            self.tally.carried,
            self.tally.duplicates.len(),
            self.tally.lost.len(),
            self.tally.stray.len(),
            self.unfinished.len()
        )?;
        writeln!(
            f,
            "  back to working (asked -> completed): p50 {:.1?}, p99 {:.1?}, max {:.1?}",
            self.back_at(0.5),
            self.back_at(0.99),
            self.back.last().copied().unwrap_or_default()
        )?;
        write!(f, "  recoveries in the daemon's log: {:?}", self.recoveries)
    }
}

/// Follow-ups asked and not yet completed: worker → (summary, when asked).
type Open = HashMap<String, (String, Instant)>;

/// Reads the run's events for `span`, closing the follow-ups whose
/// completion arrives.
async fn look(
    root: &mut Root,
    out: &mut Outcome,
    open: &mut Open,
    back: &mut Vec<Duration>,
    span: Duration,
) -> anyhow::Result<()> {
    let until = Instant::now() + span;
    loop {
        let left = until.saturating_duration_since(Instant::now()).as_millis().clamp(1, 5000) as u64;
        let page = root.call("events_wait", json!({"after_cursor": root.cursor, "timeout_ms": left})).await?;
        for event in page["events"].as_array().into_iter().flatten() {
            root.note(out, event);
            let worker = event["data"]["worker_id"].as_str().unwrap_or_default();
            let done = event["type"] == "worker.completed"
                && open.get(worker).is_some_and(|(summary, _)| event["data"]["summary"] == summary.as_str());
            if let Some((_, asked)) = done.then(|| open.remove(worker)).flatten() {
                back.push(asked.elapsed());
            }
        }
        root.cursor = page["cursor"].as_u64().unwrap_or(root.cursor);
        if Instant::now() >= until {
            return Ok(());
        }
    }
}

/// Whether a disruption was made, or why the test's hands could not make
/// it (a tab already closed, frozen or not open again yet).
type Made = Result<(), String>;

/// Makes one disruption. Errors are the rig's own (the daemon or the
/// browser would not start again).
async fn disrupt(
    world: &mut crate::World,
    root: &mut Root,
    what: Disruption,
    conversation: Option<&str>,
    rng: &mut Rng,
) -> anyhow::Result<Made> {
    let hands = async |act: crate::person::Act<'_, ()>| -> anyhow::Result<Made> {
        Ok(match tokio::time::timeout(HANDS, act).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(format!("{e:#}")),
            Err(_) => Err(format!("no answer within {HANDS:?}")),
        })
    };
    match (what, conversation) {
        (Disruption::BackgroundStopped, _) => hands(ChromiumLifecycle(&world.chromium).stop_background()).await,
        (Disruption::TabDiscarded, Some(c)) => hands(ChromiumLifecycle(&world.chromium).discard(c)).await,
        (Disruption::TabFrozen, Some(c)) => {
            if let Err(why) = hands(ChromiumLifecycle(&world.chromium).freeze(c, true)).await? {
                return Ok(Err(why));
            }
            // A page frozen mid-turn is left for a person (reloading it
            // could lose what they typed): they show the tab, and the
            // browser thaws it (a reloaded page is not frozen any more).
            tokio::time::sleep(Duration::from_millis(2_000 + rng.below(18_000))).await;
            let _ = hands(ChromiumLifecycle(&world.chromium).freeze(c, false)).await;
            Ok(Ok(()))
        }
        (Disruption::TabClosed, Some(c)) => hands(ChromiumHands(&world.chromium).close(c)).await,
        (Disruption::TabMoved, Some(c)) => {
            let to = [Place::NewWindow, Place::Minimized, Place::Covered, Place::Back][rng.below(4) as usize];
            let mut person = ChromiumHands(&world.chromium);
            Ok(match tokio::time::timeout(HANDS, person.place(c, to)).await {
                Ok(Ok(p)) if p.same_tab => Ok(()),
                Ok(Ok(p)) => Err(format!("{to:?}: {p:?}")),
                Ok(Err(e)) => Err(format!("{to:?}: {e:#}")),
                Err(_) => Err(format!("{to:?}: no answer within {HANDS:?}")),
            })
        }
        (Disruption::TabDiscarded | Disruption::TabFrozen | Disruption::TabClosed | Disruption::TabMoved, None) => {
            Ok(Err("the worker has no conversation yet".into()))
        }
        (Disruption::BrowserAsleep, _) => {
            let sleeper = crate::browser::Sleeper::of(world.chromium.main_pid().await?);
            sleeper.asleep(true)?;
            tokio::time::sleep(Duration::from_millis(2_000 + rng.below(18_000))).await;
            sleeper.asleep(false)?;
            Ok(Ok(()))
        }
        (Disruption::BrowserCrashed, _) => {
            world.chromium.crash().await?;
            tokio::time::sleep(Duration::from_millis(rng.below(3_000))).await;
            let (dist, port, profile) =
                (crate::chromium_dist()?, world.fake.addr.port(), world.dir.path().join("chromium"));
            world.chromium = crate::Chromium::relaunch(&dist, port, &profile, rng.chance(50)).await?;
            anyhow::ensure!(
                world.chromium.wait_connected(Duration::from_secs(60)).await,
                "the extension never reconnected after the browser started again"
            );
            Ok(Ok(()))
        }
        (Disruption::DaemonKilled, _) => {
            world.daemon.kill();
            tokio::time::sleep(Duration::from_millis(rng.below(4_000))).await;
            world.daemon.start_again()?;
            root.client = Client::connect(&world.daemon.mcp_url()).await?;
            Ok(Ok(()))
        }
    }
}

/// What the log shows of the daemon's recoveries.
fn recoveries(events: &[Value]) -> BTreeMap<String, usize> {
    let mut seen = BTreeMap::new();
    for e in events {
        let data = &e["data"];
        let kind = match e["type"].as_str().unwrap_or_default() {
            "executor.command_completed" if data["outcome"]["status"] != "ok" => {
                let code = data["outcome"]["code"].as_str().or(data["outcome"]["error"]["code"].as_str());
                format!("command failed {}", code.unwrap_or("?"))
            }
            "conversation.closed" => "tab closed".to_owned(),
            "conversation.error" => format!("page error {}", data["code"].as_str().unwrap_or("?")),
            kind if kind.starts_with("continuation.") => kind.to_owned(),
            _ => continue,
        };
        *seen.entry(kind).or_default() += 1;
    }
    seen
}

/// Runs the day on `world` (the daemon, fakechat and a paired Chromium),
/// then lets the pool settle and checks the history. The figures come back
/// whatever they show; [`Soak::problems`] says what broke.
pub async fn hostile_day(world: &mut crate::World, day: Day) -> anyhow::Result<Soak> {
    let started = Instant::now();
    let hub = world.fake.hub.clone();
    let mut rng = Rng(day.seed);
    let mine = world.chromium.open("https://chatgpt.com/").await?;
    let person = crate::browser::chat_by_hand(&mine, "a person's own chat, all day").await?;
    let mut root = Root::start(&world.daemon.mcp_url(), "hostile day").await?;
    let mut out = Outcome::default();
    let (mut open, mut back) = (Open::new(), Vec::new());
    let mut workers = Vec::new();
    for i in 0..day.workers {
        let worker = root.spawn(&mut out, &format!("day{i}"), r#"complete "first""#).await?;
        open.insert(worker.clone(), ("first".to_owned(), Instant::now()));
        workers.push(worker);
    }
    // The day starts with the pool working (a create interrupted by a
    // crash fails closed, `launch_failed`, and waits for root).
    while !open.is_empty() {
        look(&mut root, &mut out, &mut open, &mut back, Duration::from_secs(1)).await?;
        anyhow::ensure!(started.elapsed() < STALL, "the pool never bootstrapped: {open:?}");
    }
    back.clear();
    let (mut made, mut not_made, mut asked) = (BTreeMap::new(), BTreeMap::new(), 0);
    let end = Instant::now() + day.length;
    while Instant::now() < end {
        // One draw of the day's generator per step, whichever way it goes:
        // the steps' draws are fixed by the seed (what each step meets
        // still depends on timing).
        let mut rng = Rng(rng.next_u64());
        // Mostly to an idle worker; sometimes to a busy one, whose newer
        // follow-up carries the older (the model reads the latest).
        let to_busy = rng.chance(20);
        let idle: Vec<&String> = workers.iter().filter(|w| to_busy || !open.contains_key(*w)).collect();
        if !idle.is_empty() && rng.chance(50) {
            let worker = idle[rng.below(idle.len() as u64) as usize].clone();
            asked += 1;
            let summary = format!("day {asked}");
            // Some turns last long enough for a disruption to fall inside them.
            let script = match rng.chance(30) {
                true => format!("progress \"on {asked}\"; sleep 3s; complete \"{summary}\""),
                false => format!("complete \"{summary}\""),
            };
            root.call(
                "worker_followup",
                json!({"worker_id": worker, "instructions": format!("Go on.\nscenario: {script}")}),
            )
            .await?;
            // A carried follow-up counts from when the older was asked.
            let since = open.get(&worker).map_or_else(Instant::now, |(_, at)| *at);
            open.insert(worker, (summary, since));
        } else {
            let what = weighted(&mut rng);
            let target = workers[rng.below(workers.len() as u64) as usize].clone();
            let conversation = out.bound.iter().rev().find(|(w, _)| *w == target).map(|(_, c)| c.clone());
            let did = disrupt(world, &mut root, what, conversation.as_deref(), &mut rng)
                .await
                .with_context(|| format!("{what:?}"))?;
            let at = fakechat::hub::now_ms().saturating_sub(root.started_ms) as f64 / 1000.0;
            let why = did.as_ref().err().map(|w| format!(" (not made: {w})")).unwrap_or_default();
            out.trace.push(format!("{at:>7.2}s  -- {what:?}{why}"));
            let count = if did.is_ok() { &mut made } else { &mut not_made };
            *count.entry(what).or_insert(0) += 1;
        }
        let pause = Duration::from_millis(500 + rng.below(2_500));
        look(&mut root, &mut out, &mut open, &mut back, pause).await?;
    }
    // The day is over: everything asked completes within the stall bound.
    let settle = Instant::now() + STALL;
    while !open.is_empty() && Instant::now() < settle {
        look(&mut root, &mut out, &mut open, &mut back, Duration::from_secs(1)).await?;
    }
    let conversations: Vec<String> = out.bound.iter().map(|(_, c)| c.clone()).collect();
    if open.is_empty() {
        all_idle(&hub, &conversations, STALL).await?;
    }
    let events = root.log_of_run().await?;
    gapless(&events).map_err(anyhow::Error::msg)?;
    let bound: HashMap<String, String> = out.bound.iter().map(|(w, c)| (c.clone(), w.clone())).collect();
    let oracle = hub.oracle();
    back.sort();
    Ok(Soak {
        day,
        made,
        not_made,
        asked,
        unfinished: open.into_iter().map(|(w, (summary, _))| format!("{w}: {summary}")).collect(),
        back,
        recoveries: recoveries(&events),
        tally: exactly_once(&events, &Submitted::from_oracle(&oracle, &bound)),
        person_turns: oracle["conversations"][&person]["user_turns"].as_array().map_or(0, Vec::len),
        took: started.elapsed(),
        trace: out.trace,
    })
}
