//! The crash torture's ownership part (issue 35, the plan's O8): the daemon is
//! SIGKILLed at each of the eight boundaries of the ownership plan, with
//! real Git worktrees, and every case converges with one record per
//! worktree and no provenance lost.
//!
//! A kill lands exactly between a durable change and its Git projection:
//! the daemon runs `git` through a wrapper that, while a gate file exists,
//! holds every projection write (`config --worktree`, `worktree lock`) and
//! says so; the test then kills the daemon there. No hook in the product.
//!
//! 1. the worktree exists, the daemon dies before the claim is recorded;
//! 2. the claim is recorded, the daemon dies before its projection;
//! 3. claims made before the workers' conversations exist converge when
//!    their executor binds them, the daemon killed as the first are created
//!    (`ownership.conversation_bound`);
//! 4. the holder's session dies with uncommitted work, and the reclaim dies
//!    after its snapshot's ref is written, before anything is recorded: made
//!    again, one reclaim and one WIP record, both snapshots kept;
//! 5. a handoff starts, and is accepted, the daemon dying before each
//!    projection;
//! 6. a submit is recorded, the daemon dies before its projection (the push
//!    is the consumer's; nothing is pushed here);
//! 7. the branch lands in Git, the daemon dies before the receipt is recorded;
//! 8. the landing is recorded, the daemon dies, the worktree is deleted at once.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::support::{self, Attempt, Daemon, Mcp, credential, git, git_fixture, ws_url};
use fake_executor::{FakeConfig, FakeExecutor};
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(30);

/// The daemon's `git`: the real one, except while the file
/// `$OWNERSHIP_GATE` exists. It says where to hold: `projection` holds a
/// projection write before it is made, `wip` holds a WIP snapshot's ref
/// once it is written; either writes its process id into
/// `$OWNERSHIP_GATE.held` and waits.
fn gated_git(dir: &Path) -> PathBuf {
    let real = support::git(Path::new("/"), &["--exec-path"]);
    let real = Path::new(&real).join("git");
    let real = if real.exists() { real } else { PathBuf::from("/usr/bin/git") };
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let script = format!(
        r#"#!/bin/sh
mode=""
[ -e "$OWNERSHIP_GATE" ] && mode=$(cat "$OWNERSHIP_GATE")
hold() {{ echo $$ > "$OWNERSHIP_GATE.held"; while [ -e "$OWNERSHIP_GATE" ]; do sleep 0.02; done; }}
case "$mode:$*" in
  projection:*'config --worktree'*|projection:*'worktree lock'*|projection:*'worktree unlock'*) hold ;;
  wip:*'update-ref refs/orchestrator/wip/'*) {real} "$@"; status=$?; hold; exit $status ;;
esac
exec {real} "$@"
"#,
        real = real.display()
    );
    let path = bin.join("git");
    std::fs::write(&path, script).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    bin
}

struct Rig {
    state: tempfile::TempDir,
    trees: tempfile::TempDir,
    gate: PathBuf,
    path_env: String,
    root_arg: String,
    daemon: Option<Daemon>,
    addr: String,
}

impl Rig {
    fn new(names: &[&str]) -> Rig {
        let state = tempfile::tempdir().unwrap();
        let trees = tempfile::tempdir().unwrap();
        git_fixture(trees.path(), names);
        let bin = gated_git(state.path());
        let path_env = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
        let gate = state.path().join("gate");
        let root_arg = std::fs::canonicalize(trees.path()).unwrap().display().to_string();
        let mut rig = Rig { state, trees, gate, path_env, root_arg, daemon: None, addr: "127.0.0.1:0".into() };
        rig.start();
        rig
    }

    fn start(&mut self) {
        let env = [("PATH", self.path_env.as_str()), ("OWNERSHIP_GATE", self.gate.to_str().unwrap())];
        let daemon = Daemon::start_at_with(self.state.path(), &self.addr, &["--worktree-root", &self.root_arg], &env);
        self.addr = daemon.addr.clone();
        self.daemon = Some(daemon);
    }

    fn kill9(&mut self) {
        self.daemon.take().expect("running").kill9();
    }

    fn mcp(&self) -> Mcp {
        Mcp::connect(&self.addr)
    }

    fn tree(&self, name: &str) -> String {
        std::fs::canonicalize(self.trees.path().join(name)).unwrap().display().to_string()
    }

    fn repo(&self) -> PathBuf {
        self.trees.path().join("repo")
    }

