"""Shared helpers for the external-client tests: a real Python MCP SDK client
against a running `orchestrator`. Tool errors come back as `ToolError(code)`."""

import json
import re
import time

import mcp


class ToolError(Exception):
    def __init__(self, code, message):
        super().__init__(f"{code}: {message}")
        self.code = code


async def call(client, tool, args):
    result = await client.call_tool(tool, args)
    if result.is_error:
        text = result.content[0].text
        try:
            body = json.loads(text)
        except json.JSONDecodeError:
            raise AssertionError(f"{tool} returned an untyped error: {text!r}")
        raise ToolError(body["code"], body["message"])
    assert result.structured_content is not None, f"{tool} returned no structured content"
    return result.structured_content


async def expect_error(client, tool, args, code):
    try:
        out = await call(client, tool, args)
    except ToolError as e:
        assert e.code == code, f"{tool}: expected {code}, got {e.code} ({e})"
        return
    raise AssertionError(f"{tool}: expected {code}, got success {out}")


def attach_identity(bootstrap_prompt):
    found = re.findall(r'"(att_[0-9a-f]{32}_[0-9a-f]{32})"', bootstrap_prompt)
    assert len(found) == 1, bootstrap_prompt
    assert "cap_" not in bootstrap_prompt, "a capability leaked into a prompt"
    return found[0]


async def wait_for(client, capability, cursor, predicate, budget_s=20):
    """Loops on events_wait until an event satisfies `predicate`; returns it and
    its cursor, so the caller's next wait resumes right after it."""
    deadline = time.monotonic() + budget_s
    while time.monotonic() < deadline:
        page = await call(client, "events_wait", {"capability": capability, "after_cursor": cursor, "timeout_ms": 5000})
        for event in page["events"]:
            if predicate(event):
                return event, event["cursor"]
        cursor = page["cursor"]
    raise AssertionError("no matching event before the budget ran out")


def client(url, mode):
    return mcp.Client(url, mode=mode)
