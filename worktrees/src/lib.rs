//! The Git adapter of worktree ownership: everything the orchestrator asks
//! of Git, by running the real `git` (the control plane never does).
//!
//! - [`Git::inspect`] reads a worktree (normalised path, repository,
//!   branch, HEAD, whether it has uncommitted work, the owner its
//!   projection names), refusing any path outside the allowed roots.
//! - [`Git::project`] writes the owner into the worktree's own config
//!   (`git config --worktree orchestrator.owner.*`, in the repository's Git
//!   directory: the product tree is never dirtied) and, while it is held,
//!   locks a linked worktree with the owner in the lock's reason, so
//!   `git worktree remove` and `prune` leave it alone.
//! - [`Git::preserve_wip`] snapshots tracked and untracked work under
//!   `refs/orchestrator/wip/<ownership>/<n>` through a private index: the
//!   worktree and its index are untouched.
//! - [`Git::landed_at`] checks a submitted commit reached a branch.
//!
//! Every run has a deadline, a clean environment (no inherited `GIT_DIR`,
//! `GIT_INDEX_FILE`, ..., no system or user config) and nothing a
//! repository's config names is ever run: hooks, file-system monitor,
//! filter, diff and merge drivers, signing, pagers, editors, helpers are
//! all overridden ([`NEUTRAL`], `driver_overrides`); what Git prints is kept
//! to a bound. Worktrees
//! are confined to the allowed roots; their repositories' Git directories
//! (refs, objects, `extensions.worktreeConfig`, lock files) may be
//! anywhere and are written there.

use std::ffi::OsStr;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use protocol::ownership::{Worktree, valid_commit, valid_path, valid_ref};

/// How long one `git` run may take.
const GIT_DEADLINE: Duration = Duration::from_secs(30);
/// The most of Git's output kept (the rest is drained and dropped).
const OUTPUT_MAX: u64 = 1 << 20;
/// The config section the owner is written under.
pub const SECTION: &str = "orchestrator.owner";
/// What starts the reason of a lock this adapter took.
const LOCK_MARK: &str = "orchestrator-owner ";

/// Why Git could not do what was asked.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The path is outside every allowed root (or no root is configured).
    #[error("{0} is outside the daemon's worktree roots (--worktree-root)")]
    Outside(String),
    /// The path is not a Git worktree's top level.
    #[error("{path} is not a Git worktree: {detail}")]
    NotAWorktree {
        /// The path.
        path: String,
        /// What Git said.
        detail: String,
    },
    /// The repository's configuration makes per-worktree config unsafe to enable.
    #[error("{0}")]
    Unsafe(String),
    /// A fact the caller gave that Git does not confirm.
    #[error("{0}")]
    Refused(String),
    /// Git failed or ran past its deadline.
    #[error("git {args}: {detail}")]
    Git {
        /// The arguments.
        args: String,
        /// Its exit and what it printed (bounded).
        detail: String,
    },
    /// The file system refused.
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

/// A worktree as Git shows it now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Inspected {
    /// Its normalised facts.
    pub worktree: Worktree,
    /// Whether it has uncommitted work (tracked changes or untracked files).
    pub dirty: bool,
    /// Whether it is the repository's main worktree (which Git cannot lock).
    pub main: bool,
    /// The ownership id its projection names as live, if any.
    pub projected: Option<String>,
}

/// What is written into a held worktree's config.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Projection {
    /// The ownership record.
    pub id: String,
    /// Its state (`active`, `landed`, ...).
    pub state: String,
    /// Whether it is held (the worktree is locked while it is).
    pub live: bool,
    /// The holding worker.
    pub worker: String,
    /// Its newest execution session.
    pub session: String,
    /// Its newest conversation, when known.
    pub conversation: Option<String>,
    /// When it was claimed (ms since epoch).
    pub claimed_ms: u64,
    /// When its holder was last heard from (ms since epoch).
    pub last_seen_ms: u64,
    /// Its lane, plan and request labels.
    pub labels: Vec<(&'static str, String)>,
}

