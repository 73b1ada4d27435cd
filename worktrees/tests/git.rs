//! The adapter against the real `git`, in a temporary repository.

use std::path::{Path, PathBuf};
use std::process::Command;

use worktrees::{Error, Git, Projection};

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git").arg("-C").arg(dir).args(args).output().expect("git runs");
    assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

/// `root/repo` (main, one commit) and its linked worktree `root/wt-a` on `work/a`.
fn repo() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let root = tempfile::tempdir().unwrap();
    let repo = root.path().join("repo");
    std::fs::create_dir(&repo).unwrap();
    git(&repo, &["init", "-q", "-b", "main"]);
    git(&repo, &["config", "user.name", "Test"]);
    git(&repo, &["config", "user.email", "test@localhost"]);
    std::fs::write(repo.join("README"), "hello\n").unwrap();
    git(&repo, &["add", "README"]);
    git(&repo, &["commit", "-q", "-m", "first"]);
    let wt = root.path().join("wt-a");
    git(&repo, &["worktree", "add", "-q", "-b", "work/a", wt.to_str().unwrap()]);
    let (repo, wt) = (std::fs::canonicalize(repo).unwrap(), std::fs::canonicalize(wt).unwrap());
    (root, repo, wt)
}

fn projection(live: bool) -> Projection {
    Projection {
        id: "own_0123456789abcdef0123456789abcdef".into(),
        state: if live { "active" } else { "landed" }.into(),
        live,
        worker: "wrk_11111111111111111111111111111111".into(),
        session: "s-1".into(),
        conversation: None,
        claimed_ms: 1,
        last_seen_ms: 2,
        labels: vec![("lane", "backend".into())],
    }
}

#[test]
fn a_linked_worktree_is_read_exactly() {
    let (root, repo, wt) = repo();
    let adapter = Git::new(&[root.path().to_owned()]).unwrap();
    let seen = adapter.inspect(&wt).unwrap();
    assert_eq!(seen.worktree.path, wt.to_str().unwrap());
    assert_eq!(seen.worktree.repo, repo.join(".git").to_str().unwrap());
    assert_eq!(seen.worktree.branch.as_deref(), Some("work/a"));
    assert_eq!(seen.worktree.head.as_deref(), Some(git(&repo, &["rev-parse", "HEAD"]).as_str()));
    assert!(!seen.main && !seen.dirty && seen.projected.is_none());
    assert!(adapter.inspect(&repo).unwrap().main);
    assert_eq!(adapter.repository_of(&wt).unwrap(), seen.worktree.repo);
    // Through a symbolic link: the same worktree, normalised.
    let link = root.path().join("link");
    std::os::unix::fs::symlink(&wt, &link).unwrap();
    assert_eq!(adapter.inspect(&link).unwrap().worktree.path, seen.worktree.path);
}

#[test]
fn paths_outside_the_roots_or_below_a_top_level_are_refused() {
    let (root, repo, wt) = repo();
    let adapter = Git::new(std::slice::from_ref(&wt)).unwrap();
    assert!(matches!(adapter.inspect(&repo), Err(Error::Outside(_))), "outside the one root");
    let escape = wt.join("..").join("repo");
    assert!(matches!(adapter.inspect(&escape), Err(Error::Outside(_))), "`..` does not escape");
    std::fs::create_dir(wt.join("sub")).unwrap();
    assert!(matches!(adapter.inspect(&wt.join("sub")), Err(Error::NotAWorktree { .. })), "not its top level");
    let plain = root.path().join("plain");
    std::fs::create_dir(&plain).unwrap();
    let adapter = Git::new(&[root.path().to_owned()]).unwrap();
    assert!(matches!(adapter.inspect(&plain), Err(Error::NotAWorktree { .. })), "not a repository");
    assert!(matches!(adapter.inspect(&root.path().join("missing")), Err(Error::NotAWorktree { .. })));
    assert!(Git::new(&[root.path().join("missing")]).is_err(), "a root must exist");
}

