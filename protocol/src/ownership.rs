//! Worktree ownership provenance: which worker, execution session and
//! ChatGPT conversation hold a Git worktree, and what it submitted and
//! landed. Only normalised facts are kept (absolute paths, branch names,
//! commit ids, ids): no chat text, no title, no credential. Git is read and
//! written behind an adapter (the `worktrees` crate), never by the core, and
//! a conversation's identity comes only from its executor's binding, never
//! from a caller.
//!
//! A record's lifecycle (SPEC §5d):
//!
//! ```text
//! provisional -> active -> submitted -> landed -> removed
//!                   |  \-> released
//!                   |  \-> handing_off -> active (the new holder)
//!                   \-> (stale: its holder proven dead) -> reclaimed -> active
//! ```

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::ids::{ConversationId, OwnershipId, RunId, WorkerId};

/// Longest execution-session id, in bytes.
pub const SESSION_MAX: usize = 128;
/// Longest normalised path (a worktree, a repository), in bytes.
pub const PATH_MAX: usize = 4096;
/// Longest branch or ref name, in bytes.
pub const REF_MAX: usize = 255;
/// Longest lane, plan or request label, in bytes.
pub const LABEL_MAX: usize = 256;
/// Longest release reason, in bytes.
pub const REASON_MAX: usize = 1024;
/// Sessions and conversations kept per holding, and WIP refs per record (the newest).
pub const KEPT: usize = 16;
/// Most holders one record may have (handoffs and reclaims); a worktree
/// passed on more often is released and claimed afresh.
pub const HOLDERS_MAX: usize = 64;
/// A holder that has not been heard from (claim, heartbeat, any change) for
/// this long is stale: its worktree may be reclaimed.
pub const LEASE_MS: u64 = 15 * 60 * 1000;

/// An execution session: one run of a local agent (a shell, a coding
/// agent) acting for a worker. Not a conversation: a worker's conversation
/// may drive many sessions, and a resumed session names its parent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Session {
    /// Stable for the session: 1-128 bytes of `A-Z a-z 0-9 . _ : @ / + -`.
    pub id: String,
    /// The session this one resumes or was started by.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,
}

impl Session {
    /// Why the session cannot be recorded, if it cannot.
    pub fn check(&self) -> Result<(), String> {
        for (field, id) in [("session", Some(&self.id)), ("parent_session", self.parent.as_ref())] {
            if let Some(id) = id
                && !valid_session_id(id)
            {
                return Err(format!(
                    "{field} must be 1-{SESSION_MAX} bytes of A-Z a-z 0-9 . _ : @ / + -, and no credential"
                ));
            }
        }
        Ok(())
    }
}

/// Whether `id` can name an execution session.
pub fn valid_session_id(id: &str) -> bool {
    (1..=SESSION_MAX).contains(&id.len())
        && id.bytes().all(|b| b.is_ascii_alphanumeric() || b"._:@/+-".contains(&b))
        && !credential_shaped(id)
}

/// Whether `text` holds what looks like a worker's credential (`cap_` or
/// `att_` starting a word, then the 32 hex digits of a worker id): labels
/// and sessions are written into Git config, which anyone who can read the
/// repository reads.
pub fn credential_shaped(text: &str) -> bool {
    let lower = text.to_ascii_lowercase();
    let bytes = lower.as_bytes();
    ["cap_", "att_"].iter().any(|prefix| {
        lower.match_indices(prefix).any(|(at, _)| {
            let id = bytes.get(at + 4..at + 36);
            (at == 0 || !bytes[at - 1].is_ascii_alphanumeric())
                && id.is_some_and(|id| id.iter().all(u8::is_ascii_hexdigit))
        })
    })
}