    /// Runs `call` on its own thread with the gate shut, waits until a
    /// projection write is held, and SIGKILLs the daemon there: the change
    /// is durable, its projection not written. Returns what the caller saw.
    fn kill_at_projection(&mut self, call: impl FnOnce(Mcp) -> Attempt + Send + 'static) -> Attempt {
        self.kill_at("projection", call)
    }

    /// Runs `call` with the gate shut at `mode` (see [`gated_git`]) and
    /// SIGKILLs the daemon once git holds there.
    fn kill_at(&mut self, mode: &str, call: impl FnOnce(Mcp) -> Attempt + Send + 'static) -> Attempt {
        let held = PathBuf::from(format!("{}.held", self.gate.display()));
        let _ = std::fs::remove_file(&held);
        std::fs::write(&self.gate, mode).unwrap();
        let mcp = self.mcp();
        let caller = std::thread::spawn(move || call(mcp));
        let deadline = Instant::now() + WAIT;
        while std::fs::read_to_string(&held).map_or(true, |pid| pid.trim().is_empty()) {
            assert!(Instant::now() < deadline, "git never held at {mode}");
            std::thread::sleep(Duration::from_millis(10));
        }
        self.kill9();
        // The held git outlives the daemon it was a child of: it dies too,
        // or it would write the projection after all (racing the test's
        // own Git commands) once the gate opens.
        let pid = std::fs::read_to_string(&held).unwrap();
        let _ = std::process::Command::new("kill").args(["-9", pid.trim()]).status();
        std::fs::remove_file(&self.gate).unwrap();
        caller.join().unwrap()
    }
}

fn record(out: &Value) -> &Value {
    out["records"].as_array().and_then(|r| r.last()).unwrap_or_else(|| panic!("no record: {out}"))
}

/// The worktree's owner entries in its own Git config.
fn projected(tree: &str) -> Vec<String> {
    let out = std::process::Command::new("git")
        .args(["-C", tree, "config", "--worktree", "--get-regexp", r"^orchestrator\.owner\."])
        .output()
        .unwrap();
    String::from_utf8(out.stdout).unwrap().lines().map(str::to_owned).collect()
}

fn projected_key(tree: &str, key: &str) -> Option<String> {
    let prefix = format!("orchestrator.owner.{key} ");
    projected(tree).iter().find_map(|line| line.strip_prefix(&prefix).map(str::to_owned))
}

