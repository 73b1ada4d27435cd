"""Root and two children over streamable HTTP, each its own client session.

usage: flow.py URL MODE   (MODE: auto | legacy)"""

import asyncio
import sys
import time

from harness import ToolError, attach_identity, call, client, wait_for


def assignment(objective):
    return {"objective": objective, "acceptance_criteria": [f"{objective} is done"], "constraints": ["no side effects"]}


async def main(url, mode):
    async with client(url, mode) as root_c, client(url, mode) as a_c, client(url, mode) as b_c:
        tools = {t.name: t for t in (await root_c.list_tools()).tools}
        for name in ["run_create", "run_get", "run_cancel", "worker_spawn", "worker_attach", "worker_list",
                     "worker_progress", "worker_complete", "worker_fail", "worker_stop", "worker_followup",
                     "message_send", "message_broadcast", "events_wait", "events_list"]:
            tool = tools[name]
            assert tool.output_schema, f"{name} has no outputSchema"
            hints = tool.annotations
            for hint in ["read_only_hint", "destructive_hint", "idempotent_hint", "open_world_hint"]:
                assert isinstance(getattr(hints, hint), bool), f"{name}.{hint} is not set"
        assert len(tools) == 40, sorted(tools)

        created = await call(root_c, "run_create", {"title": f"flow over {mode}", "attribution": "capability_only"})
        root = created["root_capability"]
        run_id = created["run"]["run_id"]
        cursor = created["run"]["cursor"]
        # No browser sees these plain clients: the run says it trusts capabilities alone.
        assert created["run"]["attribution"] == "capability_only", created["run"]

        spawn_a = await call(root_c, "worker_spawn", {"capability": root, "name": "alpha", "assignment": assignment("build A"), "idempotency_key": "a"})
        spawn_b = await call(root_c, "worker_spawn", {"capability": root, "name": "beta", "assignment": assignment("build B")})
        a_id, b_id = spawn_a["worker"]["worker_id"], spawn_b["worker"]["worker_id"]
        assert spawn_a["worker"]["state"] == "launch_requested"

        att_a = await call(a_c, "worker_attach", {"attach_identity": attach_identity(spawn_a["bootstrap_prompt"])})
        att_b = await call(b_c, "worker_attach", {"attach_identity": attach_identity(spawn_b["bootstrap_prompt"])})
        assert att_a["worker"]["worker_id"] == a_id and att_a["assignment"]["objective"] == "build A"
        assert att_b["worker"]["worker_id"] == b_id and att_b["assignment"]["objective"] == "build B"
        assert att_a["run_id"] == run_id and att_a["worker"]["state"] == "running"
        cap_a, cap_b = att_a["capability"], att_b["capability"]
        a_cursor = 0

        await call(a_c, "worker_progress", {"capability": cap_a, "summary": "half way", "percent": 50})
        question = await call(a_c, "message_send", {"capability": cap_a, "to": "/root", "kind": "question", "body": "Which port?"})

        def is_question(e):
            return e["type"] == "worker.message" and e["data"]["kind"] == "question" and e["data"]["from"] == a_id
        event, cursor = await wait_for(root_c, root, cursor, is_question)
        assert event["data"]["body"] == "Which port?"
        await call(root_c, "message_send", {"capability": root, "to": a_id, "kind": "answer", "body": "7777", "in_reply_to": event["data"]["message_id"]})

        def is_answer(e):
            return e["type"] == "worker.message" and e["data"]["kind"] == "answer" and e["data"]["to"] == a_id
        answer, a_cursor = await wait_for(a_c, cap_a, a_cursor, is_answer)
        assert answer["data"]["body"] == "7777" and answer["data"]["in_reply_to"] == question["message_id"]

        # B's view never contains A's mail.
        b_events = await call(b_c, "events_list", {"capability": cap_b, "limit": 500})
        assert all(e["data"].get("to") != a_id for e in b_events["events"] if e["type"] == "worker.message")

        await call(a_c, "worker_complete", {"capability": cap_a, "summary": "A built", "artifacts": ["commit:aaaa"]})
        await call(b_c, "worker_complete", {"capability": cap_b, "summary": "B built"})

        done = set()
        while done != {a_id, b_id}:
            event, cursor = await wait_for(root_c, root, cursor, lambda e: e["type"] == "worker.completed")
            done.add(event["data"]["worker_id"])
        workers = (await call(root_c, "worker_list", {"capability": root}))["workers"]
        states = {w["path"]: w["state"] for w in workers}
        assert states == {"/root": "running", "/root/alpha": "completed", "/root/beta": "completed"}, states

        closed = await call(root_c, "worker_complete", {"capability": root, "summary": "both built"})
        assert closed["run_state"] == "completed", closed
        run = await call(root_c, "run_get", {"capability": root})
        assert run["run"]["state"] == "completed"

        # Nothing happens: the wait returns timed_out within its bound.
        start = time.monotonic()
        page = await call(root_c, "events_wait", {"capability": root, "after_cursor": run["run"]["cursor"], "timeout_ms": 1500})
        elapsed = time.monotonic() - start
        assert page["timed_out"] is True and page["events"] == [], page
        assert 1.4 <= elapsed < 4.0, elapsed
    print(f"flow over {mode}: ok")


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