impl Projection {
    fn entries(&self) -> Vec<(&'static str, String)> {
        let mut entries = vec![
            ("id", self.id.clone()),
            ("state", self.state.clone()),
            ("live", self.live.to_string()),
            ("worker", self.worker.clone()),
            ("session", self.session.clone()),
            ("conversation", self.conversation.clone().unwrap_or_else(|| "unknown".into())),
            ("claimedMs", self.claimed_ms.to_string()),
            ("lastSeenMs", self.last_seen_ms.to_string()),
        ];
        entries.extend(self.labels.iter().cloned());
        entries
    }
}

/// The adapter: `git`, confined to the allowed roots.
#[derive(Debug, Clone)]
pub struct Git {
    roots: Vec<PathBuf>,
}

impl Git {
    /// An adapter for worktrees under `roots` (each must exist; they are
    /// resolved, symbolic links included, once here).
    pub fn new(roots: &[PathBuf]) -> Result<Self, Error> {
        let roots = roots.iter().map(std::fs::canonicalize).collect::<Result<Vec<_>, _>>()?;
        Ok(Self { roots })
    }

    /// A path resolved, and refused unless it is under an allowed root.
    /// Only an absolute path is taken (a relative one would be resolved
    /// against the daemon's working directory), and a path that cannot be
    /// resolved says nothing of what lies outside the roots: whether it
    /// exists there is not told.
    fn confined(&self, path: &Path) -> Result<PathBuf, Error> {
        let shown = path.display().to_string();
        if !path.is_absolute() {
            return Err(Error::Refused(format!("{shown:?} is not an absolute path")));
        }
        let resolved = match std::fs::canonicalize(path) {
            Ok(resolved) => resolved,
            Err(_) if self.roots.iter().any(|root| lexical(path).starts_with(root)) => {
                return Err(Error::NotAWorktree { path: shown, detail: "no such directory".into() });
            }
            Err(_) => return Err(Error::Outside(shown)),
        };
        match self.roots.iter().any(|root| resolved.starts_with(root)) {
            true => Ok(resolved),
            false => Err(Error::Outside(shown)),
        }
    }

    /// Reads the worktree at `path`, which must be its top level and under
    /// an allowed root (its repository may be anywhere).
    pub fn inspect(&self, path: &Path) -> Result<Inspected, Error> {
        let path = self.confined(path)?;
        let shown = path.display().to_string();
        let not_a_worktree = |detail: String| Error::NotAWorktree { path: shown.clone(), detail };
        let out =
            git(&path, &["rev-parse", "--path-format=absolute", "--show-toplevel", "--git-common-dir", "--git-dir"])
                .map_err(|e| not_a_worktree(e.to_string()))?;
        let mut lines = out.lines();
        let (Some(top), Some(common), Some(dir)) = (lines.next(), lines.next(), lines.next()) else {
            return Err(not_a_worktree("git rev-parse said less than asked".into()));
        };
        let top = std::fs::canonicalize(top)?;
        if top != path {
            return Err(not_a_worktree(format!("its top level is {}", top.display())));
        }
        let common = std::fs::canonicalize(common)?;
        let main = std::fs::canonicalize(dir)? == common;
        let branch = git_maybe(&path, &["symbolic-ref", "--quiet", "--short", "HEAD"])?;
        let head = git_maybe(&path, &["rev-parse", "--quiet", "--verify", "HEAD^{commit}"])?;
        let dirty = !git(&path, &["status", "--porcelain", "--untracked-files=normal"])?.trim().is_empty();
        let worktree = Worktree { repo: text(&common)?, path: text(&path)?, branch, head };
        worktree.check().map_err(Error::Refused)?;
        let projected = self.projected(&path)?;
        Ok(Inspected { worktree, dirty, main, projected })
    }