/// Whether `commit` is a full Git object id (SHA-1 or SHA-256, lowercase).
pub fn valid_commit(commit: &str) -> bool {
    matches!(commit.len(), 40 | 64) && commit.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// Whether `name` is a plausible branch or ref name (the adapter asks Git
/// for the exact rule): bounded, no control characters, spaces, `..`, or
/// leading `-`.
pub fn valid_ref(name: &str) -> bool {
    (1..=REF_MAX).contains(&name.len())
        && !name.starts_with('-')
        && !name.contains("..")
        && !name.bytes().any(|b| b.is_ascii_control() || b == b' ' || b"~^:?*[\\".contains(&b))
}

/// Whether `path` is absolute and normalised (no `.`/`..` parts, no empty
/// parts, no trailing `/`), bounded, without control characters.
pub fn valid_path(path: &str) -> bool {
    path.len() <= PATH_MAX
        && path.starts_with('/')
        && !path.chars().any(char::is_control)
        && (path == "/" || path[1..].split('/').all(|part| !matches!(part, "" | "." | "..")))
}

/// The canonical URL of a conversation.
pub fn conversation_url(id: &ConversationId) -> String {
    format!("https://chatgpt.com/c/{id}")
}

/// Whether `url` is the URL of conversation `id` (`/c/<id>`, optionally
/// under a project `/g/<project>/c/<id>`): a binding whose URL names
/// another conversation is not an identity.
pub fn url_names(url: &str, id: &ConversationId) -> bool {
    let Some(rest) = url.strip_prefix("https://chatgpt.com/").or_else(|| url.strip_prefix("https://chat.openai.com/"))
    else {
        return false;
    };
    let path = rest.split(['?', '#']).next().unwrap_or_default();
    let parts: Vec<&str> = path.split('/').collect();
    match parts.as_slice() {
        ["c", uuid] | ["g", _, "c", uuid] => *uuid == id.as_str(),
        _ => false,
    }
}

/// A Git worktree as the adapter read it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Worktree {
    /// The repository: its common Git directory, normalised.
    pub repo: String,
    /// The worktree's top-level directory, normalised.
    pub path: String,
    /// Its checked-out branch (`refs/heads/` stripped); absent when detached.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub branch: Option<String>,
    /// Its HEAD commit; absent before the first commit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub head: Option<String>,
}

impl Worktree {
    /// Why these facts cannot be recorded, if they cannot.
    pub fn check(&self) -> Result<(), String> {
        if !valid_path(&self.repo) || !valid_path(&self.path) {
            return Err(format!(
                "repository and worktree must be normalised absolute paths of at most {PATH_MAX} bytes"
            ));
        }
        if self.branch.as_deref().is_some_and(|b| !valid_ref(b)) {
            return Err("the branch name is not a valid ref name".into());
        }
        if self.head.as_deref().is_some_and(|h| !valid_commit(h)) {
            return Err("HEAD must be a full commit id".into());
        }
        Ok(())
    }
}

/// What the work is for, in the caller's own terms (lane, plan, request).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Labels {
    /// The lane (a line of work).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lane: Option<String>,
    /// The plan reference.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan: Option<String>,
    /// The request reference.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request: Option<String>,
}

impl Labels {
    /// Why the labels cannot be recorded, if they cannot.
    pub fn check(&self) -> Result<(), String> {
        for (field, label) in [("lane", &self.lane), ("plan", &self.plan), ("request", &self.request)] {
            if let Some(label) = label
                && (label.is_empty()
                    || label.len() > LABEL_MAX
                    || label.chars().any(|c| c.is_control() || bidi(c))
                    || credential_shaped(label))
            {
                return Err(format!(
                    "{field} must be 1-{LABEL_MAX} bytes without control or bidirectional-override characters or a credential"
                ));
            }
        }
        Ok(())
    }
}

/// Whether `c` reorders the text around it (bidirectional embeddings,
/// overrides, isolates and marks): a label showing one can read as another.
pub(crate) fn bidi(c: char) -> bool {
    matches!(c, '\u{200e}' | '\u{200f}' | '\u{061c}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// A preserved work-in-progress snapshot: a commit of the worktree's
/// files (tracked and untracked) under a ref of its own, the worktree and
/// its index untouched.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Wip {
    /// The ref holding it, `refs/orchestrator/wip/<ownership>/<n>`.
    pub ref_name: String,
    /// The snapshot commit.
    pub commit: String,
    /// When it was taken (ms since epoch).
    pub at_ms: u64,
}

/// The submit receipt: what was handed in for landing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Submitted {
    /// The branch submitted.
    pub branch: String,
    /// Its head then: the source commit.
    pub head: String,
    /// The submitting worker.
    pub worker_id: WorkerId,
    /// The submitting execution session.
    pub session: String,
    /// When (ms since epoch).
    pub at_ms: u64,
}

