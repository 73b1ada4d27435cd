"""A stdio client beside a running daemon: `orchestrator mcp-stdio` relays to
it, so a worker spawned over stdio launches through the daemon's paired
executor. Args: BIN STATE_DIR MODE (legacy | auto)."""

import asyncio
import sys

import mcp
from mcp import StdioServerParameters

from harness import call, wait_for


async def main(bin_path, state_dir, mode):
    server = StdioServerParameters(command=bin_path, args=["mcp-stdio", "--state-dir", state_dir])
    async with mcp.Client(server, mode=mode) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        assert {"run_create", "worker_spawn", "events_wait"} <= names, names
        run = await call(client, "run_create", {"title": f"over stdio ({mode})", "attribution": "capability_only"})
        cap = run["root_capability"]
        spawned = await call(client, "worker_spawn", {"capability": cap, "name": "w", "assignment": {"objective": "o"}})
        worker = spawned["worker"]["worker_id"]
        # A long poll through the relay, until the executor bound the conversation.
        bound, _ = await wait_for(
            client, cap, 0, lambda e: e["type"] == "conversation.bound" and e["data"]["worker_id"] == worker
        )
        print(f"stdio relay ({mode}): ok {worker} {bound['data']['conversation_id']}")


asyncio.run(main(*sys.argv[1:4]))