    /// The ownership id the worktree's projection names as live, if any
    /// (one `git` run: what a check before rewriting it needs).
    pub fn projected(&self, path: &Path) -> Result<Option<String>, Error> {
        let entries = self.read(path)?;
        let live = entries.iter().any(|(k, v)| k == "live" && v == "true");
        Ok(entries.into_iter().find(|(k, _)| live && k == "id").map(|(_, v)| v))
    }

    /// The owner entries in the worktree's config (`orchestrator.owner.*`),
    /// keys without the section.
    pub fn read(&self, path: &Path) -> Result<Vec<(String, String)>, Error> {
        let path = self.confined(path)?;
        let pattern = format!("^{}\\.", SECTION.replace('.', "\\."));
        let out = git_maybe(&path, &["config", "--null", "--get-regexp", &pattern])?.unwrap_or_default();
        Ok(out
            .split('\0')
            .filter_map(|entry| entry.split_once('\n'))
            .map(|(key, value)| (key.rsplit('.').next().unwrap_or(key).to_owned(), value.to_owned()))
            .collect())
    }

    /// Writes `projection` into the worktree's own config and locks (while
    /// live) or unlocks (once not) a linked worktree. Enables per-worktree
    /// config in the repository first, refusing where Git's documentation
    /// says that is unsafe (`core.bare` or `core.worktree` in the shared
    /// config). Writing the same projection again changes nothing.
    pub fn project(&self, path: &Path, projection: &Projection) -> Result<(), Error> {
        let inspected = self.inspect(path)?;
        let path = PathBuf::from(&inspected.worktree.path);
        let enabled = git_maybe(&path, &["config", "--bool", "--get", "extensions.worktreeConfig"])?;
        if enabled.as_deref() != Some("true") {
            let bare = git_maybe(
                &path,
                &["config", "--file", &format!("{}/config", inspected.worktree.repo), "--bool", "--get", "core.bare"],
            )?;
            let work = git_maybe(
                &path,
                &["config", "--file", &format!("{}/config", inspected.worktree.repo), "--get", "core.worktree"],
            )?;
            if bare.as_deref() == Some("true") || work.is_some() {
                return Err(Error::Unsafe(format!(
                    "{} sets core.bare or core.worktree in its shared config: move them to config.worktree (git help worktree, CONFIGURATION FILE) before ownership can be projected",
                    inspected.worktree.repo
                )));
            }
            git(&path, &["config", "extensions.worktreeConfig", "true"])?;
        }
        let current = self.read(&path)?;
        for (key, value) in projection.entries() {
            if current.iter().any(|(k, v)| k == key && *v == value) {
                continue;
            }
            git(&path, &["config", "--worktree", &format!("{SECTION}.{key}"), &value])?;
        }
        if !inspected.main {
            self.lock(&path, projection)?;
        }
        Ok(())
    }

    /// Locks a linked worktree with the owner in the reason while it is
    /// held; unlocks it once not (only a lock this adapter took).
    fn lock(&self, path: &Path, projection: &Projection) -> Result<(), Error> {
        let locked = worktree_lock(path)?;
        let ours = locked.as_deref().is_some_and(|r| r.starts_with(LOCK_MARK));
        let reason = format!(
            "{LOCK_MARK}{} worker={} session={} conversation={} claimed={} last-seen={}",
            projection.id,
            projection.worker,
            projection.session,
            projection.conversation.as_deref().unwrap_or("unknown"),
            projection.claimed_ms,
            projection.last_seen_ms
        );
        let shown = text(path)?;
        match (projection.live, locked) {
            (true, Some(r)) if r == reason => Ok(()),
            (true, Some(_)) if !ours => Err(Error::Refused(format!("{shown} is locked by someone else"))),
            (true, existing) => {
                if existing.is_some() {
                    git(path, &["worktree", "unlock", &shown])?;
                }
                git(path, &["worktree", "lock", "--reason", &reason, &shown]).map(drop)
            }
            (false, Some(_)) if ours => git(path, &["worktree", "unlock", &shown]).map(drop),
            (false, _) => Ok(()),
        }
    }

