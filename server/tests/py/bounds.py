"""Issue 15 #5: every response fits what a real client accepts. The Python
SDK refuses a streamable-HTTP message over 1 MiB; an assignment of nine
fields each within its own bound made 1.6 MB, and events_list / worker_attach
/ worker_list over such data could never be read. Each is bounded in bytes
now, and paging always progresses.

usage: bounds.py URL MODE"""

import asyncio
import sys

from harness import attach_identity, call, client, expect_error

KIB = 1024
# Each field within its own bound (32 KiB texts, 64 items of 4 KiB per list).
HUGE = {
    "objective": "o" * (32 * KIB),
    "communication_policy": "p" * (32 * KIB),
    "completion_protocol": "c" * (32 * KIB),
    "constraints": ["k" * (4 * KIB)] * 64,
    "acceptance_criteria": ["a" * (4 * KIB)] * 64,
    "dependencies": ["d" * (4 * KIB)] * 64,
    "scope": {"allowed": ["s" * (4 * KIB)] * 64, "forbidden": ["f" * (4 * KIB)] * 64},
    "artifact_refs": ["r" * (4 * KIB)] * 64,
}
# Near the whole-assignment bound (64 KiB serialized).
BIG = {"objective": "o" * (30 * KIB), "constraints": ["k" * (4 * KIB)] * 7}
# Text that grows when escaped: quotes double, control characters sextuple.
QUOTES = '"' * (30 * KIB)
CONTROLS = "\u0001" * (15 * KIB)


async def main(url, mode):
    async with client(url, mode) as c:
        root = (await call(c, "run_create", {"title": "bounds", "attribution": "capability_only"}))["root_capability"]
        await expect_error(c, "worker_spawn", {"capability": root, "name": "huge", "assignment": HUGE}, "TOO_LARGE")

        spawned = await call(c, "worker_spawn", {"capability": root, "name": "big", "assignment": BIG})
        worker_id = spawned["worker"]["worker_id"]
        attach = attach_identity(spawned["bootstrap_prompt"])
        me = await call(c, "worker_attach", {"attach_identity": attach})
        # Follow-ups that escape to ~60 KiB each: all of them would make ~720 KiB.
        for n in range(12):
            await call(c, "worker_followup", {"capability": root, "worker_id": worker_id, "instructions": f"{n}" + QUOTES})
        await expect_error(
            c, "worker_followup", {"capability": root, "worker_id": worker_id, "instructions": "\u0000" * (32 * KIB)}, "TOO_LARGE"
        )
        me = await call(c, "worker_attach", {"attach_identity": attach})
        listed = me["followups"]
        assert listed and listed[-1].startswith("11"), "the newest follow-up is always there"
        assert me["followups_from"] + len(listed) - 1 == 12, (me["followups_from"], len(listed))
        assert me["followups_from"] > 1, "older follow-ups left out rather than an unreadable response"
        assert me["assignment"]["objective"] == BIG["objective"]

        # Many workers whose reports escape large: the list carries previews.
        for n in range(40):
            w = await call(c, "worker_spawn", {"capability": root, "name": f"w{n}", "assignment": {"objective": "x"}})
            cap = (await call(c, "worker_attach", {"attach_identity": attach_identity(w["bootstrap_prompt"])}))["capability"]
            await call(c, "worker_progress", {"capability": cap, "summary": CONTROLS})
            await call(c, "worker_complete", {"capability": cap, "summary": QUOTES})
        listing = await call(c, "worker_list", {"capability": root})
        assert len(listing["workers"]) == 42
        assert all(w.get("shortened") for w in listing["workers"][2:]), "long texts are previews in a list"
        run = await call(c, "run_get", {"capability": root})
        head = run["run"]["cursor"]

        # Root pages through everything: every page readable, every page progresses.
        cursor, seen, pages = 0, 0, 0
        while cursor < head:
            page = await call(c, "events_list", {"capability": root, "after_cursor": cursor, "limit": 500})
            assert page["events"], f"an empty page at {cursor}"
            assert page["cursor"] > cursor, "paging progresses"
            assert [e["cursor"] for e in page["events"]] == list(range(cursor + 1, page["cursor"] + 1))
            seen += len(page["events"])
            cursor = page["cursor"]
            pages += 1
        assert seen == head, (seen, head)
        assert pages > 1, "the byte bound split the log into pages"
        print(f"ok: {head} events in {pages} pages; attach listed follow-ups {me['followups_from']}..12")


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
