"""Hostile inputs: each gets a typed error and changes nothing.

usage: hostile.py URL"""

import asyncio
import sys

from harness import attach_identity, call, client, expect_error


async def main(url):
    async with client(url, "auto") as c:
        created = await call(c, "run_create", {"title": "hostile", "attribution": "capability_only"})
        root = created["root_capability"]
        a = await call(c, "worker_spawn", {"capability": root, "name": "alpha", "assignment": {"objective": "A"}})
        b = await call(c, "worker_spawn", {"capability": root, "name": "beta", "assignment": {"objective": "B"}})
        cap_a = (await call(c, "worker_attach", {"attach_identity": attach_identity(a["bootstrap_prompt"])}))["capability"]
        cap_b = (await call(c, "worker_attach", {"attach_identity": attach_identity(b["bootstrap_prompt"])}))["capability"]
        a_id, b_id = a["worker"]["worker_id"], b["worker"]["worker_id"]
        await call(c, "worker_stop", {"capability": root, "worker_id": b_id, "reason": "not needed"})
        head = (await call(c, "run_get", {"capability": root}))["run"]["cursor"]

        cases = [
            # malformed ids
            ("worker_stop", {"capability": root, "worker_id": "wrk_123", "reason": "x"}, "INVALID_ID"),
            ("worker_followup", {"capability": root, "worker_id": "run_" + "0" * 32, "instructions": "x"}, "INVALID_ID"),
            ("message_send", {"capability": cap_a, "to": "root", "kind": "information", "body": "x"}, "INVALID_ID"),
            ("message_send", {"capability": cap_a, "to": "/root", "kind": "answer", "body": "x", "in_reply_to": "msg_zz"}, "INVALID_ID"),
            ("worker_progress", {"capability": cap_a, "worker_id": "WRK_" + "0" * 32, "summary": "x"}, "INVALID_ID"),
            # wrong or forged capability
            ("run_get", {"capability": ""}, "UNAUTHORIZED"),
            ("run_get", {"capability": "cap_" + a_id[4:] + "_" + "0" * 64}, "UNAUTHORIZED"),
            ("worker_attach", {"attach_identity": "att_" + a_id[4:] + "_" + "0" * 32}, "UNAUTHORIZED"),
            ("worker_attach", {"attach_identity": cap_a}, "UNAUTHORIZED"),
            # a worker acting as another
            ("worker_progress", {"capability": cap_a, "worker_id": b_id, "summary": "I am B"}, "FORBIDDEN"),
            ("worker_complete", {"capability": cap_a, "worker_id": b_id, "summary": "B done"}, "FORBIDDEN"),
            ("message_send", {"capability": cap_a, "to": b_id, "kind": "information", "body": "psst"}, "FORBIDDEN"),
            # a worker calling root-only tools
            ("worker_spawn", {"capability": cap_a, "name": "gamma", "assignment": {"objective": "C"}}, "FORBIDDEN"),
            ("worker_list", {"capability": cap_a}, "FORBIDDEN"),
            ("run_cancel", {"capability": cap_a, "reason": "x"}, "FORBIDDEN"),
            ("worker_stop", {"capability": cap_a, "worker_id": a_id, "reason": "x"}, "FORBIDDEN"),
            ("worker_followup", {"capability": cap_a, "worker_id": a_id, "instructions": "x"}, "FORBIDDEN"),
            ("message_broadcast", {"capability": cap_a, "kind": "information", "body": "x"}, "FORBIDDEN"),
            # illegal transitions
            ("worker_complete", {"capability": cap_b, "summary": "done anyway"}, "INVALID_TRANSITION"),
            ("worker_progress", {"capability": cap_b, "summary": "still here"}, "INVALID_TRANSITION"),
            ("worker_followup", {"capability": root, "worker_id": b_id, "instructions": "again"}, "INVALID_TRANSITION"),
            ("worker_stop", {"capability": root, "worker_id": b_id, "reason": "twice"}, "INVALID_TRANSITION"),
            # oversized strings
            ("run_create", {"title": "t" * 300}, "TOO_LARGE"),
            ("message_send", {"capability": cap_a, "to": "/root", "kind": "information", "body": "x" * 40000}, "TOO_LARGE"),
            ("worker_spawn", {"capability": root, "name": "n" * 65, "assignment": {"objective": "x"}}, "TOO_LARGE"),
            ("worker_spawn", {"capability": root, "name": "ok", "assignment": {"objective": "x", "constraints": ["c"] * 65}}, "TOO_LARGE"),
            ("worker_progress", {"capability": cap_a, "summary": "s", "percent": 101}, "INVALID_ARGUMENT"),
            # unknown fields, wrong types, bad values
            ("run_create", {"title": "t", "admin": True}, "INVALID_ARGUMENT"),
            ("worker_spawn", {"capability": root, "name": "ok", "assignment": {"objective": "x", "priority": 1}}, "INVALID_ARGUMENT"),
            ("worker_spawn", {"capability": root, "name": "Bad Name", "assignment": {"objective": "x"}}, "INVALID_ARGUMENT"),
            ("events_wait", {"capability": root, "after_cursor": "abc"}, "INVALID_ARGUMENT"),
            ("events_wait", {"capability": root, "after_cursor": head + 100, "timeout_ms": 10}, "INVALID_ARGUMENT"),
            ("message_send", {"capability": cap_a, "to": "/root", "kind": "gossip", "body": "x"}, "INVALID_ARGUMENT"),
            ("run_get", {}, "INVALID_ARGUMENT"),
            ("run_create", {"title": "t", "idempotency_key": ""}, "INVALID_ARGUMENT"),
        ]
        for tool, args, code in cases:
            await expect_error(c, tool, args, code)

        after = await call(c, "run_get", {"capability": root})
        assert after["run"]["cursor"] == head, f"refused calls appended events: {head} -> {after['run']['cursor']}"
        states = {w["path"]: w["state"] for w in after["workers"]}
        assert states == {"/root": "running", "/root/alpha": "running", "/root/beta": "cancelled"}, states
    print(f"hostile: ok ({len(cases)} refusals, nothing changed)")


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