    /// Snapshots the worktree's work in progress (tracked changes and
    /// untracked files, ignored ones excepted) as a commit on HEAD under
    /// `refs/orchestrator/wip/<ownership>/<n>` (the first free `n` from
    /// `next`: a ref is only ever created, never moved), through a private
    /// copy of the index: the worktree and its index are untouched. `None`
    /// when there is nothing beyond HEAD (or no HEAD yet).
    pub fn preserve_wip(&self, path: &Path, ownership: &str, next: usize) -> Result<Option<(String, String)>, Error> {
        static SNAPSHOTS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let inspected = self.inspect(path)?;
        let path = PathBuf::from(&inspected.worktree.path);
        let Some(head) = inspected.worktree.head else { return Ok(None) };
        let real_index = git(&path, &["rev-parse", "--path-format=absolute", "--git-path", "index"])?;
        let dir = git(&path, &["rev-parse", "--path-format=absolute", "--git-dir"])?;
        let n = SNAPSHOTS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let index = PathBuf::from(dir.trim()).join(format!("orchestrator-wip-{}-{n}.index", std::process::id()));
        let env = [("GIT_INDEX_FILE", index.as_os_str())];
        let snapshot = (|| -> Result<Option<String>, Error> {
            // From a copy of the real index, `add` hashes only what changed.
            if std::fs::copy(real_index.trim(), &index).is_err() {
                run(&path, &["read-tree", &head], &env)?;
            }
            run(&path, &["add", "--all", "--", "."], &env)?;
            let tree = run(&path, &["write-tree"], &env)?;
            let head_tree = git(&path, &["rev-parse", &format!("{head}^{{tree}}")])?;
            if tree.trim() == head_tree.trim() {
                return Ok(None);
            }
            let message = format!("orchestrator: work in progress of {ownership}");
            let author = [
                ("GIT_AUTHOR_NAME", OsStr::new("orchestrator")),
                ("GIT_AUTHOR_EMAIL", OsStr::new("orchestrator@localhost")),
                ("GIT_COMMITTER_NAME", OsStr::new("orchestrator")),
                ("GIT_COMMITTER_EMAIL", OsStr::new("orchestrator@localhost")),
            ];
            let commit = run(&path, &["commit-tree", tree.trim(), "-p", &head, "-m", &message], &author)?;
            Ok(Some(commit.trim().to_owned()))
        })();
        let _ = std::fs::remove_file(&index);
        let Some(commit) = snapshot? else { return Ok(None) };
        if !valid_commit(&commit) {
            return Err(Error::Refused(format!("git made an unexpected snapshot {commit:?}")));
        }
        // Created only where no ref is (the zero old value): a snapshot a
        // crashed attempt left under `n` is kept, and this one takes `n + 1`.
        let zero = "0".repeat(commit.len());
        for n in next..next + 64 {
            let name = format!("refs/orchestrator/wip/{ownership}/{n}");
            if !valid_ref(&name) {
                return Err(Error::Refused(format!("{name:?} is not a ref name")));
            }
            if run_status(&path, &["update-ref", &name, &commit, &zero])? {
                return Ok(Some((name, commit)));
            }
        }
        Err(Error::Refused(format!("64 WIP refs of {ownership} from {next} are taken")))
    }

