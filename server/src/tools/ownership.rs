//! Worktree ownership as tools (SPEC §5d): `ownership_claim`,
//! `ownership_update` (heartbeat, handoff and accept, reclaim, release,
//! preserve_wip, submit, land, removed) and `ownership_who`. Git is read and
//! written through the `worktrees` adapter, confined to the daemon's
//! `--worktree-root`s; the caller's conversation is the one its executor
//! bound, never an argument. Each change is durable before its Git
//! projection is written; a projection that failed is repaired at the next
//! change or start.

use std::path::Path;

use control::ownership::{Key, Op};
use protocol::OwnershipId;
use protocol::ownership::{Labels, Record, Session};

use crate::ownership::{OwnerView, project, view};

use super::*;

/// `ownership_claim` arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ClaimArgs {
    /// Your capability.
    pub capability: String,
    /// The worktree's top-level directory, absolute, under one of the daemon's --worktree-root directories.
    pub worktree: String,
    /// Your execution session (1-128 of A-Z a-z 0-9 . _ : @ / + -); default: your conversation's.
    #[serde(default)]
    pub session: Option<String>,
    /// The session this one resumes or was started by.
    #[serde(default)]
    pub parent_session: Option<String>,
    /// The lane (line of work).
    #[serde(default)]
    pub lane: Option<String>,
    /// The plan reference.
    #[serde(default)]
    pub plan: Option<String>,
    /// The request reference.
    #[serde(default)]
    pub request: Option<String>,
}

/// What `ownership_update` does.
#[derive(Debug, Clone, Copy, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum UpdateOp {
    /// You are alive (holder).
    Heartbeat,
    /// Offer the worktree to `to_worker` (holder, or its run's root).
    Handoff,
    /// Take a worktree offered to you.
    Accept,
    /// Take over a worktree whose holder is proven dead (its work in progress is preserved first).
    Reclaim,
    /// Give the worktree up (holder, or its run's root).
    Release,
    /// Snapshot the worktree's uncommitted work under a ref (holder).
    PreserveWip,
    /// Submit the worktree's branch at its HEAD for landing (holder).
    Submit,
    /// Record that the submitted commit reached `into` (holder, or its run's root; Git must confirm it).
    Land,
    /// Record that the worktree directory is gone (holder, or its run's root).
    Removed,
}

/// `ownership_update` arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct UpdateArgs {
    /// Your capability.
    pub capability: String,
    /// The ownership record.
    #[schemars(with = "OwnershipId")]
    pub ownership_id: String,
    /// What to do.
    pub op: UpdateOp,
    /// handoff: the worker to offer it to.
    #[serde(default)]
    #[schemars(with = "Option<WorkerId>")]
    pub to_worker: Option<String>,
    /// accept, reclaim: your execution session (default: your conversation's).
    #[serde(default)]
    pub session: Option<String>,
    /// land: the target branch (default main).
    #[serde(default)]
    pub into: Option<String>,
    /// release: why.
    #[serde(default)]
    pub reason: Option<String>,
}

/// `ownership_who` arguments: one of worktree, branch, commit, ownership_id.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WhoArgs {
    /// Your capability.
    pub capability: String,
    /// A worktree path (also one that is gone).
    #[serde(default)]
    pub worktree: Option<String>,
    /// A branch.
    #[serde(default)]
    pub branch: Option<String>,
    /// A submitted or landed commit (full id, or any revision with repo).
    #[serde(default)]
    pub commit: Option<String>,
    /// An ownership record.
    #[serde(default)]
    #[schemars(with = "Option<OwnershipId>")]
    pub ownership_id: Option<String>,
    /// For branch and commit: a worktree of the repository (default: every repository).
    #[serde(default)]
    pub repo: Option<String>,
}

/// Ownership records, oldest first: the last is the newest (the worktree's current one).
#[derive(Debug, Serialize, JsonSchema)]
pub struct OwnershipOut {
    /// The records.
    #[schemars(schema_with = "owner_items")]
    pub records: Vec<OwnerView>,
    /// The ownership stream's cursor (events_wait with stream ownership).
    pub cursor: u64,
    /// Older records left out (at most the newest 32 are shown; `ownership_id` reads any).
    #[serde(skip_serializing_if = "is_zero")]
    pub omitted: usize,
    /// The worktree's Git projection could not be written (the record is durable; it is repaired at the next change or start).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub projection_error: Option<String>,
}