/// The land receipt: the source commit reached the target branch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Landed {
    /// The target branch (`main`).
    pub into: String,
    /// The target branch's commit that contains the source head.
    pub commit: String,
    /// The submitted source commit.
    pub source_head: String,
    /// Who recorded the landing.
    pub by: WorkerId,
    /// When (ms since epoch).
    pub at_ms: u64,
}

/// Where a record is in its lifecycle.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum OwnershipState {
    /// Claimed by a worker whose conversation is not bound yet.
    Provisional,
    /// Held, with its holder's conversation known (or none to know).
    Active,
    /// Its holder offered it to another worker, who has not accepted yet.
    HandingOff,
    /// Its branch was submitted for landing.
    Submitted,
    /// Its source commit reached the target branch.
    Landed,
    /// Given up by its holder; the worktree is free.
    Released,
    /// The worktree is gone; the provenance stays.
    Removed,
}

impl OwnershipState {
    /// Whether the worktree is held: nobody else may claim it.
    pub fn is_live(self) -> bool {
        matches!(self, Self::Provisional | Self::Active | Self::HandingOff | Self::Submitted)
    }
}

/// How a holder came to hold a record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Via {
    /// It claimed the worktree.
    Claimed,
    /// The previous holder handed it over.
    Handoff,
    /// It reclaimed it from a holder proven dead.
    Reclaimed,
}

/// Why a holder is proven dead, so its worktree may be reclaimed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum StaleReason {
    /// Its worker failed or was cancelled (or never launched), or its run ended.
    HolderEnded,
    /// Nothing from it for [`LEASE_MS`].
    LeaseLapsed,
}

/// One worker's tenure of a record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Holding {
    /// The worker.
    pub worker_id: WorkerId,
    /// Its run.
    pub run_id: RunId,
    /// How it came to hold it.
    pub via: Via,
    /// Its execution sessions on this worktree, oldest first (the newest [`KEPT`]).
    pub sessions: Vec<Session>,
    /// Its conversations while it held it, as their executors bound them,
    /// oldest first (a rollover adds one; the newest [`KEPT`]). Empty: not
    /// known yet, or a worker without a managed conversation.
    pub conversations: Vec<ConversationId>,
    /// Since when (ms since epoch).
    pub since_ms: u64,
    /// Until when, once it passed the record on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until_ms: Option<u64>,
}

/// One ownership record, as the ownership log folds to it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Record {
    /// Its id.
    pub id: OwnershipId,
    /// Where it is in its lifecycle.
    pub state: OwnershipState,
    /// The worktree as claimed.
    pub worktree: Worktree,
    /// What the work is for.
    pub labels: Labels,
    /// Its holders, oldest first; the last holds it now (or last did).
    pub holders: Vec<Holding>,
    /// The worker it is being handed to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub handoff_to: Option<WorkerId>,
    /// When it was claimed.
    pub claimed_at_ms: u64,
    /// When its holder was last heard from.
    pub last_seen_ms: u64,
    /// Work in progress preserved, oldest first (the newest [`KEPT`]).
    pub wip: Vec<Wip>,
    /// The submit receipt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub submitted: Option<Submitted>,
    /// The land receipt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub landed: Option<Landed>,
    /// Why it was released, once released.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub released: Option<String>,
    /// When its worktree was found gone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub removed_at_ms: Option<u64>,
    /// The record this worktree had before (released or landed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous: Option<OwnershipId>,
}