    /// The commit of `into` (a branch of `repo`) that contains `source`, if
    /// `source` has landed there; `None` if it has not.
    pub fn landed_at(&self, repo: &str, into: &str, source: &str) -> Result<Option<String>, Error> {
        let repo = self.repository(repo)?;
        if !valid_ref(into) || !valid_commit(source) {
            return Err(Error::Refused("a landing needs a branch name and a full source commit".into()));
        }
        let Some(tip) =
            git_maybe(&repo, &["rev-parse", "--quiet", "--verify", &format!("refs/heads/{into}^{{commit}}")])?
        else {
            return Err(Error::Refused(format!("{into} is not a branch of {}", repo.display())));
        };
        let contained = run_status(&repo, &["merge-base", "--is-ancestor", source, &tip])?;
        Ok(contained.then_some(tip))
    }

    /// The full commit id `rev` names in `repo`, if it names a commit.
    pub fn commit_of(&self, repo: &str, rev: &str) -> Result<Option<String>, Error> {
        let repo = self.repository(repo)?;
        if rev.starts_with('-') || rev.len() > 255 {
            return Ok(None);
        }
        git_maybe(&repo, &["rev-parse", "--quiet", "--verify", "--end-of-options", &format!("{rev}^{{commit}}")])
    }

    /// The repository (common Git directory) of the worktree or directory
    /// `dir`, normalised: how a repository is named in ownership records.
    pub fn repository_of(&self, dir: &Path) -> Result<String, Error> {
        let out = git(dir, &["rev-parse", "--path-format=absolute", "--git-common-dir"])?;
        text(&std::fs::canonicalize(out.trim())?)
    }

    /// The top level of the worktree `dir` is in, normalised.
    pub fn top_level_of(&self, dir: &Path) -> Result<String, Error> {
        let out = git(dir, &["rev-parse", "--path-format=absolute", "--show-toplevel"])?;
        text(&std::fs::canonicalize(out.trim())?)
    }

    /// A recorded repository's Git directory, checked to be one.
    fn repository(&self, repo: &str) -> Result<PathBuf, Error> {
        if !valid_path(repo) {
            return Err(Error::Refused(format!("{repo:?} is not a normalised repository path")));
        }
        let dir = PathBuf::from(repo);
        git(&dir, &["rev-parse", "--git-dir"])?;
        Ok(dir)
    }
}

/// Whether a worktree directory is gone (what a removal record needs).
pub fn gone(path: &str) -> bool {
    !Path::new(path).exists()
}

/// The reason a linked worktree is locked with, if it is locked.
fn worktree_lock(path: &Path) -> Result<Option<String>, Error> {
    let dir = git(path, &["rev-parse", "--path-format=absolute", "--git-dir"])?;
    match std::fs::read_to_string(Path::new(dir.trim()).join("locked")) {
        Ok(reason) => Ok(Some(reason.trim_end().to_owned())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e.into()),
    }
}

fn text(path: &Path) -> Result<String, Error> {
    let text = path.to_str().ok_or_else(|| Error::Refused(format!("{} is not UTF-8", path.display())))?;
    match valid_path(text) {
        true => Ok(text.to_owned()),
        false => Err(Error::Refused(format!(
            "{text:?} is not a normalised path of at most {} bytes",
            protocol::ownership::PATH_MAX
        ))),
    }
}

/// An absolute path with its `.` and `..` applied by their text.
fn lexical(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            std::path::Component::ParentDir => {
                out.pop();
            }
            std::path::Component::CurDir => {}
            part => out.push(part),
        }
    }
    out
}

/// `git` in `dir`; its standard output, or an error.
fn git(dir: &Path, args: &[&str]) -> Result<String, Error> {
    run(dir, args, &[])
}

/// `git` in `dir` where an exit of 1 with nothing printed means "none".
fn git_maybe(dir: &Path, args: &[&str]) -> Result<Option<String>, Error> {
    match output(dir, args, &[])? {
        (0, out, _) => Ok(Some(out.trim_end_matches('\n').to_owned()).filter(|s| !s.is_empty())),
        (1, _, err) if err.trim().is_empty() => Ok(None),
        (code, _, err) => Err(failed(args, code, &err)),
    }
}

