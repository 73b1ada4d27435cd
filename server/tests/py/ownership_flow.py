"""Worktree ownership through the Python MCP SDK (issue 35's acceptance).

usage: ownership_flow.py ORCHESTRATOR_BINARY STATE_DIR GIT_ROOT

GIT_ROOT holds `repo` (on main) and the linked worktrees `alpha`, `beta` and
`gamma` (branches work/<name>), made by the Rust test. The daemon serves
with `--worktree-root GIT_ROOT`; `doc_executor.DocExecutor` (an executor
written from the protocol doc) creates the workers' conversations and
attests every call their models make (caller attribution), as in
doc_executor_flow.py, whose daemon, peers and models this reuses.

Asserted as it goes:
  1. alpha claims its worktree (active at once: its conversation is bound),
     beta is refused it (OWNERSHIP_CONFLICT) and claims its own; a worker
     cannot change a record it does not hold (OWNERSHIP_NOT_HOLDER); root
     (in its own chat: no conversation, said as unknown) claims gamma and
     hands it to alpha;
  2. alpha commits and hands its worktree to beta, who accepts in a session
     of its own, commits, and submits; root merges work/alpha into main and
     records the landing (Git confirms it);
  3. `orchestrator who` by worktree, by branch and by the landed main commit
     names beta, its session and its conversation, with alpha before it;
  4. the worktree is removed (its lock was released at the landing) and the
     provenance stays; root stops beta, and alpha reclaims beta's dirty
     worktree, its work in progress preserved under a ref first;
  5. nothing stored names a credential or chat text; ownership events come
     through events_wait's ownership stream;
  6. the daemon is SIGKILLed and restarted: `orchestrator owners` and every
     worktree's Git projection are identical.
"""

import asyncio
import contextlib
import json
import sqlite3
import logging
import os
import subprocess
import sys
import time
import uuid

import doc_executor_flow as flow
from doc_executor import DocExecutor
from harness import ToolError

step = flow.step


class OwningModel(flow.Model):
    """A worker conversation's model that attaches and then waits: the test
    makes its ownership calls, each in a turn of its own shown on its page."""

    def __init__(self, *args):
        super().__init__(*args)
        self.capability = None
        self.attached = asyncio.Event()

    async def react(self, prompt):
        found = flow.ATT_RE.findall(prompt)
        assert len(found) == 1 and "cap_" not in prompt, prompt
        await self.peer.ensure_open()
        args = {"attach_identity": found[0], "catalog": self.peer.stamp}
        turn = "wfr_" + uuid.uuid4().hex
        deadline = time.monotonic() + 15
        while True:
            try:
                attached = await self.peer.call("worker_attach", args, page=self.page, turn=turn)
                break
            except ToolError as e:
                if e.code != "PEER_IDENTITY_UNRESOLVED" or time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.5)
        self.worker_id = attached["worker"]["worker_id"]
        self.capability = attached["capability"]
        self.attached.set()

    async def own(self, tool, **args):
        turn = "wfr_" + uuid.uuid4().hex
        return await self.peer.call(tool, {"capability": self.capability, **args}, page=self.page, turn=turn)


flow.Model = OwningModel  # flow.Models makes one per conversation


