"""Root over the Python MCP SDK, driving two workers that live in real browser
tabs (the extension) on fakechat: A asks root a question and completes once
answered, B completes, then root follows A up and A completes again.
Prints a JSON summary (worker ids, conversation.bound events) for the test.

usage: extension_flow.py URL"""

import asyncio
import json
import sys

from harness import call, client, wait_for


def spawn_args(root, name, scenario):
    return {"capability": root, "name": name,
            "assignment": {"objective": f"Build {name}\nscenario: {scenario}"}}


async def main(url):
    bound = []
    completed = []

    def seen(predicate):
        """Wraps a predicate so every event passed over is still accounted for."""
        def check(event):
            if event["type"] == "conversation.bound":
                bound.append([event["data"]["worker_id"], event["data"]["conversation_id"]])
            if event["type"] == "worker.completed":
                completed.append(event["data"]["worker_id"])
            return predicate(event)
        return check

    async with client(url, "auto") as root_c:
        created = await call(root_c, "run_create", {"title": "extension flow"})
        root, cursor = created["root_capability"], created["run"]["cursor"]
        a = await call(root_c, "worker_spawn", spawn_args(root, "alpha", 'ask_root "Which port?"; await_answer; complete "A built"'))
        b = await call(root_c, "worker_spawn", spawn_args(root, "beta", 'progress "half way"; complete "B built"'))
        a_id, b_id = a["worker"]["worker_id"], b["worker"]["worker_id"]

        question, cursor = await wait_for(root_c, root, cursor, seen(
            lambda e: e["type"] == "worker.message" and e["data"]["kind"] == "question" and e["data"]["from"] == a_id), 60)
        await call(root_c, "message_send", {"capability": root, "to": a_id, "kind": "answer", "body": "7777",
                                            "in_reply_to": question["data"]["message_id"]})
        # B may finish before A asks: completions seen while waiting for the question count.
        while set(completed) != {a_id, b_id}:
            _, cursor = await wait_for(root_c, root, cursor, seen(lambda e: e["type"] == "worker.completed"), 60)

        await call(root_c, "worker_followup", {"capability": root, "worker_id": a_id,
                                               "instructions": 'Add a test.\nscenario: complete "A tested"'})
        await wait_for(root_c, root, cursor, seen(
            lambda e: e["type"] == "worker.completed" and e["data"]["worker_id"] == a_id), 60)
        # Caller attribution (the run's default): every call a worker made
        # was proven to come from its own conversation, by the extension
        # reading the request id in that tab's page data. ChatGPT gives all
        # calls of a turn one id, recorded once, by the turn's first call:
        # A had two turns (its assignment, then the follow-up), B one.
        assert "attribution" not in created["run"], created["run"]
        events = (await call(root_c, "events_list", {"capability": root, "limit": 500}))["events"]
        attributed = [(e["data"]["worker_id"], e["data"]["tool"], e["data"]["request_id"])
                      for e in events if e["type"] == "caller.attributed"]
        for worker, turns in ((a_id, 2), (b_id, 1)):
            mine = [(tool, rid) for w, tool, rid in attributed if w == worker]
            assert [tool for tool, _ in mine] == ["worker_attach"] * turns, (worker, attributed)
            assert len({rid for _, rid in mine}) == turns, (worker, attributed)
        print(json.dumps({"a": a_id, "b": b_id, "bound": bound, "root": root, "attributed": len(attributed)}))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