/// `git` in `dir` as a yes/no question (exit 0 or 1; for `update-ref`,
/// a ref that already exists is a no).
fn run_status(dir: &Path, args: &[&str]) -> Result<bool, Error> {
    match output(dir, args, &[])? {
        (0, _, _) => Ok(true),
        (1, _, err) if err.trim().is_empty() => Ok(false),
        (_, _, err) if args.first() == Some(&"update-ref") && err.contains("already exists") => Ok(false),
        (code, _, err) => Err(failed(args, code, &err)),
    }
}

fn run(dir: &Path, args: &[&str], env: &[(&str, &OsStr)]) -> Result<String, Error> {
    match output(dir, args, env)? {
        (0, out, _) => Ok(out),
        (code, _, err) => Err(failed(args, code, &err)),
    }
}

fn failed(args: &[&str], code: i32, err: &str) -> Error {
    let err: String = err.trim().chars().take(500).collect();
    Error::Git { args: args.join(" "), detail: format!("exit {code}: {err}") }
}

/// Settings that override every config key naming a program Git could run
/// for the commands this adapter uses (command-line `-c` wins over every
/// config file, included ones too, and reaches Git's own child processes):
/// no hooks (`update-ref` fires one), no file-system monitor, no signing
/// program, no external diff, pager, editor, credential helper or ssh
/// command, no network protocol at all, no attributes file of the user's,
/// and no recursion into submodules (whose config is not read here). The
/// filter, diff and merge drivers a repository defines are named by it, so
/// they are found per run and emptied ([`driver_overrides`]).
const NEUTRAL: &[&str] = &[
    "core.hooksPath=/dev/null",
    "core.fsmonitor=false",
    "core.pager=cat",
    "core.editor=:",
    "sequence.editor=:",
    "core.sshCommand=",
    "core.askPass=",
    "core.attributesFile=/dev/null",
    "credential.helper=",
    "diff.external=",
    "commit.gpgSign=false",
    "tag.gpgSign=false",
    "gpg.program=/bin/false",
    "protocol.allow=never",
    "submodule.recurse=false",
];

/// Variables that would make Git read other config, run a program, or act
/// elsewhere. Git runs with `GIT_CONFIG_NOSYSTEM`, the global config
/// `/dev/null` and `HOME=/dev/null` (nothing of the user's is read): the
/// daemon trusts no config but the repository's own, neutralised. No
/// `safe.directory` is given, so a repository owned by another user is
/// refused by Git itself (`dubious ownership`), as it should be.
const SCRUBBED: &[&str] = &[
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_COMMON_DIR",
    "GIT_OBJECT_DIRECTORY",
    "GIT_CEILING_DIRECTORIES",
    "GIT_CONFIG",
    "GIT_CONFIG_PARAMETERS",
    "GIT_CONFIG_COUNT",
    "GIT_CONFIG_SYSTEM",
    "GIT_EXTERNAL_DIFF",
    "GIT_PAGER",
    "PAGER",
    "GIT_EDITOR",
    "VISUAL",
    "EDITOR",
    "GIT_SSH",
    "GIT_SSH_COMMAND",
    "GIT_ASKPASS",
    "SSH_ASKPASS",
    "GIT_PROXY_COMMAND",
    "GIT_ATTR_SOURCE",
    "XDG_CONFIG_HOME",
];

/// Commands of this adapter that never read a worktree file's content.
const NO_CONTENT: &[&str] =
    &["config", "rev-parse", "symbolic-ref", "update-ref", "merge-base", "commit-tree", "worktree"];