#[test]
fn the_projection_lives_in_git_config_never_in_the_tree_and_locks_while_held() {
    let (root, repo, wt) = repo();
    let adapter = Git::new(&[root.path().to_owned()]).unwrap();
    adapter.project(&wt, &projection(true)).unwrap();
    assert_eq!(git(&wt, &["status", "--porcelain", "--ignored"]), "", "the worktree is not dirtied");
    assert_eq!(git(&repo, &["status", "--porcelain", "--ignored"]), "", "nor the main one");
    let entries = adapter.read(&wt).unwrap();
    assert!(entries.contains(&("id".into(), "own_0123456789abcdef0123456789abcdef".into())), "{entries:?}");
    assert!(entries.contains(&("lane".into(), "backend".into())));
    assert!(adapter.read(&repo).unwrap().is_empty(), "per worktree: the main worktree has none");
    assert_eq!(adapter.inspect(&wt).unwrap().projected.as_deref(), Some("own_0123456789abcdef0123456789abcdef"));
    let listing = git(&repo, &["worktree", "list", "--porcelain"]);
    assert!(listing.contains("locked orchestrator-owner own_0123456789abcdef0123456789abcdef"), "{listing}");
    let remove =
        Command::new("git").arg("-C").arg(&repo).args(["worktree", "remove", wt.to_str().unwrap()]).output().unwrap();
    assert!(!remove.status.success(), "a held worktree is not removed by accident");
    adapter.project(&wt, &projection(true)).unwrap();
    adapter.project(&wt, &projection(false)).unwrap();
    assert!(!git(&repo, &["worktree", "list", "--porcelain"]).contains("locked"), "unlocked once not held");
    assert_eq!(adapter.inspect(&wt).unwrap().projected, None);
    git(&repo, &["worktree", "remove", wt.to_str().unwrap()]);
    assert!(worktrees::gone(wt.to_str().unwrap()));
}

#[test]
fn a_lock_someone_else_took_is_not_taken_over() {
    let (root, repo, wt) = repo();
    git(&repo, &["worktree", "lock", "--reason", "on a USB stick", wt.to_str().unwrap()]);
    let adapter = Git::new(&[root.path().to_owned()]).unwrap();
    assert!(matches!(adapter.project(&wt, &projection(true)), Err(Error::Refused(_))));
}

#[test]
fn a_bare_repository_with_core_bare_in_its_shared_config_is_refused() {
    let root = tempfile::tempdir().unwrap();
    let (_source, repo, _) = repo();
    let bare = root.path().join("bare.git");
    git(root.path(), &["clone", "-q", "--bare", repo.to_str().unwrap(), bare.to_str().unwrap()]);
    let wt = root.path().join("wt");
    git(&bare, &["worktree", "add", "-q", wt.to_str().unwrap(), "main"]);
    let adapter = Git::new(&[root.path().to_owned()]).unwrap();
    assert!(matches!(adapter.project(&wt, &projection(true)), Err(Error::Unsafe(_))));
    let enabled =
        Command::new("git").arg("-C").arg(&bare).args(["config", "extensions.worktreeConfig"]).output().unwrap();
    assert!(enabled.stdout.is_empty(), "nothing was changed");
}

#[test]
fn work_in_progress_is_preserved_without_touching_the_worktree() {
    let (root, repo, wt) = repo();
    let adapter = Git::new(&[root.path().to_owned()]).unwrap();
    assert_eq!(adapter.preserve_wip(&wt, "own_x", 1).unwrap(), None, "nothing beyond HEAD");
    std::fs::write(wt.join("README"), "changed\n").unwrap();
    std::fs::write(wt.join("new.txt"), "untracked\n").unwrap();
    let before = git(&wt, &["status", "--porcelain"]);
    assert!(adapter.inspect(&wt).unwrap().dirty);
    let (name, commit) = adapter.preserve_wip(&wt, "own_x", 1).unwrap().expect("a snapshot");
    assert_eq!(name, "refs/orchestrator/wip/own_x/1");
    assert_eq!(git(&wt, &["status", "--porcelain"]), before, "the worktree and its index are untouched");
    assert_eq!(git(&repo, &["rev-parse", &name]), commit);
    assert_eq!(git(&repo, &["show", &format!("{commit}:new.txt")]), "untracked");
    assert_eq!(git(&repo, &["show", &format!("{commit}:README")]), "changed");
    assert_eq!(git(&repo, &["rev-parse", &format!("{commit}^")]), git(&wt, &["rev-parse", "HEAD"]));
    // A ref is only created: a snapshot under 1 is kept and the next takes 2.
    std::fs::write(wt.join("new.txt"), "more\n").unwrap();
    let (second, other) = adapter.preserve_wip(&wt, "own_x", 1).unwrap().expect("a snapshot");
    assert_eq!(second, "refs/orchestrator/wip/own_x/2");
    assert_eq!(git(&repo, &["rev-parse", &name]), commit, "the first is untouched");
    assert_ne!(other, commit);
}

