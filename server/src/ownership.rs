//! Worktree ownership at the edge: what `ownership_who`, `/admin/ownership`
//! and `orchestrator who` show of a record (its holder's path and
//! conversation resolved, unknowns said as such), and keeping each held
//! worktree's Git projection in step with the durable records (after every
//! change, and repaired at every start). The records are the truth; a
//! projection is rebuilt from them, never the other way round.

use std::path::Path;

use control::ControlPlane;
use protocol::ownership::{Holding, OwnershipState, Record, StaleReason, conversation_url};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// How many earlier holders a view shows: a record passed on often stays
/// a few tens of KB.
pub const EARLIER_SHOWN: usize = 16;

/// A conversation as a record names it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ConversationView {
    /// Its UUID, as its executor bound it.
    pub uuid: String,
    /// Its URL.
    pub url: String,
}

/// One holder of a record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct HolderView {
    /// The worker.
    pub worker_id: String,
    /// Its path in its run (`/root/backend`), when the daemon still knows it.
    pub worker_path: Option<String>,
    /// Its run.
    pub run_id: String,
    /// How it came to hold the worktree: claimed, handoff, reclaimed.
    pub via: protocol::ownership::Via,
    /// Its newest execution session on the worktree.
    pub session: String,
    /// Its earlier sessions, oldest first.
    pub earlier_sessions: Vec<String>,
    /// Its conversations while it held the worktree, oldest first; empty:
    /// unknown (never guessed).
    pub conversations: Vec<ConversationView>,
    /// Since when (ms since epoch).
    pub since_ms: u64,
    /// Until when, once it passed the worktree on.
    pub until_ms: Option<u64>,
}

/// A record as a person or a client reads it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct OwnerView {
    /// The record.
    pub ownership_id: String,
    /// Its state; `stale` when live but its holder is proven dead.
    pub state: String,
    /// Why it is stale.
    pub stale: Option<StaleReason>,
    /// The worktree's path.
    pub worktree: String,
    /// Its repository (common Git directory).
    pub repo: String,
    /// Its branch at the claim.
    pub branch: Option<String>,
    /// Its HEAD at the claim.
    pub head_at_claim: Option<String>,
    /// Lane, plan and request.
    pub labels: protocol::ownership::Labels,
    /// The current (or last) holder.
    pub holder: HolderView,
    /// Earlier holders, oldest first (the newest [`EARLIER_SHOWN`]).
    pub earlier_holders: Vec<HolderView>,
    /// Earlier holders left out (older than those shown).
    pub earlier_omitted: usize,
    /// The worker it is being handed to.
    pub handoff_to: Option<String>,
    /// When it was claimed and its holder last heard from (ms since epoch).
    pub claimed_at_ms: u64,
    /// When its holder was last heard from.
    pub last_seen_ms: u64,
    /// The newest preserved work in progress (ref and commit).
    pub latest_wip: Option<protocol::ownership::Wip>,
    /// The submit receipt.
    pub submitted: Option<protocol::ownership::Submitted>,
    /// The land receipt.
    pub landed: Option<protocol::ownership::Landed>,
    /// Why it was released.
    pub released: Option<String>,
    /// When its worktree was found gone.
    pub removed_at_ms: Option<u64>,
    /// The worktree's record before this one.
    pub previous: Option<String>,
}

fn holder_view(plane: &ControlPlane, holding: &Holding) -> HolderView {
    let worker = plane.worker(&holding.worker_id);
    let conversations = holding
        .conversations
        .iter()
        .map(|id| {
            // The URL the executor bound, when it is this conversation's; else its canonical form.
            let bound = worker
                .as_ref()
                .and_then(|w| w.conversation.as_ref())
                .filter(|(bound, url)| bound == id && protocol::ownership::url_names(url, id))
                .map(|(_, url)| url.clone());
            ConversationView { uuid: id.to_string(), url: bound.unwrap_or_else(|| conversation_url(id)) }
        })
        .collect();
    let mut sessions: Vec<String> = holding.sessions.iter().map(|s| s.id.clone()).collect();
    let session = sessions.pop().unwrap_or_default();
    HolderView {
        worker_id: holding.worker_id.to_string(),
        worker_path: worker.map(|w| w.path),
        run_id: holding.run_id.to_string(),
        via: holding.via,
        session,
        earlier_sessions: sessions,
        conversations,
        since_ms: holding.since_ms,
        until_ms: holding.until_ms,
    }
}

/// A state as the wire names it (`handing_off`).
fn state_name(state: OwnershipState) -> String {
    serde_json::to_value(state).ok().and_then(|v| v.as_str().map(str::to_owned)).unwrap_or_default()
}

