"""Restart durability, in two phases around a `kill -9` of the daemon.

usage: restart.py before URL DIR   -- sets up a run, then reports progress until the daemon dies,
                                       recording every acknowledged call in DIR/acks
       restart.py after URL DIR    -- checks the restarted daemon against what was acknowledged"""

import asyncio
import json
import os
import sys

from harness import ToolError, attach_identity, call, client, expect_error


def assignment(objective):
    return {"objective": objective}


async def before(url, d):
    async with client(url, "auto") as c:
        created = await call(c, "run_create", {"title": "restart", "idempotency_key": "run-key", "attribution": "capability_only"})
        root = created["root_capability"]
        a = await call(c, "worker_spawn", {"capability": root, "name": "alpha", "assignment": assignment("A"), "idempotency_key": "k-a"})
        b = await call(c, "worker_spawn", {"capability": root, "name": "beta", "assignment": assignment("B")})
        att = await call(c, "worker_attach", {"attach_identity": attach_identity(a["bootstrap_prompt"])})
        cap_a = att["capability"]
        await call(c, "message_send", {"capability": cap_a, "to": "/root", "kind": "information", "body": "starting"})
        snapshot = {
            "root": root,
            "cap_a": cap_a,
            "a_id": a["worker"]["worker_id"],
            "b_id": b["worker"]["worker_id"],
            "run": await call(c, "run_get", {"capability": root}),
            "events": await call(c, "events_list", {"capability": root, "limit": 500}),
        }
        with open(os.path.join(d, "snapshot.json"), "w") as f:
            json.dump(snapshot, f)
        with open(os.path.join(d, "acks"), "a") as acks:
            n = 0
            while True:  # until the daemon is killed under us
                n += 1
                await call(c, "worker_progress", {"capability": cap_a, "summary": f"tick {n}"})
                acks.write(f"tick {n}\n")
                acks.flush()
                os.fsync(acks.fileno())


async def after(url, d):
    with open(os.path.join(d, "snapshot.json")) as f:
        snap = json.load(f)
    with open(os.path.join(d, "acks")) as f:
        acked = [line.strip() for line in f if line.strip()]
    assert len(acked) >= 5, "the daemon was killed before enough progress was acknowledged"
    root, cap_a = snap["root"], snap["cap_a"]
    async with client(url, "auto") as c:
        run = await call(c, "run_get", {"capability": root})
        events = (await call(c, "events_list", {"capability": root, "limit": 500}))["events"]
        # Everything acknowledged before the kill is there, in order, with no gap.
        cursors = [e["cursor"] for e in events]
        assert cursors == list(range(1, len(events) + 1)), "cursor gap"
        assert run["run"]["cursor"] == len(events)
        before = snap["events"]["events"]
        assert events[: len(before)] == before, "history changed across the restart"
        ticks = [e["data"]["summary"] for e in events if e["type"] == "worker.progress"]
        assert ticks[: len(acked)] == acked, (ticks[:5], acked[:5])
        assert len(ticks) - len(acked) <= 1, "more progress than was sent"
        # Same run, same workers, same states; old capabilities still work.
        assert run["run"]["run_id"] == snap["run"]["run"]["run_id"] and run["run"]["state"] == "active"
        strip = lambda ws: [(w["worker_id"], w["path"], w["state"], w["attach_count"]) for w in ws]
        assert strip(run["workers"]) == strip(snap["run"]["workers"])
        workers = (await call(c, "worker_list", {"capability": root}))["workers"]
        assert strip(workers) == strip(snap["run"]["workers"])
        # The cursor continues without a gap.
        out = await call(c, "worker_progress", {"capability": cap_a, "summary": "after restart"})
        assert out["cursor"] == len(events) + 1, out
        # Idempotent replays return the same entities; different arguments conflict.
        replay = await call(c, "worker_spawn", {"capability": root, "name": "alpha", "assignment": assignment("A"), "idempotency_key": "k-a"})
        assert replay["worker"]["worker_id"] == snap["a_id"]
        await expect_error(c, "worker_spawn", {"capability": root, "name": "alpha2", "assignment": assignment("A"), "idempotency_key": "k-a"}, "CONFLICT")
        # A run_create replay names the same run but never hands out its capability.
        again = await call(c, "run_create", {"title": "restart", "idempotency_key": "run-key", "attribution": "capability_only"})
        assert again["run"]["run_id"] == run["run"]["run_id"] and again["replayed"] is True
        assert "root_capability" not in again
        await expect_error(c, "run_create", {"title": "other", "idempotency_key": "run-key"}, "CONFLICT")
        final = await call(c, "run_get", {"capability": root})
        assert final["run"]["cursor"] == len(events) + 1, "a replay appended events"
    print(f"restart: ok ({len(acked)} acknowledged calls survived)")


if __name__ == "__main__":
    phase, url, d = sys.argv[1:4]
    try:
        asyncio.run({"before": before, "after": after}[phase](url, d))
    except ToolError as e:
        raise SystemExit(f"tool error: {e}")