impl Record {
    /// The current (or last) holder.
    pub fn holder(&self) -> &Holding {
        self.holders.last().expect("a record is created with its first holder")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 43: labels are bounded, and hold no control or bidirectional
    /// character (written into Git config, shown by `who`).
    #[test]
    fn labels_refuse_control_and_bidi_characters_and_the_oversized() {
        let with = |lane: &str| Labels { lane: Some(lane.into()), ..Labels::default() }.check();
        assert!(with("backend").is_ok());
        for bad in ["", "a\u{1b}[2J", "txt\u{202e}exe", "a\u{2066}b", &"x".repeat(LABEL_MAX + 1)] {
            assert!(with(bad).is_err(), "{bad:?}");
        }
    }

    /// Issue 43: a worker cannot write a credential into Git config, as a
    /// label or a session (a capability is `cap_<hex>…`, an attach
    /// identity `att_<hex>…`).
    #[test]
    fn labels_and_sessions_refuse_credentials() {
        let cap = format!("cap_{}_{}", "0196b2c48e1f7a3b9c2d000000000001", "ab".repeat(32));
        let with = |lane: &str| Labels { lane: Some(lane.into()), ..Labels::default() }.check();
        for bad in [cap.clone(), format!("see {cap}"), cap.to_uppercase(), cap.replace("cap_", "att_")] {
            assert!(with(&bad).is_err(), "{bad:?}");
            assert!(Session { id: bad.replace(' ', "/"), parent: None }.check().is_err(), "{bad:?}");
        }
        for fine in ["cap_table", "recap_1", "watt_3", "lane-cap", "cap_fix", "att_deploy", "cap_add", "att_2fa"] {
            assert!(with(fine).is_ok() && valid_session_id(fine), "{fine:?}");
        }
    }

    fn conversation(n: u8) -> ConversationId {
        format!("{:08x}-0000-4000-8000-{:012x}", n, n).parse().unwrap()
    }

    #[test]
    fn a_url_names_its_conversation_only() {
        let id = conversation(1);
        assert!(url_names(&conversation_url(&id), &id));
        assert!(url_names(&format!("https://chatgpt.com/g/g-p-abc/c/{id}?model=x"), &id));
        assert!(!url_names(&conversation_url(&conversation(2)), &id), "another conversation's URL");
        assert!(!url_names(&format!("https://evil.example/c/{id}"), &id), "another host");
        assert!(!url_names("https://chatgpt.com/", &id), "no conversation yet");
        assert!(!url_names(&format!("https://chatgpt.com/c/{id}/extra"), &id));
    }

    #[test]
    fn sessions_paths_refs_and_commits_are_checked() {
        assert!(Session { id: "codex:1234/a".into(), parent: Some("root-7".into()) }.check().is_ok());
        assert!(Session { id: String::new(), parent: None }.check().is_err());
        assert!(Session { id: "a b".into(), parent: None }.check().is_err());
        assert!(Session { id: "x".repeat(SESSION_MAX + 1), parent: None }.check().is_err());
        assert!(valid_path("/tmp/repo/wt-1") && valid_path("/"));
        for bad in ["relative", "/a/../b", "/a/./b", "/a//b", "/a/", "/a\nb"] {
            assert!(!valid_path(bad), "{bad:?}");
        }
        assert!(valid_ref("feature/x-1") && !valid_ref("-x") && !valid_ref("a..b") && !valid_ref("a b"));
        assert!(valid_commit(&"a".repeat(40)) && valid_commit(&"0".repeat(64)));
        assert!(!valid_commit(&"A".repeat(40)) && !valid_commit("abc"));
        let wt = |head: &str| Worktree {
            repo: "/r/.git".into(),
            path: "/r".into(),
            branch: Some("main".into()),
            head: Some(head.into()),
        };
        assert!(wt(&"f".repeat(40)).check().is_ok());
        assert!(wt("HEAD").check().is_err(), "a title or symbolic name is not a commit");
    }

    #[test]
    fn a_record_round_trips() {
        let record = Record {
            id: OwnershipId::from_uuid_bytes([3; 16]),
            state: OwnershipState::Active,
            worktree: Worktree { repo: "/r/.git".into(), path: "/r/wt".into(), branch: Some("b".into()), head: None },
            labels: Labels { lane: Some("backend".into()), ..Labels::default() },
            holders: vec![Holding {
                worker_id: WorkerId::from_uuid_bytes([1; 16]),
                run_id: RunId::from_uuid_bytes([2; 16]),
                via: Via::Claimed,
                sessions: vec![Session { id: "s1".into(), parent: None }],
                conversations: vec![conversation(9)],
                since_ms: 5,
                until_ms: None,
            }],
            handoff_to: None,
            claimed_at_ms: 5,
            last_seen_ms: 6,
            wip: vec![],
            submitted: None,
            landed: None,
            released: None,
            removed_at_ms: None,
            previous: None,
        };
        let json = serde_json::to_string(&record).unwrap();
        assert_eq!(serde_json::from_str::<Record>(&json).unwrap(), record);
        assert!(!json.contains("title"), "a title is never an identity and is not kept");
    }
}