def git(cwd, *args):
    out = subprocess.run(["git", "-C", cwd, *args], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, (args, out.stderr)
    return out.stdout.strip()


def commit(worktree, name, who):
    with open(os.path.join(worktree, name), "w") as f:
        f.write(f"{name} by {who}\n")
    git(worktree, "add", name)
    git(worktree, "-c", f"user.name={who}", "-c", "user.email=t@localhost", "commit", "-q", "-m", f"{name} by {who}")
    return git(worktree, "rev-parse", "HEAD")


class Cli:
    def __init__(self, binary, state_dir, daemon):
        self.binary, self.state_dir, self.daemon = binary, state_dir, daemon

    def run(self, *args, cwd=None):
        out = subprocess.run([self.binary, *args, "--state-dir", self.state_dir, "--addr", self.daemon.listen],
                             capture_output=True, text=True, timeout=30, cwd=cwd)
        return out.returncode, out.stdout, out.stderr

    def json(self, *args, cwd=None):
        code, out, err = self.run(*args, "--json", cwd=cwd)
        assert code == 0, (args, code, out, err)
        return json.loads(out)


async def expect(code, coro):
    try:
        out = await coro
    except ToolError as e:
        assert e.code == code, f"expected {code}, got {e}"
        return
    raise AssertionError(f"expected {code}, got {out}")


def projections(*worktrees):
    """Each existing worktree's owner entries in its own Git config, and its lock."""
    seen = {}
    for wt in worktrees:
        if os.path.isdir(wt):
            entries = subprocess.run(["git", "-C", wt, "config", "--worktree", "--get-regexp", r"^orchestrator\.owner\."],
                                     capture_output=True, text=True).stdout
            seen[wt] = (sorted(entries.splitlines()), git(wt, "worktree", "list", "--porcelain"))
    return seen


async def main(binary, state_dir, git_root):
    state_dir = os.path.abspath(state_dir)
    repo, wt_a, wt_b, wt_g = (os.path.join(git_root, n) for n in ("repo", "alpha", "beta", "gamma"))
    flow.DAEMON_FLAGS.extend(["--worktree-root", git_root])
    daemon = flow.Daemon(binary, state_dir)
    executor = models = root = None
    try:
        credential = await daemon.pair("doc-executor")
        await daemon.start()
        executor = DocExecutor(daemon.executor_url, credential, reply_s=0.05)
        executor.start()
        await asyncio.wait_for(executor.connected.wait(), 10)
        models = flow.Models(executor, daemon.mcp_url)
        root = flow.Peer(daemon.mcp_url)
        cli = Cli(binary, state_dir, daemon)

        created = await root.call("run_create", {"title": "ownership flow"})
        cap = created["root_capability"]
        ids = {}
        for name in ("alpha", "beta"):
            out = await root.call("worker_spawn", {"capability": cap, "name": name,
                                                   "assignment": flow.assignment(f"build {name}")})
            ids[name] = out["worker"]["worker_id"]
        await flow.wait_until(lambda: all(executor.by_worker.get(w) in models.by_conversation for w in ids.values()),
                              20, "both conversations and their models")
        for w in ids.values():
            await asyncio.wait_for(models.model_of(w).attached.wait(), 20)
        alpha, beta = models.model_of(ids["alpha"]), models.model_of(ids["beta"])
        conv = {n: executor.by_worker[w] for n, w in ids.items()}
        step(f"1. alpha and beta attached in conversations {conv}")

        # 1. Claims.
        a_claim = await alpha.own("ownership_claim", worktree=wt_a, session="alpha-s1", lane="backend", plan="P-7")
        rec = a_claim["records"][-1]
        own_a = rec["ownership_id"]
        assert rec["state"] == "active", rec
        assert rec["holder"]["worker_id"] == ids["alpha"] and rec["holder"]["session"] == "alpha-s1", rec
        assert [c["uuid"] for c in rec["holder"]["conversations"]] == [conv["alpha"]], rec
        assert a_claim.get("projection_error") is None, a_claim
        again = await alpha.own("ownership_claim", worktree=wt_a, session="alpha-s1")
        assert again["records"][-1]["ownership_id"] == own_a, "a repeated claim is the same record"
        await expect("OWNERSHIP_CONFLICT", beta.own("ownership_claim", worktree=wt_a, session="beta-s1"))
        b_claim = await beta.own("ownership_claim", worktree=wt_b, session="beta-s1")
        own_b = b_claim["records"][-1]["ownership_id"]
        await expect("OWNERSHIP_NOT_HOLDER", beta.own("ownership_update", ownership_id=own_a, op="submit"))
        await expect("WORKTREE_REFUSED", alpha.own("ownership_claim", worktree="/etc", session="alpha-s1"))
        g_claim = await root.call("ownership_claim", {"capability": cap, "worktree": wt_g, "session": "root-s1"})
        rec_g = g_claim["records"][-1]
        assert rec_g["state"] == "active" and rec_g["holder"]["conversations"] == [], rec_g
        own_g = rec_g["ownership_id"]
        await root.call("ownership_update", {"capability": cap, "ownership_id": own_g, "op": "handoff",
                                             "to_worker": ids["alpha"]})
        took = await alpha.own("ownership_update", ownership_id=own_g, op="accept", session="alpha-s1")
        rec_g = took["records"][-1]
        assert rec_g["holder"]["worker_id"] == ids["alpha"], rec_g
        assert [c["uuid"] for c in rec_g["holder"]["conversations"]] == [conv["alpha"]], rec_g
        assert rec_g["earlier_holders"][0]["session"] == "root-s1", rec_g
        step("1. claims: alpha's active with its conversation; conflicts and strangers refused; root's gamma to alpha")

        # 2. Handoff, submit, land.
        commit(wt_a, "a.txt", "alpha")
        await alpha.own("ownership_update", ownership_id=own_a, op="handoff", to_worker=ids["beta"])
        accepted = await beta.own("ownership_update", ownership_id=own_a, op="accept", session="beta-s2")
        assert accepted["records"][-1]["holder"]["worker_id"] == ids["beta"], accepted
        source = commit(wt_a, "b.txt", "beta")
        submitted = await beta.own("ownership_update", ownership_id=own_a, op="submit")
        assert submitted["records"][-1]["submitted"]["head"] == source, submitted
        await expect("WORKTREE_REFUSED", root.call("ownership_update", {"capability": cap, "ownership_id": own_a,
                                                                        "op": "land"}))
        git(repo, "merge", "-q", "--no-ff", "-m", "land work/alpha", "work/alpha")
        landed_commit = git(repo, "rev-parse", "main")
        landed = await root.call("ownership_update", {"capability": cap, "ownership_id": own_a, "op": "land"})
        assert landed["records"][-1]["landed"]["commit"] == landed_commit, landed
        step(f"2. handed to beta, submitted {source[:12]}, landed on main at {landed_commit[:12]}")

        # 3. `orchestrator who`, three ways.
        def check_who(doc, what):
            record = doc["records"][-1]
            assert record["ownership_id"] == own_a, (what, record)
            holder = record["holder"]
            assert (holder["worker_id"], holder["session"]) == (ids["beta"], "beta-s2"), (what, holder)
            assert holder["worker_path"] == "/root/beta", (what, holder)
            assert [c["uuid"] for c in holder["conversations"]] == [conv["beta"]], (what, holder)
            assert holder["conversations"][0]["url"].endswith("/c/" + conv["beta"]), (what, holder)
            before = record["earlier_holders"]
            assert [(h["worker_id"], h["session"]) for h in before] == [(ids["alpha"], "alpha-s1")], (what, before)
            assert [c["uuid"] for c in before[0]["conversations"]] == [conv["alpha"]], (what, before)
            assert record["landed"]["commit"] == landed_commit and record["submitted"]["head"] == source, record
        by_path = cli.json("who", wt_a)
        check_who(by_path, "worktree")
        check_who(cli.json("who", "work/alpha", "--repo", repo), "branch")
        check_who(cli.json("who", landed_commit), "landed commit")
        check_who(cli.json("who", "main", cwd=repo), "main, resolved in the repository")
        code, text, err = cli.run("who", wt_a)
        assert code == 0 and "/root/beta" in text and conv["beta"] in text and "beta-s2" in text, (text, err)
        redacted = cli.json("who", wt_a, "--redact")
        assert conv["beta"] not in json.dumps(redacted), redacted
        step("3. who by worktree, branch and landed commit: beta, beta-s2, its conversation; alpha before")

        # 4. Removal keeps provenance; a reclaim preserves work in progress.
        git(repo, "worktree", "remove", wt_a)
        removed = await root.call("ownership_update", {"capability": cap, "ownership_id": own_a, "op": "removed"})
        assert removed["records"][-1]["state"] == "removed", removed
        check_who(cli.json("who", landed_commit), "landed commit after removal")
        check_who(cli.json("who", wt_a), "the removed worktree's path")
        with open(os.path.join(wt_b, "draft.txt"), "w") as f:
            f.write("beta's unfinished work\n")
        await expect("OWNERSHIP_HOLDER_LIVE", alpha.own("ownership_update", ownership_id=own_b, op="reclaim"))
        await root.call("worker_stop", {"capability": cap, "worker_id": ids["beta"], "reason": "reassigned"})
        reclaimed = await alpha.own("ownership_update", ownership_id=own_b, op="reclaim", session="alpha-s2")
        rec_b = reclaimed["records"][-1]
        assert rec_b["holder"]["worker_id"] == ids["alpha"] and rec_b["holder"]["via"] == "reclaimed", rec_b
        wip = rec_b["latest_wip"]
        assert wip and git(repo, "show", f"{wip['commit']}:draft.txt") == "beta's unfinished work", rec_b
        assert os.path.exists(os.path.join(wt_b, "draft.txt")), "the worktree is untouched"
        step(f"4. removal kept provenance; alpha reclaimed beta's worktree, WIP at {wip['ref_name']}")

        # 5. Privacy and events.
        page = await root.call("events_list", {"capability": cap, "stream": "ownership", "limit": 500})
        kinds = [e["type"] for e in page["events"]]
        for kind in ("ownership.claimed", "ownership.handoff_completed", "ownership.landed", "ownership.removed",
                     "ownership.wip_preserved", "ownership.reclaimed"):
            assert kind in kinds, (kind, kinds)
        stored = json.dumps(page) + json.dumps(cli.json("owners"))
        for secret in ("cap_", "att_", "Bearer", "credential", "build alpha", "unfinished work", credential[:16]):
            assert secret not in stored, f"{secret!r} in stored ownership"
        waited = await alpha.own("events_wait", after_cursor=0, timeout_ms=1000, stream="ownership")
        assert all(ids["alpha"] in json.dumps(e["data"]) for e in waited["events"]), waited
        step(f"5. {len(kinds)} ownership events; no credential or chat text stored")

        # 6. Restart.
        before = (cli.json("owners"), projections(wt_a, wt_b, wt_g))
        await daemon.kill()
        await daemon.start()
        after = (cli.json("owners"), projections(wt_a, wt_b, wt_g))
        assert before == after, (before, after)
        assert len(after[0]["records"]) == 3, after
        step("6. after a SIGKILL and restart: the same records and the same Git projections")

        # Every ownership event the daemon stored, read from its database
        # (the daemon stopped): no credential, no chat text.
        secrets = ("cap_", "att_", "Bearer", "credential", "build alpha", "build beta", "unfinished work",
                   "a.txt by", credential[:16])
        await daemon.kill()
        with contextlib.closing(sqlite3.connect(f"file:{state_dir}/state.db?mode=ro", uri=True)) as db:
            rows = db.execute("SELECT kind, body FROM events WHERE kind LIKE 'ownership.%'").fetchall()
        assert len(rows) >= len(kinds), (len(rows), len(kinds))
        for kind, body in rows:
            for secret in secrets:
                assert secret not in body, f"{secret!r} stored in {kind}"

        errors = [e for m in models.by_conversation.values() for e in m.errors]
        assert not errors, errors
        print(f"ok: ownership flow passed ({len(rows)} stored ownership events scanned)")
    finally:
        if models is not None:
            await models.stop()
        if root is not None:
            await root.close()
        if executor is not None:
            await executor.stop()
        await daemon.kill()


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    logging.basicConfig(level=os.environ.get("LOG", "WARNING"))
    logging.getLogger("mcp.client.streamable_http").setLevel(logging.CRITICAL)
    asyncio.run(asyncio.wait_for(main(*sys.argv[1:]), 90))