#[test]
fn a_repository_hook_never_runs_and_a_huge_status_is_read() {
    let (root, repo, wt) = repo();
    let hooks = repo.join(".git/hooks");
    std::fs::create_dir_all(&hooks).unwrap();
    let marker = root.path().join("hook-ran");
    let hook = hooks.join("reference-transaction");
    std::fs::write(&hook, format!("#!/bin/sh\ntouch {}\n", marker.display())).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).unwrap();
    for i in 0..30_000 {
        std::fs::write(wt.join(format!("untracked-file-with-a-long-name-{i:05}.txt")), "x").unwrap();
    }
    let adapter = Git::new(&[root.path().to_owned()]).unwrap();
    assert!(adapter.inspect(&wt).unwrap().dirty, "more than the output bound, still read");
    assert!(adapter.preserve_wip(&wt, "own_h", 1).unwrap().is_some());
    assert!(!marker.exists(), "the repository's hook did not run");
}

#[test]
fn a_landing_is_confirmed_only_once_the_commit_is_on_the_branch() {
    let (root, repo, wt) = repo();
    let adapter = Git::new(&[root.path().to_owned()]).unwrap();
    std::fs::write(wt.join("feature.txt"), "x\n").unwrap();
    git(&wt, &["add", "feature.txt"]);
    git(&wt, &["-c", "user.name=T", "-c", "user.email=t@l", "commit", "-q", "-m", "feature"]);
    let source = git(&wt, &["rev-parse", "HEAD"]);
    let repo_key = adapter.repository_of(&wt).unwrap();
    assert_eq!(adapter.landed_at(&repo_key, "main", &source).unwrap(), None);
    git(&repo, &["merge", "-q", "--no-ff", "-m", "land", "work/a"]);
    let tip = git(&repo, &["rev-parse", "main"]);
    assert_eq!(adapter.landed_at(&repo_key, "main", &source).unwrap(), Some(tip.clone()));
    assert!(matches!(adapter.landed_at(&repo_key, "nope", &source), Err(Error::Refused(_))));
    assert_eq!(adapter.commit_of(&repo_key, "main").unwrap(), Some(tip.clone()));
    assert_eq!(adapter.commit_of(&repo_key, &tip[..10]).unwrap(), Some(tip));
    assert_eq!(adapter.commit_of(&repo_key, "--help").unwrap(), None);
    assert_eq!(adapter.commit_of(&repo_key, "no-such-rev").unwrap(), None);
    assert_eq!(adapter.top_level_of(&wt.join(".")).unwrap(), wt.to_str().unwrap());
}

/// Plants a vector in a repository (repo, worktree, the program's path).
type Plant = fn(&Path, &Path, &str);

/// A script that touches `marker` when run, and its path (quoted for config).
fn script(dir: &Path, name: &str, marker: &Path) -> String {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join(name);
    std::fs::write(&path, format!("#!/bin/sh\ntouch {}\ncat\n", marker.display())).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path.display().to_string()
}