/// The records' schema in brief (each tool carrying the whole view cost
/// 3 KB of every conversation's context): the fields, named (SPEC §5d).
fn owner_items(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "array",
        "description": "Oldest first. Each: ownership_id, state (provisional, active, handing_off, submitted, landed, released, removed; stale: its holder is proven dead), worktree, repo, branch, labels, holder {worker_id, worker_path, run_id, via, session, conversations [{uuid, url}]}, earlier_holders, handoff_to, last_seen_ms, latest_wip {ref_name, commit}, submitted {branch, head, session}, landed {into, commit, source_head}, removed_at_ms, previous (SPEC §5d).",
        "items": { "type": "object" }
    })
}

/// How many records one answer shows (each is at most a few KB: its
/// holders, sessions and conversations are bounded).
const RECORDS_SHOWN: usize = 32;

fn is_zero(n: &usize) -> bool {
    *n == 0
}

fn refused(e: worktrees::Error) -> ToolError {
    ToolError::new(ErrorCode::WorktreeRefused, e.to_string())
}

/// A session named by the caller, or its conversation's (worker and epoch):
/// never the conversation's UUID.
fn session_of(me: &Worker, id: Option<String>, parent: Option<String>) -> Result<Session, ToolError> {
    let session = Session { id: id.unwrap_or_else(|| format!("chat:{}:{}", me.id, me.epoch)), parent };
    session.check().map_err(|e| ToolError::new(ErrorCode::InvalidArgument, e))?;
    Ok(session)
}

impl Tools {
    /// The Git adapter, or why ownership is off.
    fn git(&self) -> Result<Arc<worktrees::Git>, ToolError> {
        self.worktrees.clone().ok_or_else(|| {
            ToolError::new(
                ErrorCode::WorktreeRefused,
                "worktree ownership is off: start the daemon with --worktree-root DIR (repeatable)",
            )
        })
    }

    /// The newest of `records` (oldest first) as views, at most
    /// [`RECORDS_SHOWN`] and half a response's bound (always the newest
    /// one): a branch reused for years must not outgrow a response.
    fn ownership_out(&self, records: Vec<(Record, Option<protocol::ownership::StaleReason>)>) -> OwnershipOut {
        let mut shown = Vec::new();
        let mut bytes = 0;
        for (record, stale) in records.iter().rev().take(RECORDS_SHOWN) {
            let view = view(&self.plane, record, *stale);
            bytes += serde_json::to_vec(&view).map_or(usize::MAX, |v| v.len());
            if !shown.is_empty() && bytes > RESPONSE_MAX / 2 {
                break;
            }
            shown.push(view);
        }
        shown.reverse();
        OwnershipOut {
            omitted: records.len() - shown.len(),
            records: shown,
            cursor: self.plane.with_state(|s| s.ownership.cursor),
            projection_error: None,
        }
    }

    /// The record after a change, its worktree's projection brought in step
    /// with the worktree's newest record (a repeated change to an older one
    /// must not overwrite it).
    fn changed(&self, git: &worktrees::Git, id: &OwnershipId) -> Result<OwnershipOut, ToolError> {
        let records = self.plane.ownership(&Key::Id(id.clone()), None);
        let path = records.first().map(|(r, _)| r.worktree.path.clone()).unwrap_or_default();
        let mut out = self.ownership_out(records);
        if let Some((record, _)) = self.plane.ownership(&Key::Worktree(path), None).pop() {
            out.projection_error = project(git, &record).err().map(|e| e.to_string());
            if let Some(e) = &out.projection_error {
                tracing::warn!(ownership = %id, error = %e, "worktree projection not written; repaired at the next change or start");
            }
        }
        Ok(out)
    }