/// The view of `record` (with its staleness now).
pub fn view(plane: &ControlPlane, record: &Record, stale: Option<StaleReason>) -> OwnerView {
    let state = match stale {
        Some(_) => "stale".to_owned(),
        None => state_name(record.state),
    };
    let (last, earlier) = record.holders.split_last().expect("a record has a holder");
    OwnerView {
        ownership_id: record.id.to_string(),
        state,
        stale,
        worktree: record.worktree.path.clone(),
        repo: record.worktree.repo.clone(),
        branch: record.worktree.branch.clone(),
        head_at_claim: record.worktree.head.clone(),
        labels: record.labels.clone(),
        holder: holder_view(plane, last),
        earlier_holders: earlier[earlier.len().saturating_sub(EARLIER_SHOWN)..]
            .iter()
            .map(|h| holder_view(plane, h))
            .collect(),
        earlier_omitted: earlier.len().saturating_sub(EARLIER_SHOWN),
        handoff_to: record.handoff_to.as_ref().map(ToString::to_string),
        claimed_at_ms: record.claimed_at_ms,
        last_seen_ms: record.last_seen_ms,
        latest_wip: record.wip.last().cloned(),
        submitted: record.submitted.clone(),
        landed: record.landed.clone(),
        released: record.released.clone(),
        removed_at_ms: record.removed_at_ms,
        previous: record.previous.as_ref().map(ToString::to_string),
    }
}

/// The view with every conversation UUID and URL masked, for a diagnostic
/// that leaves the owner's machine (`--redact`).
pub fn redact(mut view: OwnerView) -> OwnerView {
    for holder in std::iter::once(&mut view.holder).chain(view.earlier_holders.iter_mut()) {
        for conversation in &mut holder.conversations {
            conversation.uuid = format!("{}…", conversation.uuid.chars().take(4).collect::<String>());
            conversation.url = "(redacted)".into();
        }
    }
    view
}

/// A worktree path as records name it: resolved while it exists, else
/// made absolute and normalised by its text alone (a removed worktree keeps
/// its provenance under the path it had).
pub fn normalise(path: &str) -> Result<String, control::Error> {
    let bad = || control::Error::InvalidArgument(format!("{path:?} is not an absolute path"));
    let resolved = match std::fs::canonicalize(path) {
        Ok(resolved) => resolved.to_str().ok_or_else(bad)?.to_owned(),
        Err(_) => {
            if !path.starts_with('/') {
                return Err(bad());
            }
            let mut parts: Vec<&str> = Vec::new();
            for part in path.split('/') {
                match part {
                    "" | "." => {}
                    ".." => {
                        parts.pop();
                    }
                    part => parts.push(part),
                }
            }
            format!("/{}", parts.join("/"))
        }
    };
    match protocol::ownership::valid_path(&resolved) {
        true => Ok(resolved),
        false => Err(bad()),
    }
}

/// What `record` writes into its worktree's config.
pub fn projection(record: &Record) -> worktrees::Projection {
    let holder = record.holder();
    let labels = [("lane", &record.labels.lane), ("plan", &record.labels.plan), ("request", &record.labels.request)]
        .into_iter()
        .filter_map(|(k, v)| v.clone().map(|v| (k, v)))
        .collect();
    worktrees::Projection {
        id: record.id.to_string(),
        state: state_name(record.state),
        live: record.state.is_live(),
        worker: holder.worker_id.to_string(),
        session: holder.sessions.last().map(|s| s.id.clone()).unwrap_or_default(),
        conversation: holder.conversations.last().map(ToString::to_string),
        claimed_ms: record.claimed_at_ms,
        last_seen_ms: record.last_seen_ms,
        labels,
    }
}

/// Brings the worktree's projection in step with `record`; a worktree
/// that is gone has none to keep.
pub fn project(git: &worktrees::Git, record: &Record) -> Result<(), worktrees::Error> {
    if worktrees::gone(&record.worktree.path) || record.state == OwnershipState::Removed {
        return Ok(());
    }
    git.project(Path::new(&record.worktree.path), &projection(record))
}