/// Issue 43, finding 2: nothing a repository's configuration names runs in
/// the daemon: a clean or process filter (set directly, through
/// `include.path`, or named from `.git/info/attributes`), commit signing
/// with a `gpg.program`, and the same through every path the adapter takes
/// (inspect, projection, WIP snapshot). Each vector leaves a marker file
/// when its program runs.
#[test]
fn no_program_a_repositorys_config_names_ever_runs() {
    let vectors: &[(&str, Plant)] = &[
        ("filter.clean", |repo, _wt, prog| {
            git(repo, &["config", "filter.evil.clean", prog]);
            git(repo, &["config", "filter.evil.smudge", prog]);
        }),
        ("filter.process", |repo, _wt, prog| {
            git(repo, &["config", "filter.evil.process", prog]);
            git(repo, &["config", "filter.evil.required", "true"]);
        }),
        ("include.path", |repo, _wt, prog| {
            let included = repo.join("evil.config");
            std::fs::write(&included, format!("[filter \"evil\"]\n\tclean = {prog}\n\trequired = true\n")).unwrap();
            git(repo, &["config", "include.path", included.to_str().unwrap()]);
        }),
        ("gpg.program", |repo, _wt, prog| {
            git(repo, &["config", "commit.gpgSign", "true"]);
            git(repo, &["config", "gpg.program", prog]);
        }),
        ("diff.external and a textconv", |repo, _wt, prog| {
            git(repo, &["config", "diff.external", prog]);
            git(repo, &["config", "diff.evil.textconv", prog]);
            git(repo, &["config", "core.pager", prog]);
        }),
    ];
    for (name, plant) in vectors {
        let (root, repo, wt) = repo();
        let marker = root.path().join("ran");
        let prog = script(root.path(), "evil.sh", &marker);
        plant(&repo, &wt, &prog);
        // Named from the worktree's attributes and from the repository's own.
        std::fs::write(wt.join(".gitattributes"), "* filter=evil diff=evil\n").unwrap();
        std::fs::create_dir_all(repo.join(".git/info")).unwrap();
        std::fs::write(repo.join(".git/info/attributes"), "* filter=evil diff=evil\n").unwrap();
        std::fs::write(wt.join("README"), "changed by the person\n").unwrap();
        std::fs::write(wt.join("new.txt"), "untracked\n").unwrap();
        let adapter = Git::new(&[root.path().to_owned()]).unwrap();
        let seen = adapter.inspect(&wt).unwrap();
        assert!(seen.dirty, "{name}");
        adapter.project(&wt, &projection(true)).unwrap();
        // What `orchestrator who <path>` asks of the same adapter.
        assert_eq!(adapter.top_level_of(&wt.join(".")).unwrap(), wt.to_str().unwrap(), "{name}");
        adapter.repository_of(&wt).unwrap();
        adapter.commit_of(&repo.join(".git").display().to_string(), "main").unwrap();
        let snapshot = adapter.preserve_wip(&wt, "own_v", 1).unwrap();
        assert!(snapshot.is_some(), "{name}: the work is still preserved");
        assert!(!marker.exists(), "{name}: the repository's program ran in the daemon");
    }
}

/// Issue 43: a relative path is refused (never resolved against the
/// daemon's working directory), and a path outside the roots is refused
/// alike whether it exists or not: the answer tells nothing of the host.
#[test]
fn a_claim_is_absolute_and_tells_nothing_of_paths_outside_the_roots() {
    let (root, _repo, _wt) = repo();
    let adapter = Git::new(&[root.path().join("wt-a")]).unwrap();
    assert!(matches!(adapter.inspect(Path::new("wt-a")), Err(Error::Refused(_))));
    let outside_existing = adapter.inspect(&root.path().join("repo")).unwrap_err();
    let outside_missing = adapter.inspect(Path::new("/nonexistent-orchestrator-test/x")).unwrap_err();
    assert!(matches!(outside_existing, Error::Outside(_)), "{outside_existing}");
    assert!(matches!(outside_missing, Error::Outside(_)), "{outside_missing}");
    let inside_missing = adapter.inspect(&root.path().join("wt-a/../wt-a/nothere")).unwrap_err();
    assert!(matches!(inside_missing, Error::NotAWorktree { .. }), "{inside_missing}");
}