/// `-c` settings that empty every filter, diff and merge driver `dir`'s
/// config defines (directly or through includes): an emptied filter runs
/// nothing and is not required, so the content is taken as it is on disk.
/// Reading config runs nothing.
fn driver_overrides(dir: &Path) -> Result<Vec<String>, Error> {
    let names = match output_with(dir, &["config", "--name-only", "--get-regexp", r"^(filter|diff|merge)\."], &[], &[])?
    {
        (0, out, _) => out,
        (1, _, _) => String::new(),
        (code, _, err) => return Err(failed(&["config", "--get-regexp"], code, &err)),
    };
    let mut overrides = Vec::new();
    for name in names.lines().map(str::trim).filter(|n| !n.is_empty()) {
        let Some((section, rest)) = name.split_once('.') else { continue };
        let Some((driver, _)) = rest.rsplit_once('.') else { continue };
        let keys: &[&str] = match section {
            "filter" => &["clean=", "smudge=", "process=", "required=false"],
            "diff" => &["textconv=", "command=", "cachetextconv=false"],
            "merge" => &["driver="],
            _ => continue,
        };
        for key in keys {
            let setting = format!("{section}.{driver}.{key}");
            if !overrides.contains(&setting) {
                overrides.push(setting);
            }
        }
    }
    Ok(overrides)
}

/// Runs `git -C dir args` with a clean environment and a deadline: its
/// exit code, standard output and standard error (each bounded).
fn output(dir: &Path, args: &[&str], env: &[(&str, &OsStr)]) -> Result<(i32, String, String), Error> {
    // Any command that looks at a file's content may run a driver (even
    // `write-tree` refreshes racy index entries through the filters): every
    // run gets them emptied but those that read only refs, objects and
    // config (one `git config` less each).
    let drivers = match args.first() {
        Some(command) if NO_CONTENT.contains(command) => Vec::new(),
        _ => driver_overrides(dir)?,
    };
    output_with(dir, args, env, &drivers)
}

fn output_with(
    dir: &Path,
    args: &[&str],
    env: &[(&str, &OsStr)],
    drivers: &[String],
) -> Result<(i32, String, String), Error> {
    let mut command = Command::new("git");
    // A repository's own config must not make the daemon run its code.
    for setting in NEUTRAL.iter().copied().chain(drivers.iter().map(String::as_str)) {
        command.args(["-c", setting]);
    }
    command.arg("-C").arg(dir).args(args);
    command.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    for var in SCRUBBED {
        command.env_remove(var);
    }
    command.env("GIT_CONFIG_NOSYSTEM", "1").env("GIT_CONFIG_GLOBAL", "/dev/null").env("HOME", "/dev/null");
    command.env("LC_ALL", "C").env("GIT_TERMINAL_PROMPT", "0").env("GIT_OPTIONAL_LOCKS", "0");
    for (key, value) in env {
        command.env(key, value);
    }
    let mut child = command.spawn()?;
    let (mut stdout, mut stderr) = (child.stdout.take().expect("piped"), child.stderr.take().expect("piped"));
    // Each stream is kept up to its bound and the rest drained (a reader
    // that stopped would kill git with SIGPIPE).
    let err_reader = std::thread::spawn(move || {
        let mut err = Vec::new();
        let _ = (&mut stderr).take(OUTPUT_MAX).read_to_end(&mut err);
        let _ = std::io::copy(&mut stderr, &mut std::io::sink());
        String::from_utf8_lossy(&err).into_owned()
    });
    let out_reader = std::thread::spawn(move || {
        let mut out = Vec::new();
        let _ = (&mut stdout).take(OUTPUT_MAX).read_to_end(&mut out);
        let _ = std::io::copy(&mut stdout, &mut std::io::sink());
        out
    });
    let deadline = Instant::now() + GIT_DEADLINE;
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break status;
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            return Err(Error::Git { args: args.join(" "), detail: format!("no answer in {GIT_DEADLINE:?}") });
        }
        std::thread::sleep(Duration::from_millis(2));
    };
    let out = String::from_utf8_lossy(&out_reader.join().unwrap_or_default()).into_owned();
    let err = err_reader.join().unwrap_or_default();
    Ok((status.code().unwrap_or(-1), out, err))
}
