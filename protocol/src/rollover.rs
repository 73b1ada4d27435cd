//! Worker rollover: a logical worker outlives its ChatGPT conversation. When
//! a conversation fills up (or root asks, or the context meter passes its
//! threshold) the worker moves to a fresh conversation at the next
//! continuation epoch, carrying a bounded [`Capsule`] composed from the log,
//! never from chat text. The old conversation is retired: left in the
//! browser untouched, its credentials refused with `CONVERSATION_RETIRED`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::ids::ConversationId;

/// The most bytes a capsule takes as JSON: it is delivered whole at attach.
pub const CAPSULE_MAX: usize = 16 * 1024;

/// The most bytes of a worker's own checkpoint note (`worker_checkpoint`).
pub const CHECKPOINT_MAX: usize = 8 * 1024;

/// The most rollovers of one worker: past it, the worker's conversations
/// keep failing as they fill, and a person should look.
pub const ROLLOVERS_MAX: u32 = 64;

/// How many retired conversations a capsule names (the newest).
pub const LINEAGE_KEPT: usize = 16;

/// Why a worker rolled over.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RolloverReason {
    /// ChatGPT said the conversation reached its maximum length.
    TooLong,
    /// The context meter passed the daemon's threshold (`--rollover-at-bytes`).
    ContextMeter,
    /// Root asked (`worker_rollover`).
    Requested,
}

/// One finished piece of work.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Done {
    /// The follow-up it answered (0: the assignment).
    pub followup: u32,
    /// Its completion summary (trimmed to fit the capsule).
    pub summary: String,
}

/// What a worker's fresh conversation is told of its earlier ones, at
/// attach. Composed by the daemon from the log when the worker rolls over;
/// the worker's own note (`worker_checkpoint`) rides in it when it wrote
/// one. At most [`CAPSULE_MAX`] bytes as JSON.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Capsule {
    /// The continuation epoch this conversation carries (1 after the first rollover).
    pub epoch: u32,
    /// Why the worker rolled over.
    pub reason: RolloverReason,
    /// The conversations it worked in before, oldest first (the newest [`LINEAGE_KEPT`]).
    pub lineage: Vec<ConversationId>,
    /// The worker's own last checkpoint note: what is done, what is next.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkpoint: Option<String>,
    /// Its last progress report.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_progress: Option<String>,
    /// What it finished, oldest first (the oldest dropped first to fit).
    pub done: Vec<Done>,
    /// The work still open: 0 for the assignment, n for follow-up n
    /// (their texts come with attach, as always).
    pub open: Vec<u32>,
    /// Its wait for a person or a dependency, if it declared one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waiting: Option<String>,
    /// The run's event cursor when the capsule was written: `events_wait`
    /// after it returns only what came since.
    pub cursor: u64,
}

impl Capsule {
    /// Its size as JSON, the size the bound is about.
    pub fn bytes(&self) -> usize {
        serde_json::to_vec(self).map_or(usize::MAX, |v| v.len())
    }

    /// Cut to [`CAPSULE_MAX`]: the oldest finished work goes first, then
    /// every text is shortened. Nothing but texts and the `done` list shrink.
    pub fn fit(mut self) -> Self {
        while self.bytes() > CAPSULE_MAX && !self.done.is_empty() {
            self.done.remove(0);
        }
        let mut keep = CHECKPOINT_MAX;
        while self.bytes() > CAPSULE_MAX && keep > 64 {
            keep /= 2;
            for text in [&mut self.checkpoint, &mut self.last_progress, &mut self.waiting].into_iter().flatten() {
                shorten(text, keep);
            }
        }
        self
    }
}

/// Cuts `text` to at most `max` bytes at a character boundary, marking the cut.
pub fn shorten(text: &mut String, max: usize) {
    if text.len() <= max {
        return;
    }
    let mut end = max.saturating_sub(3);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text.truncate(end);
    text.push('…');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_capsule_fits_its_bound_by_dropping_old_work_then_shortening_texts() {
        let big = "é".repeat(CHECKPOINT_MAX);
        let capsule = Capsule {
            epoch: 2,
            reason: RolloverReason::TooLong,
            lineage: vec![],
            checkpoint: Some(big.clone()),
            last_progress: Some(big.clone()),
            done: (0..20).map(|n| Done { followup: n, summary: "x".repeat(2000) }).collect(),
            open: vec![20],
            waiting: Some(big),
            cursor: 7,
        };
        let fit = capsule.clone().fit();
        assert!(fit.bytes() <= CAPSULE_MAX, "{}", fit.bytes());
        assert!(fit.checkpoint.as_ref().is_some_and(|c| c.ends_with('…')));
        assert_eq!((fit.epoch, fit.open.clone(), fit.cursor), (2, vec![20], 7));
        let small = Capsule { checkpoint: None, last_progress: None, waiting: None, ..capsule };
        let fit = small.clone().fit();
        assert!(fit.done.len() < 20 && fit.done.last() == small.done.last(), "the newest work stays");
    }

    /// A real-size capsule (a worker three reports in, with a page-long
    /// checkpoint note) fits whole, far under the bound.
    #[test]
    fn a_real_size_capsule_is_kept_whole() {
        let sentence = "Ported the billing module's invoice totals to the new money type and updated its tests. ";
        let capsule = Capsule {
            epoch: 1,
            reason: RolloverReason::TooLong,
            lineage: vec!["0196b2c4-8e1f-7a3b-9c2d-4e5f60718293".parse().unwrap()],
            checkpoint: Some(sentence.repeat(16)),
            last_progress: Some(sentence.repeat(3)),
            done: (0..3).map(|n| Done { followup: n, summary: sentence.repeat(4) }).collect(),
            open: vec![3],
            waiting: None,
            cursor: 412,
        };
        let bytes = capsule.bytes();
        eprintln!("a real-size capsule: {bytes} bytes");
        assert!(bytes < CAPSULE_MAX / 2, "{bytes}");
        assert_eq!(capsule.clone().fit(), capsule);
    }
}