    fn update(&self, git: &worktrees::Git, me: &Worker, args: UpdateArgs) -> Result<OwnershipOut, ToolError> {
        let id: OwnershipId = parse(&args.ownership_id)?;
        // Another run's record is not there for this worker, but for a
        // reclaim of one whose run has ended (decided again by the plane).
        let (record, _) = self
            .plane
            .ownership(&Key::Id(id.clone()), Some(&me.run_id))
            .pop()
            .filter(|(r, _)| r.holder().run_id == me.run_id || matches!(args.op, UpdateOp::Reclaim))
            .ok_or_else(|| Error::from(Refusal::NoOwnership(id.clone())))?;
        let path = Path::new(&record.worktree.path);
        let session = |s: Option<String>| session_of(me, s, None);
        let op = match args.op {
            UpdateOp::Heartbeat => Op::Heartbeat { id: id.clone() },
            UpdateOp::Handoff => {
                let to = args
                    .to_worker
                    .as_deref()
                    .ok_or_else(|| Error::InvalidArgument("handoff needs to_worker".into()))?;
                Op::Handoff { id: id.clone(), to: parse(to)? }
            }
            UpdateOp::Accept => Op::Accept { id: id.clone(), session: session(args.session)? },
            UpdateOp::Reclaim => {
                let session = session(args.session)?;
                let op = |wip| Op::Reclaim { id: id.clone(), session: session.clone(), wip };
                // The holder may have left work behind: kept, in the
                // reclaim's own commit, before anyone else gets the tree.
                self.plane.may_own(&me.id, op(None))?;
                op(self.preserve(git, &record)?)
            }
            UpdateOp::Release => {
                let op = |wip| Op::Release { id: id.clone(), reason: args.reason.clone(), wip };
                self.plane.may_own(&me.id, op(None))?;
                op(self.preserve(git, &record)?)
            }
            UpdateOp::PreserveWip => {
                self.plane.may_own(&me.id, Op::Heartbeat { id: id.clone() })?;
                match self.preserve(git, &record)? {
                    Some((ref_name, commit)) => Op::Wip { id: id.clone(), ref_name, commit },
                    None => Op::Heartbeat { id: id.clone() },
                }
            }
            UpdateOp::Submit => {
                let seen = git.inspect(path).map_err(refused)?;
                let (Some(branch), Some(head)) = (seen.worktree.branch, seen.worktree.head) else {
                    return Err(ToolError::new(
                        ErrorCode::WorktreeRefused,
                        "the worktree has no branch checked out, or no commit, to submit",
                    ));
                };
                let session = record.holder().sessions.last().map(|s| s.id.clone()).unwrap_or_default();
                Op::Submit { id: id.clone(), branch, head, session }
            }
            UpdateOp::Land => {
                let into = args.into.unwrap_or_else(|| "main".into());
                let submitted =
                    record.submitted.as_ref().ok_or(Error::Refused(Refusal::OwnershipIs(id.clone(), record.state)))?;
                let commit = match &record.landed {
                    Some(landed) if landed.into == into => landed.commit.clone(),
                    _ => git.landed_at(&record.worktree.repo, &into, &submitted.head).map_err(refused)?.ok_or_else(
                        || {
                            ToolError::new(
                                ErrorCode::WorktreeRefused,
                                format!("{} is not on {into} yet: merge it, then record the landing", submitted.head),
                            )
                        },
                    )?,
                };
                Op::Land { id: id.clone(), into, commit }
            }
            UpdateOp::Removed => {
                if !worktrees::gone(&record.worktree.path) {
                    return Err(ToolError::new(
                        ErrorCode::WorktreeRefused,
                        format!("{} still exists: remove it (git worktree remove) first", record.worktree.path),
                    ));
                }
                Op::Removed { id: id.clone() }
            }
        };
        self.plane.own(&me.id, op)?;
        self.changed(git, &id)
    }

    /// Snapshots the worktree's uncommitted work, if any, under the
    /// record's next WIP ref (the worktree untouched). The caller has asked
    /// the plane whether the change it is for may be made.
    fn preserve(&self, git: &worktrees::Git, record: &Record) -> Result<Option<(String, String)>, ToolError> {
        if worktrees::gone(&record.worktree.path) || !record.state.is_live() {
            return Ok(None);
        }
        let next =
            1 + record.wip.last().and_then(|w| w.ref_name.rsplit('/').next()?.parse::<usize>().ok()).unwrap_or(0);
        git.preserve_wip(Path::new(&record.worktree.path), &record.id.to_string(), next).map_err(refused)
    }