/// At start: every existing worktree's newest record projected again (a
/// change may have been recorded just before a crash, its projection not
/// written), unless its projection now names a live owner this daemon
/// never recorded (another orchestrator's claim since). Returns each
/// failure or skip, for the log; nothing stops the daemon.
pub fn repair(git: &worktrees::Git, plane: &ControlPlane) -> Vec<(String, String)> {
    let mut newest = std::collections::HashMap::new();
    for (record, _) in plane.owners(None) {
        newest.insert(record.worktree.path.clone(), record);
    }
    let known =
        |id: &str| id.parse().is_ok_and(|id| !plane.ownership(&control::ownership::Key::Id(id), None).is_empty());
    newest
        .into_values()
        .filter(|record| !worktrees::gone(&record.worktree.path))
        .filter_map(|record| {
            let foreign = git.projected(Path::new(&record.worktree.path)).ok().flatten().filter(|id| !known(id));
            let outcome = match foreign {
                Some(id) => Err(format!("left alone: its projection names {id}, which this daemon never recorded")),
                None => project(git, &record).map_err(|e| e.to_string()),
            };
            outcome.err().map(|e| (record.id.to_string(), e))
        })
        .collect()
}

/// What `/admin/ownership` is asked: one key, or (none) every record of
/// `repo` or of all. Paths, repositories and commits arrive as the CLI
/// resolved them with Git.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Query {
    /// A worktree path.
    pub worktree: Option<String>,
    /// A branch (of `repo`, or of any repository).
    pub branch: Option<String>,
    /// A full commit id.
    pub commit: Option<String>,
    /// An ownership id.
    pub id: Option<String>,
    /// A repository (common Git directory).
    pub repo: Option<String>,
    /// Mask conversations.
    #[serde(default)]
    pub redact: bool,
}

impl Query {
    /// The query string of this query.
    pub fn to_query_string(&self) -> String {
        let pairs = [
            ("worktree", &self.worktree),
            ("branch", &self.branch),
            ("commit", &self.commit),
            ("id", &self.id),
            ("repo", &self.repo),
        ];
        let mut out: Vec<String> =
            pairs.iter().filter_map(|(k, v)| v.as_ref().map(|v| format!("{k}={}", percent_encode(v)))).collect();
        if self.redact {
            out.push("redact=true".into());
        }
        out.join("&")
    }
}

/// `text` as a URL query value (unreserved bytes and `/` kept).
pub fn percent_encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' | b'/' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// The records a query names, oldest first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Owners {
    /// The records.
    pub records: Vec<OwnerView>,
}

/// Answers `query` from the plane's records.
pub fn answer(plane: &ControlPlane, query: &Query) -> Result<Owners, String> {
    use control::ownership::Key;
    let key = match (&query.worktree, &query.branch, &query.commit, &query.id) {
        (Some(path), None, None, None) => Some(Key::Worktree(normalise(path).map_err(|e| e.to_string())?)),
        (None, Some(branch), None, None) => Some(Key::Branch { repo: query.repo.clone(), branch: branch.clone() }),
        (None, None, Some(commit), None) => Some(Key::Commit(commit.clone())),
        (None, None, None, Some(id)) => Some(Key::Id(id.parse().map_err(|e: protocol::IdError| e.to_string())?)),
        (None, None, None, None) => None,
        _ => return Err("name at most one of worktree, branch, commit, id".into()),
    };
    let records = match key {
        Some(key) => plane.ownership(&key, None),
        None => plane.owners(query.repo.as_deref()),
    };
    let views = records.iter().map(|(r, stale)| view(plane, r, *stale));
    Ok(Owners { records: views.map(|v| if query.redact { redact(v) } else { v }).collect() })
}

/// What the CLI names, resolved with Git, as the queries to try in order
/// (the first that finds records answers): a path (one that is gone too:
/// normalised by its text), an ownership id, or a branch of `repo` and then
/// the commit that name resolves to there (`main`: who landed its tip).
pub fn resolve(target: &str, repo: Option<&Path>) -> Result<Vec<Query>, String> {
    if target.starts_with("own_") {
        return Ok(vec![Query { id: Some(target.to_owned()), ..Query::default() }]);
    }
    let git = worktrees::Git::new(&[std::path::PathBuf::from("/")]).map_err(|e| e.to_string())?;
    let as_path = Path::new(target);
    if target.starts_with(['/', '.']) || as_path.exists() {
        let absolute = std::path::absolute(as_path).map_err(|e| e.to_string())?;
        // A directory inside a worktree names that worktree.
        let top = match absolute.exists() {
            true => git.top_level_of(&absolute).ok(),
            false => None,
        };
        let path = top.unwrap_or(normalise(&absolute.display().to_string()).map_err(|e| e.to_string())?);
        return Ok(vec![Query { worktree: Some(path), ..Query::default() }]);
    }
    let cwd = std::env::current_dir().map_err(|e| e.to_string())?;
    let repo = match repo {
        Some(dir) => Some(git.repository_of(dir).map_err(|e| format!("--repo: {e}"))?),
        None => git.repository_of(&cwd).ok(),
    };
    let mut queries = vec![Query { branch: Some(target.to_owned()), repo: repo.clone(), ..Query::default() }];
    // A full commit id stands for itself whatever repository this is.
    let commit = repo
        .as_ref()
        .and_then(|repo| git.commit_of(repo, target).ok().flatten())
        .or_else(|| Some(target.to_owned()).filter(|t| protocol::ownership::valid_commit(t)));
    queries.extend(commit.map(|commit| Query { commit: Some(commit), ..Query::default() }));
    Ok(queries)
}

