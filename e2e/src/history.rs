//! The history checks that long seeded runs share (the crash torture over
//! fake executors, the hostile day in a real browser): a seeded schedule,
//! a gapless log, and each follow-up submitted into its worker's
//! conversation exactly once.

use std::collections::{BTreeMap, HashMap};

use serde_json::Value;

/// SplitMix64: a tiny seeded generator, so a schedule reproduces from its seed.
pub struct Rng(pub u64);

impl Rng {
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (`n` > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }

    /// True `percent` times in a hundred.
    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

/// Checks that the log's cursors are `1..=head`.
pub fn gapless(events: &[Value]) -> Result<(), String> {
    let cursors: Vec<u64> = events.iter().map(|e| e["cursor"].as_u64().unwrap_or(0)).collect();
    match cursors.iter().zip(1..).find(|(c, want)| **c != *want) {
        Some((c, want)) => Err(format!("the log's cursors have a gap: {c} where {want} belongs")),
        None => Ok(()),
    }
}

/// How often each prompt went into a conversation, as the executors or the
/// site saw it.
#[derive(Debug, Default)]
pub struct Submitted {
    /// Wake prompts, by worker and the follow-up they name.
    pub followups: HashMap<(String, u64), usize>,
    /// Bootstrap prompts, by conversation (a rolled-over worker has several
    /// conversations, each bootstrapped once).
    pub bootstraps: HashMap<String, usize>,
}

impl Submitted {
    /// What fakechat's oracle counted, its conversations mapped to their
    /// workers by `bound` (conversation id → worker id).
    pub fn from_oracle(oracle: &Value, bound: &HashMap<String, String>) -> Submitted {
        let mut submitted = Submitted::default();
        let conversations = oracle["conversations"].as_object().into_iter().flatten();
        for (conversation, state) in conversations.filter(|(c, _)| bound.contains_key(*c)) {
            for turn in state["user_turns"].as_array().into_iter().flatten() {
                if turn["bootstrap"] == true {
                    *submitted.bootstraps.entry(conversation.clone()).or_default() += 1;
                } else if let Some(seq) = turn["followup"].as_u64() {
                    *submitted.followups.entry((bound[conversation].clone(), seq)).or_default() += 1;
                }
            }
        }
        submitted
    }
}

/// What [`exactly_once`] found.
#[derive(Debug, Default)]
pub struct Tally {
    /// Follow-ups submitted once.
    pub delivered: usize,
    /// Follow-ups never submitted themselves but carried by a newer one of
    /// the same worker, or by a rollover (the fresh conversation reads them).
    pub carried: usize,
    /// Prompts submitted more than once (`worker#seq` or a conversation's
    /// bootstrap), with their counts.
    pub duplicates: BTreeMap<String, usize>,
    /// Follow-ups in the log that never went in and nothing carried.
    pub lost: Vec<String>,
    /// Wakes naming a follow-up the log does not hold for that worker (a
    /// prompt typed into the wrong conversation, or one made up).
    pub stray: Vec<String>,
}

/// Every bootstrap went in once; every follow-up in the log (its
/// `worker.followup` events) went in once, or, its wake having missed its
/// deadline, a newer follow-up of the same worker went in once (the newer
/// wake carries it: the model reads every follow-up on attach), or a
/// rollover after it carried it.
pub fn exactly_once(events: &[Value], submitted: &Submitted) -> Tally {
    let mut tally = Tally::default();
    for (conversation, n) in submitted.bootstraps.iter().filter(|(_, n)| **n != 1) {
        tally.duplicates.insert(format!("the bootstrap of {conversation}"), *n);
    }
    let mut newest: BTreeMap<&str, u64> = BTreeMap::new();
    for e in events.iter().filter(|e| e["type"] == "worker.followup") {
        *newest.entry(e["data"]["worker_id"].as_str().unwrap_or_default()).or_default() += 1;
    }
    let rolled_after = |worker: &str, seq: u64| {
        let at = events.iter().position(|e| {
            e["type"] == "worker.followup" && e["data"]["worker_id"] == worker && e["data"]["seq"] == seq
        });
        at.is_some_and(|at| {
            events[at..].iter().any(|e| e["type"] == "worker.rolled_over" && e["data"]["worker_id"] == worker)
        })
    };
    for (worker, seq) in submitted.followups.keys() {
        if !newest.get(worker.as_str()).is_some_and(|n| (1..=*n).contains(seq)) {
            tally.stray.push(format!("{worker}#{seq}"));
        }
    }
    tally.stray.sort();
    for (worker, newest) in newest {
        let times = |seq: u64| submitted.followups.get(&(worker.to_owned(), seq)).copied().unwrap_or(0);
        for seq in 1..=newest {
            match times(seq) {
                1 => tally.delivered += 1,
                0 if (seq + 1..=newest).any(|later| times(later) == 1) || rolled_after(worker, seq) => {
                    tally.carried += 1
                }
                0 => tally.lost.push(format!("{worker}#{seq}")),
                n => {
                    tally.duplicates.insert(format!("{worker}#{seq}"), n);
                }
            }
        }
    }
    tally
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn followup(cursor: u64, worker: &str, seq: u64) -> Value {
        json!({"cursor": cursor, "type": "worker.followup", "data": {"worker_id": worker, "seq": seq}})
    }

    #[test]
    fn a_gap_in_the_cursors_is_named() {
        assert!(gapless(&[followup(1, "w", 1), followup(2, "w", 2)]).is_ok());
        assert!(gapless(&[followup(1, "w", 1), followup(3, "w", 2)]).unwrap_err().contains("3 where 2"));
    }

    #[test]
    fn once_carried_doubled_and_lost_are_told_apart() {
        let events = [followup(1, "a", 1), followup(2, "a", 2), followup(3, "b", 1), followup(4, "c", 1)];
        let mut submitted = Submitted::default();
        submitted.followups.insert(("a".into(), 2), 1);
        submitted.followups.insert(("b".into(), 1), 2);
        submitted.followups.insert(("b".into(), 7), 1);
        submitted.bootstraps.insert("conv".into(), 1);
        let tally = exactly_once(&events, &submitted);
        assert_eq!((tally.delivered, tally.carried), (1, 1), "{tally:?}");
        assert_eq!(tally.duplicates.get("b#1"), Some(&2));
        assert_eq!(tally.lost, ["c#1"]);
        assert_eq!(tally.stray, ["b#7"]);
    }
}