    fn who(&self, me: &Worker, args: WhoArgs) -> Result<OwnershipOut, ToolError> {
        let repo = match &args.repo {
            Some(path) => Some(self.git()?.inspect(Path::new(path)).map_err(refused)?.worktree.repo),
            None => None,
        };
        let key = match (args.worktree, args.branch, args.commit, args.ownership_id) {
            (Some(path), None, None, None) => Key::Worktree(crate::ownership::normalise(&path)?),
            (None, Some(branch), None, None) => Key::Branch { repo, branch },
            (None, None, Some(commit), None) => {
                let full = match (&repo, &self.worktrees) {
                    (Some(repo), Some(git)) => git.commit_of(repo, &commit).map_err(refused)?,
                    _ => Some(commit.clone()).filter(|c| protocol::ownership::valid_commit(c)),
                };
                Key::Commit(full.ok_or_else(|| {
                    Error::InvalidArgument(format!("{commit:?} is not a full commit id (or a revision of repo)"))
                })?)
            }
            (None, None, None, Some(id)) => Key::Id(parse(&id)?),
            _ => {
                return Err(Error::InvalidArgument(
                    "name exactly one of worktree, branch, commit, ownership_id".into(),
                )
                .into());
            }
        };
        Ok(self.ownership_out(self.plane.ownership(&key, Some(&me.run_id))))
    }
}

#[tool_router(router = ownership_tools, vis = "pub(super)")]
impl Tools {
    /// Claim a Git worktree for your work (again, in a new session: resume it). Records who holds it: you, your session, your conversation.
    #[tool(annotations(
        title = "Claim worktree",
        read_only_hint = false,
        destructive_hint = false,
        idempotent_hint = true,
        open_world_hint = false
    ))]
    async fn ownership_claim(
        &self,
        Parameters(args): Parameters<ClaimArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<Json<OwnershipOut>, ToolError> {
        let args = args?;
        let git = self.git()?;
        self.prove(&ctx, &args.capability, "ownership_claim").await?;
        let tools = self.clone();
        on_blocking_pool(move || -> Result<OwnershipOut, ToolError> {
            let me = tools.plane.authenticate(&args.capability)?;
            let seen = git.inspect(Path::new(&args.worktree)).map_err(refused)?;
            let session = session_of(&me, args.session, args.parent_session)?;
            let labels = Labels { lane: args.lane, plan: args.plan, request: args.request };
            let path = seen.worktree.path.clone();
            let op = Op::Claim {
                id: ControlPlane::new_ownership_id(),
                worktree: seen.worktree,
                session,
                labels,
                projected: seen.projected,
            };
            tools.plane.own(&me.id, op)?;
            let record = tools
                .plane
                .live_owner(&path)
                .ok_or_else(|| ToolError::new(ErrorCode::Internal, "the claim left no live record"))?;
            tools.changed(&git, &record.id)
        })
        .await
    }

    /// Change a worktree you hold (or are offered): heartbeat, handoff, accept, reclaim, release, preserve_wip, submit, land, removed.
    #[tool(annotations(
        title = "Update worktree ownership",
        read_only_hint = false,
        destructive_hint = false,
        idempotent_hint = true,
        open_world_hint = false
    ))]
    async fn ownership_update(
        &self,
        Parameters(args): Parameters<UpdateArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<Json<OwnershipOut>, ToolError> {
        let args = args?;
        let git = self.git()?;
        self.prove(&ctx, &args.capability, "ownership_update").await?;
        let tools = self.clone();
        on_blocking_pool(move || -> Result<OwnershipOut, ToolError> {
            let me = tools.plane.authenticate(&args.capability)?;
            tools.update(&git, &me, args)
        })
        .await
    }

    /// Who in your run holds, held, submitted or landed a worktree, branch or commit (sessions, conversations).
    #[tool(annotations(
        title = "Worktree owners",
        read_only_hint = true,
        destructive_hint = false,
        idempotent_hint = true,
        open_world_hint = false
    ))]
    async fn ownership_who(&self, Parameters(args): Parameters<WhoArgs>) -> Result<Json<OwnershipOut>, ToolError> {
        let args = args?;
        self.not_blocked(&args.capability)?;
        let tools = self.clone();
        on_blocking_pool(move || -> Result<OwnershipOut, ToolError> {
            let me = tools.plane.authenticate(&args.capability)?;
            tools.who(&me, args)
        })
        .await
    }
}