fn commit(tree: &str, file: &str) -> String {
    std::fs::write(Path::new(tree).join(file), format!("{file}\n")).unwrap();
    git(Path::new(tree), &["add", file]);
    git(Path::new(tree), &["-c", "user.name=T", "-c", "user.email=t@l", "commit", "-q", "-m", file]);
    git(Path::new(tree), &["rev-parse", "HEAD"])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ownership_converges_after_a_kill_at_each_of_the_eight_boundaries() {
    let names = ["w1", "w2", "w4", "w5", "w6", "w7", "w8"];
    let mut rig = Rig::new(&names);
    let repo = rig.repo();
    let c = rig.mcp();
    // A plain client no browser sees: capability-only identity. No executor
    // yet: every worker's conversation is still to be created (point 3).
    let run = c.ok("run_create", json!({"title": "ownership chaos", "attribution": "capability_only"}));
    let root = run["root_capability"].as_str().unwrap().to_owned();
    let mut caps = std::collections::HashMap::new();
    let mut ids = std::collections::HashMap::new();
    for name in ["a", "b", "d", "e"] {
        let spawned =
            c.ok("worker_spawn", json!({"capability": root, "name": name, "assignment": {"objective": name}}));
        let prompt = spawned["bootstrap_prompt"].as_str().unwrap();
        let identity = prompt.split('"').find(|p| p.starts_with("att_")).unwrap();
        let attached = c.ok("worker_attach", json!({"attach_identity": identity}));
        caps.insert(name, attached["capability"].as_str().unwrap().to_owned());
        ids.insert(name, spawned["worker"]["worker_id"].as_str().unwrap().to_owned());
    }
    let claim = |cap: &str, tree: &str, session: &str| json!({"capability": cap, "worktree": tree, "session": session});
    let update = |cap: &str, id: &str, op: &str| json!({"capability": cap, "ownership_id": id, "op": op});

    // 1. The daemon dies before the claim is recorded: the claim fails
    // (nothing answers), and made again after the restart it is the one record.
    rig.kill9();
    assert!(Mcp::try_connect_at(&rig.addr, "/mcp").is_none(), "the daemon is down");
    rig.start();
    let w1 = rig.tree("w1");
    let own1 = record(&rig.mcp().ok("ownership_claim", claim(&caps["a"], &w1, "a-1")))["ownership_id"].clone();

    // 2. The claim is durable, its projection not written.
    let w2 = rig.tree("w2");
    let args = claim(&caps["a"], &w2, "a-1");
    let seen = rig.kill_at_projection(move |m| m.attempt("ownership_claim", args));
    assert!(matches!(seen, Attempt::Unknown), "{seen:?}");
    assert!(projected(&w2).is_empty(), "killed before its projection");
    rig.start();
    assert_eq!(projected_key(&w2, "worker").as_deref(), ids["a"].as_str().into(), "repaired at start");
    let again = rig.mcp().ok("ownership_claim", claim(&caps["a"], &w2, "a-1"));
    let own2 = record(&again)["ownership_id"].clone();
    assert_eq!(
        rig.mcp().ok("ownership_who", json!({"capability": root, "worktree": w2}))["records"].as_array().unwrap().len(),
        1
    );

    // 4. The holder's session dies with uncommitted work; the reclaim is
    // killed after its snapshot's ref is written, before anything is
    // recorded. Made again, it keeps that snapshot's ref and records its
    // own (the next), in the reclaim's commit: one reclaim, one WIP.
    let w4 = rig.tree("w4");
    let own4 = record(&rig.mcp().ok("ownership_claim", claim(&caps["d"], &w4, "d-1")))["ownership_id"].clone();
    std::fs::write(Path::new(&w4).join("draft.txt"), "d's draft\n").unwrap();
    rig.mcp().ok("worker_stop", json!({"capability": root, "worker_id": ids["d"], "reason": "its session died"}));
    let args = json!({"capability": caps["e"], "ownership_id": own4, "op": "reclaim", "session": "e-1"});
    let seen = rig.kill_at("wip", move |m| m.attempt("ownership_update", args));
    assert!(matches!(seen, Attempt::Unknown), "{seen:?}");
    rig.start();
    let before = rig.mcp().ok("ownership_who", json!({"capability": root, "worktree": w4}));
    assert_eq!(record(&before)["holder"]["worker_id"], ids["d"], "nothing was recorded: {before}");
    let orphan = git(&repo, &["rev-parse", &format!("refs/orchestrator/wip/{}/1", own4.as_str().unwrap())]);
    let reclaimed = rig.mcp().ok(
        "ownership_update",
        json!({"capability": caps["e"], "ownership_id": own4, "op": "reclaim", "session": "e-1"}),
    );
    let wip = &record(&reclaimed)["latest_wip"];
    assert_eq!(wip["ref_name"], format!("refs/orchestrator/wip/{}/2", own4.as_str().unwrap()), "{reclaimed}");
    assert_eq!(git(&repo, &["show", &format!("{}:draft.txt", wip["commit"].as_str().unwrap())]), "d's draft");
    assert_eq!(git(&repo, &["show", &format!("{orphan}:draft.txt")]), "d's draft", "the first snapshot is kept");
    assert_eq!(record(&reclaimed)["holder"]["worker_id"], ids["e"]);

    // 5. A handoff accepted, the daemon killed before the new projection.
    let w5 = rig.tree("w5");
    let own5 = record(&rig.mcp().ok("ownership_claim", claim(&caps["a"], &w5, "a-1")))["ownership_id"]
        .as_str()
        .unwrap()
        .to_owned();
    rig.mcp().ok(
        "ownership_update",
        json!({"capability": caps["a"], "ownership_id": own5, "op": "handoff", "to_worker": ids["b"]}),
    );
    let args = json!({"capability": caps["b"], "ownership_id": own5, "op": "accept", "session": "b-1"});
    rig.kill_at_projection(move |m| m.attempt("ownership_update", args));
    rig.start();
    assert_eq!(projected_key(&w5, "worker").as_deref(), Some(ids["b"].as_str()), "the new holder, repaired");
    let lock = git(&repo, &["worktree", "list", "--porcelain"]);
    assert!(lock.contains(&format!("worker={}", ids["b"])), "{lock}");

    // 6. A submit recorded, the daemon killed before its projection.
    let w6 = rig.tree("w6");
    let own6 = record(&rig.mcp().ok("ownership_claim", claim(&caps["b"], &w6, "b-1")))["ownership_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let head6 = commit(&w6, "six.txt");
    let args = update(&caps["b"], &own6, "submit");
    rig.kill_at_projection(move |m| m.attempt("ownership_update", args));
    rig.start();
    assert_eq!(projected_key(&w6, "state").as_deref(), Some("submitted"));
    let resubmitted = rig.mcp().ok("ownership_update", update(&caps["b"], &own6, "submit"));
    assert_eq!(record(&resubmitted)["submitted"]["head"], head6.as_str());

    // 7. The branch lands in Git, the daemon dies before the receipt.
    let w7 = rig.tree("w7");
    let own7 = record(&rig.mcp().ok("ownership_claim", claim(&caps["b"], &w7, "b-1")))["ownership_id"]
        .as_str()
        .unwrap()
        .to_owned();
    commit(&w7, "seven.txt");
    rig.mcp().ok("ownership_update", update(&caps["b"], &own7, "submit"));
    git(&repo, &["merge", "-q", "--no-ff", "-m", "land w7", "work/w7"]);
    let landed7 = git(&repo, &["rev-parse", "main"]);
    rig.kill9();
    rig.start();
    let landed = rig.mcp().ok("ownership_update", update(&root, &own7, "land"));
    assert_eq!(record(&landed)["landed"]["commit"], landed7.as_str());
    rig.mcp().ok("ownership_update", update(&root, &own7, "land"));

    // 8. The landing recorded, the daemon killed, the worktree deleted at once.
    let w8 = rig.tree("w8");
    let own8 = record(&rig.mcp().ok("ownership_claim", claim(&caps["e"], &w8, "e-1")))["ownership_id"]
        .as_str()
        .unwrap()
        .to_owned();
    commit(&w8, "eight.txt");
    rig.mcp().ok("ownership_update", update(&caps["e"], &own8, "submit"));
    git(&repo, &["merge", "-q", "--no-ff", "-m", "land w8", "work/w8"]);
    let landed8 = git(&repo, &["rev-parse", "main"]);
    let args = update(&root, &own8, "land");
    rig.kill_at_projection(move |m| m.attempt("ownership_update", args));
    // Still locked (its unlock was never written): a person forces it away.
    git(&repo, &["worktree", "remove", "--force", "--force", &w8]);
    rig.start();
    rig.mcp().ok("ownership_update", update(&root, &own8, "removed"));

    // 3. The executor arrives: every worker's conversation is created and
    // bound, and their provisional records converge.
    let fake = FakeExecutor::start(FakeConfig::new(
        ws_url(rig.daemon.as_ref().unwrap()),
        credential(rig.state.path(), "ext-1"),
        "ext-1",
    ));
    fake.wait_for(|s| s.connections >= 1, WAIT).await;
    let deadline = Instant::now() + WAIT;
    loop {
        let who = rig.mcp().ok("ownership_who", json!({"capability": root, "worktree": w1}));
        if record(&who)["state"] == "active" {
            assert_eq!(record(&who)["holder"]["conversations"].as_array().unwrap().len(), 1, "{who}");
            break;
        }
        assert!(Instant::now() < deadline, "the provisional claim never converged: {who}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // Every case: one record per worktree, nothing lost, the log gapless.
    let c = rig.mcp();
    for (tree, id) in [
        (&w1, own1.as_str().unwrap()),
        (&w2, own2.as_str().unwrap()),
        (&w4, own4.as_str().unwrap()),
        (&w5, &own5),
        (&w6, &own6),
        (&w7, &own7),
        (&w8, &own8),
    ] {
        let who = c.ok("ownership_who", json!({"capability": root, "worktree": tree}));
        let records = who["records"].as_array().unwrap();
        assert_eq!(records.len(), 1, "{tree}: {who}");
        assert_eq!(records[0]["ownership_id"], id, "{tree}");
    }
    for (commit, id, worker) in [(&landed7, &own7, "b"), (&landed8, &own8, "e")] {
        let who = c.ok("ownership_who", json!({"capability": root, "commit": commit}));
        assert_eq!(record(&who)["ownership_id"], id.as_str());
        assert_eq!(record(&who)["holder"]["worker_id"], ids[worker]);
    }
    assert_eq!(record(&c.ok("ownership_who", json!({"capability": root, "worktree": w8})))["state"], "removed");
    let page = c.ok("events_list", json!({"capability": root, "stream": "ownership", "limit": 500}));
    let events = page["events"].as_array().unwrap();
    e2e::history::gapless(events).unwrap();
    let claims = events.iter().filter(|e| e["type"] == "ownership.claimed").count();
    assert_eq!(claims, 7, "one claim per worktree");
    let landings = events.iter().filter(|e| e["type"] == "ownership.landed").count();
    assert_eq!(landings, 2, "each landing recorded once");
    let of = |kind: &str| events.iter().filter(|e| e["type"] == kind && e["data"]["ownership_id"] == own4).count();
    assert_eq!((of("ownership.reclaimed"), of("ownership.wip_preserved")), (1, 1), "one reclaim, one WIP");
    fake.stop().await;
}