/// One record for a terminal: the fields `orchestrator who` promises, each
/// unknown said as such.
pub fn render(view: &OwnerView, now_ms: u64) -> String {
    let ago = |ms: u64| match now_ms.saturating_sub(ms) / 1000 {
        s if s < 120 => format!("{s} s ago"),
        s if s < 7200 => format!("{} min ago", s / 60),
        s => format!("{} h ago", s / 3600),
    };
    let unknown = "unknown".to_owned();
    let holder = &view.holder;
    let mut out = format!("worktree      {}\n", view.worktree);
    let live = match worktrees::gone(&view.worktree) {
        true => "gone".to_owned(),
        false => {
            let git = worktrees::Git::new(&[std::path::PathBuf::from("/")]).ok();
            match git.and_then(|g| g.inspect(Path::new(&view.worktree)).ok()) {
                Some(seen) => format!(
                    "{} at {}{}",
                    seen.worktree.branch.as_deref().unwrap_or("(detached)"),
                    seen.worktree.head.as_deref().map_or("no commit", short),
                    if seen.dirty { ", uncommitted work" } else { "" }
                ),
                None => "not readable".to_owned(),
            }
        }
    };
    out += &format!("now           {live}\n");
    out += &format!("branch        {} (at claim)\n", view.branch.as_deref().unwrap_or("(detached)"));
    out += &format!("repository    {}\n", view.repo);
    out += &format!("state         {}{}\n", view.state, view.stale.map(|s| format!(" ({s:?})")).unwrap_or_default());
    out += &format!("ownership     {}\n", view.ownership_id);
    let labels = [("lane", &view.labels.lane), ("plan", &view.labels.plan), ("request", &view.labels.request)];
    for (name, label) in labels {
        out += &format!("{name:<14}{}\n", label.as_ref().unwrap_or(&unknown));
    }
    out +=
        &format!("worker        {} {}\n", holder.worker_path.as_deref().unwrap_or("(unknown path)"), holder.worker_id);
    out += &format!("run           {}\n", holder.run_id);
    out += &format!("session       {}\n", holder.session);
    match holder.conversations.last() {
        Some(c) => {
            out += &format!("conversation  {} (title not stored)\n", c.url);
            out += &format!("uuid          {}\n", c.uuid);
        }
        None => out += "conversation  unknown (none bound)\n",
    }
    out += &format!("last activity {}\n", ago(view.last_seen_ms));
    out += &format!(
        "latest WIP    {}\n",
        view.latest_wip.as_ref().map_or("none".to_owned(), |w| format!("{} {}", w.ref_name, short(&w.commit)))
    );
    out += &format!(
        "submitted     {}\n",
        view.submitted
            .as_ref()
            .map_or("no".to_owned(), |s| format!("{} at {} by session {}", s.branch, s.head, s.session))
    );
    out += &format!(
        "landed        {}\n",
        view.landed.as_ref().map_or("no".to_owned(), |l| format!("{} at {} ({})", l.into, l.commit, ago(l.at_ms)))
    );
    for earlier in view.earlier_holders.iter().rev() {
        let conversation = earlier.conversations.last().map_or(unknown.clone(), |c| c.url.clone());
        out += &format!(
            "before        {} {} session {} conversation {} ({:?})\n",
            earlier.worker_path.as_deref().unwrap_or("(unknown path)"),
            earlier.worker_id,
            earlier.session,
            conversation,
            earlier.via
        );
    }
    out
}

/// A commit id's first 12 digits (all of a shorter text).
fn short(commit: &str) -> &str {
    commit.get(..12).unwrap_or(commit)
}

/// One line per record, for `orchestrator owners`.
pub fn render_line(view: &OwnerView) -> String {
    let conversation = view.holder.conversations.last().map_or("unknown".to_owned(), |c| c.url.clone());
    format!(
        "{:<10} {:<40} {:<20} {} {}\n",
        view.state,
        view.worktree,
        view.branch.as_deref().unwrap_or("(detached)"),
        view.holder.worker_path.as_deref().unwrap_or(&view.holder.worker_id),
        conversation
    )
}
