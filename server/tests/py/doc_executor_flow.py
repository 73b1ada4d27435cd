"""The orchestrator driven by `doc_executor.DocExecutor` (an executor written
from docs/executor-protocol.md alone), with the worker conversations' models
played over the Python MCP SDK.

usage: doc_executor_flow.py ORCHESTRATOR_BINARY STATE_DIR

Scenarios, asserted as they go:
  a. two workers are created, bootstrapped, attach and complete; a follow-up
     to one is delivered into its same conversation and completed;
  b. the daemon is SIGKILLed while a create and a follow-up are outstanding
     and restarted on the same address and state dir: the executor reconnects
     by itself, the follow-up is delivered once and completed, nothing is
     created or prompted twice;
  c. a pool of 2 (`runtime_ensure`) becomes READY, `task_dispatch` wakes one
     worker, which completes, and `task_collect` returns its result; then a
     pool tab is lost and `runtime_recover` reopens it (`conversation_open`),
     and `runtime_stop` closes both (`conversation_close`).
Finally the session sits idle past the lease: only heartbeats keep it.
The executor speaks protocol v2 and attests each model call's request id
(caller attribution); the models call statelessly (the SDK's `auto`).

Every wait is bounded; the daemon is killed at the end whatever happens.
"""

import asyncio
import atexit
import contextlib
import json
import logging
import os
import re
import signal
import sys
import time

import contextvars
import uuid

import httpx2
import mcp
from mcp.client.streamable_http import streamable_http_client

from doc_executor import DocExecutor
from harness import ToolError, call

# The SDK's "auto" mode: stateless calls (the 2026-07-28 revision, no MCP
# session), as ChatGPT's connector makes them. Pool admission holds anyway:
# caller attribution (SPEC §5a) proves each call's conversation.
MODE = "auto"
# The x-request-id of the call being made (ChatGPT sends one with each call).
REQUEST_ID = contextvars.ContextVar("request_id", default=None)
TOTAL_BUDGET_S = 60
ATTEMPT_TIMEOUT_S = 6  # one MCP request; events_wait asks for at most 2 s
LEASE_MS = 2000
DAEMON_FLAGS = [
    "--pool-pacing-ms", "50",  # SPEC §6a: pool creates are paced, 3 s by default
    # 3 run workers + 2 pool workers: the doc says "at most --max-active-workers
    # (4) managed conversations exist" (the daemon in fact counted only
    # unfinished workers, but this follows the doc).
    "--max-active-workers", "8",
    # A short heartbeat and lease: a silent executor would be dropped (4004)
    # within the test, so a passing run also proves the heartbeats.
    "--executor-heartbeat-ms", "500",
    "--executor-lease-ms", str(LEASE_MS),
]
ATT_RE = re.compile(r'"(att_[0-9a-f]{32}_[0-9a-f]{32})"')
TOOL_RE = re.compile(r"\b(\w+) with attach_identity")
FOLLOWUP_RE = re.compile(r"\bpassing followup (\d+)")
STAMP_RE = re.compile(r"Catalog ([0-9a-f]{16}): pass it as catalog")

log = logging.getLogger("flow")
T0 = time.monotonic()


def step(msg):
    print(f"[{time.monotonic() - T0:5.1f}s] {msg}", flush=True)


# --------------------------------------------------------------- the daemon

def _kill_at_exit(proc):
    if proc.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, signal.SIGKILL)


class Daemon:
    def __init__(self, binary, state_dir):
        self.binary, self.state_dir = binary, state_dir
        self.listen = "127.0.0.1:0"  # the first start picks a port; restarts reuse it
        self.proc = None
        self.mcp_url = None
        self._drain = None

    async def pair(self, executor_id):
        proc = await asyncio.create_subprocess_exec(
            self.binary, "pair", "--state-dir", self.state_dir, "--executor-id", executor_id, "--json",
            stdout=asyncio.subprocess.PIPE)
        out, _ = await asyncio.wait_for(proc.communicate(), 10)
        assert proc.returncode == 0, "pair failed"
        return json.loads(out)["credential"]

    async def start(self, budget_s=10):
        deadline = time.monotonic() + budget_s
        err = open(os.path.join(os.path.dirname(self.state_dir), "daemon.err"), "ab")
        while True:
            self.proc = proc = await asyncio.create_subprocess_exec(
                self.binary, "serve", "--listen", self.listen, "--state-dir", self.state_dir, *DAEMON_FLAGS,
                stdout=asyncio.subprocess.PIPE, stderr=err, env={**os.environ, "RUST_LOG": "warn"})
            atexit.register(_kill_at_exit, proc)  # last resort, should the loop die
            try:
                while True:
                    line = await asyncio.wait_for(self.proc.stdout.readline(), max(0.1, deadline - time.monotonic()))
                    if not line:
                        raise RuntimeError("the daemon exited before printing its MCP endpoint")
                    m = re.match(rb"MCP endpoint: (http://(\S+)/mcp)", line)
                    if m:
                        break
            except (RuntimeError, asyncio.TimeoutError):
                await self.kill()
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.3)  # e.g. the port not free yet after a kill
                continue
            self.mcp_url, self.listen = m.group(1).decode(), m.group(2).decode()
            self._drain = asyncio.create_task(self._drain_stdout())  # keep stdout flowing
            return

    async def _drain_stdout(self):
        with contextlib.suppress(Exception):
            while await self.proc.stdout.readline():
                pass

    async def kill(self):
        if self.proc is not None and self.proc.returncode is None:
            self.proc.send_signal(signal.SIGKILL)
            await asyncio.wait_for(self.proc.wait(), 10)
        if self._drain is not None:
            self._drain.cancel()
            self._drain = None

    @property
    def executor_url(self):
        return f"ws://{self.listen}/executor"


# ------------------------------------------------------------- MCP peers

class Peer:
    """One MCP client session that survives a daemon restart by reopening.

    The SDK client lives in its own owner task: when its transport fails the
    SDK cancels the task that entered it, which must not be the model's or
    root's own task. Calls are made from the caller's task."""

    def __init__(self, url):
        self.url = url
        self.c = None
        self.stamp = None  # the catalog stamp in worker_attach's description
        self._owner = None
        self._stop = None

    async def open(self):
        ready, stop = asyncio.get_running_loop().create_future(), asyncio.Event()

        async def stamp(request):
            if (request_id := REQUEST_ID.get()) is not None:
                request.headers["x-request-id"] = f"{request_id}/{uuid.uuid4().hex[:4]}"  # per-hop suffix

        async def own():
            try:
                http = httpx2.AsyncClient(event_hooks={"request": [stamp]}, timeout=30)
                async with http, mcp.Client(streamable_http_client(self.url, http_client=http), mode=MODE) as c:
                    ready.set_result(c)
                    await stop.wait()
            except BaseException as e:
                if not ready.done():
                    ready.set_exception(RuntimeError(f"MCP session failed to open: {e!r}"))
                if not isinstance(e, Exception):
                    raise
        self._stop, self._owner = stop, asyncio.create_task(own())
        self.c = await asyncio.wait_for(ready, ATTEMPT_TIMEOUT_S)
        for tool in (await self.c.list_tools()).tools:
            m = STAMP_RE.search(tool.description or "")
            if m:
                self.stamp = m.group(1)

    @property
    def alive(self):
        return self.c is not None and self._owner is not None and not self._owner.done()

    async def close(self):
        owner, self._owner, self.c = self._owner, None, None
        if owner is not None:
            self._stop.set()
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(owner, 5)  # cancels a stuck owner

    async def call(self, tool, args, budget_s=20, page=None, turn=None):
        """Tool errors are raised at once; transport failures (a daemon being
        restarted) reopen the session and retry, within the budget. Every
        call of one turn carries the turn's request id in x-request-id (as
        ChatGPT's do), or a fresh one without a turn; `page(request_id)`,
        when given, is the calling conversation's page showing it."""
        async def attempt():
            request_id = turn or "wfr_" + uuid.uuid4().hex
            if page is not None:
                page(request_id)
            token = REQUEST_ID.set(request_id)
            try:
                return await call(self.c, tool, args)
            finally:
                REQUEST_ID.reset(token)
        return await self._retrying(tool, attempt, budget_s)

    async def ensure_open(self, budget_s=20):
        async def nothing():
            return None
        await self._retrying("open", nothing, budget_s)

    async def _retrying(self, what, action, budget_s):
        deadline = time.monotonic() + budget_s
        while True:
            try:
                # A request in flight when the daemon is killed may never be
                # answered, so each attempt is bounded.
                async with asyncio.timeout(ATTEMPT_TIMEOUT_S):
                    if not self.alive:
                        await self.close()
                        await self.open()
                    return await action()
            except ToolError:
                raise
            except (Exception, TimeoutError) as e:  # connection refused, session gone, ...
                log.info("%s: transport failure %r; reopening", what, e)
                await self.close()
                if time.monotonic() > deadline:
                    raise AssertionError(f"{what}: no answer within {budget_s}s ({e!r})")
                await asyncio.sleep(0.3)


# ------------------------------------------------------------- the models

class Model:
    """The model inside one worker conversation: reacts to each prompt
    submitted into it exactly as the prompt says. Each of its calls shows in
    its conversation's page (the executor reports the request id), as
    ChatGPT's do; its client reopens only when the daemon went away."""

    def __init__(self, conversation_id, url, executor):
        self.conversation_id = conversation_id
        self.peer = Peer(url)
        self.page = lambda request_id: executor.page_shows_request(conversation_id, request_id)
        self.inbox = asyncio.Queue()
        self.worker_id = None
        self.reports = []  # (what, followup, summary)
        self.errors = []
        self.task = asyncio.create_task(self._run())

    async def _run(self):
        try:
            while True:
                prompt = await self.inbox.get()
                try:
                    await self.react(prompt)
                except Exception as e:
                    log.exception("model of %s failed", self.conversation_id)
                    self.errors.append(repr(e))
        finally:
            await self.peer.close()

    async def react(self, prompt):
        # The prompt names one attach identity and the tool to call with it.
        found = ATT_RE.findall(prompt)
        assert len(found) == 1 and "cap_" not in prompt, prompt
        tool = TOOL_RE.search(prompt)
        assert tool and tool.group(1) in ("worker_attach", "runtime_bootstrap"), prompt
        await self.peer.ensure_open()  # the model reads its tool list: the catalog stamp
        args = {"attach_identity": found[0], "catalog": self.peer.stamp}
        turn = "wfr_" + uuid.uuid4().hex  # this prompt's turn: one request id for all its calls
        # SPEC §6a: an attach that arrives before the executor's result is
        # refused with PEER_IDENTITY_UNRESOLVED, "retry it after a few seconds".
        deadline = time.monotonic() + 15
        while True:
            try:
                attached = await self.peer.call(tool.group(1), args, page=self.page, turn=turn)
                break
            except ToolError as e:
                if e.code != "PEER_IDENTITY_UNRESOLVED" or time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.5)
        self.worker_id = attached["worker"]["worker_id"]
        capability = attached["capability"]
        wake = FOLLOWUP_RE.search(prompt)
        if wake:
            # "[orchestrator wake v2] ... carry follow-up #N out, and finish
            # with worker_complete or worker_fail passing followup N".
            n = int(wake.group(1))
            index = n - attached["followups_from"]
            assert 0 <= index < len(attached["followups"]), (n, attached)
            summary = f"done: {attached['followups'][index]}"
            report = {"capability": capability, "summary": summary, "followup": n}
        else:
            # "[orchestrator bootstrap v3] ... carry the assignment out to
            # completion ... Before ending a turn: worker_complete if finished".
            assert "[orchestrator bootstrap v3]" in prompt, prompt
            objective = attached["assignment"]["objective"]
            if "Wait for targeted tasks" in objective:
                # A pool worker's assignment says to wait for tasks; the
                # authoritative assignment wins over the generic prompt.
                self.reports.append(("parked", None, objective))
                return
            summary = f"done: {objective}"
            report = {"capability": capability, "summary": summary}
        await self.peer.call("worker_complete", report, page=self.page, turn=turn)
        self.reports.append(("worker_complete", report.get("followup"), summary))


class Models:
    """Routes every prompt the executor submits to its conversation's model."""

    def __init__(self, executor, url):
        self.executor, self.url = executor, url
        self.by_conversation = {}
        self.task = asyncio.create_task(self._route())

    async def _route(self):
        while True:
            conversation_id, prompt = await self.executor.submissions.get()
            model = self.by_conversation.get(conversation_id)
            if model is None:
                model = self.by_conversation[conversation_id] = Model(conversation_id, self.url, self.executor)
            model.inbox.put_nowait(prompt)

    def conversation_of(self, worker_id):
        return self.executor.conversations[self.executor.by_worker[worker_id]]

    def model_of(self, worker_id):
        return self.by_conversation[self.executor.by_worker[worker_id]]

    async def stop(self):
        tasks = [self.task, *(m.task for m in self.by_conversation.values())]
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


# ------------------------------------------------------------- helpers

def assignment(objective):
    return {"objective": objective, "acceptance_criteria": [f"{objective} is done"]}


def completed_of(worker_id, summary=None):
    """A `worker.completed` of that worker. The event does not say which
    follow-up it closed, so callers wait from a cursor taken after the
    follow-up and check the summary the model reported for it."""
    def match(e):
        if e["type"] != "worker.completed" or e["data"].get("worker_id") != worker_id:
            return False
        return summary is None or e["data"].get("summary") == summary
    return match


async def wait_all(peer, capability, cursor, predicates, budget_s):
    """Waits until every predicate matched some event after `cursor`, in any
    order; returns the cursor after the last event read."""
    deadline = time.monotonic() + budget_s
    left = list(predicates)
    while left:
        assert time.monotonic() < deadline, f"{len(left)} expected event(s) never came"
        page = await peer.call("events_wait", {"capability": capability, "after_cursor": cursor, "timeout_ms": 2000})
        for event in page["events"]:
            left = [p for p in left if not p(event)]
        cursor = page["cursor"]
    return cursor


async def wait_until(predicate, budget_s, what):
    deadline = time.monotonic() + budget_s
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.05)


async def poll_status(root, cap, predicate, budget_s, what):
    deadline = time.monotonic() + budget_s
    while True:
        status = await root.call("runtime_status", {"capability": cap})
        if predicate(status):
            return status
        assert time.monotonic() < deadline, f"timed out waiting for {what}: {status}"
        await asyncio.sleep(0.1)


def assert_exactly_once(executor):
    """No conversation created twice; no prompt submitted twice."""
    for worker, n in executor.creates_per_worker.items():
        assert n == 1, f"{worker}: {n} conversations created"
    for key, n in executor.effects_per_key.items():
        assert n == 1, f"{key}: effect performed {n} times"
    for conv in executor.conversations.values():
        assert len(conv.prompts) == len(set(conv.prompts)), f"{conv.conversation_id}: a prompt submitted twice"
        assert executor.submission_counts[conv.conversation_id] == len(conv.prompts)


# ------------------------------------------------------------- scenarios

async def scenario_a(executor, models, root):
    # Caller attribution (the default): every call a model makes is proven
    # by the executor's report of its request id in that model's page.
    created = await root.call("run_create", {"title": "doc executor flow"})
    cap, cursor = created["root_capability"], created["run"]["cursor"]
    ids = {}
    for name in ("alpha", "beta"):
        out = await root.call("worker_spawn", {"capability": cap, "name": name, "idempotency_key": f"spawn-{name}",
                                               "assignment": assignment(f"build {name}")})
        assert out["worker"]["state"] == "launch_requested", out
        ids[name] = out["worker"]["worker_id"]
    a, b = ids["alpha"], ids["beta"]
    cursor = await wait_all(root, cap, cursor, [completed_of(a, "done: build alpha"),
                                                completed_of(b, "done: build beta")], 20)
    for w in (a, b):
        conv = models.conversation_of(w)
        assert executor.creates_per_worker[w] == 1
        assert len(conv.prompts) == 1 and conv.prompts[0].startswith("[orchestrator bootstrap v3]"), conv.prompts
        assert re.fullmatch(r"https://chatgpt\.com/c/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}",
                            conv.url)
    step("a: both workers created, bootstrapped, attached and completed")

    # A follow-up to alpha goes into the same conversation and is completed.
    conv_a = models.conversation_of(a)
    fu = await root.call("worker_followup", {"capability": cap, "worker_id": a, "idempotency_key": "fu-alpha-1",
                                             "instructions": "also write the alpha docs"})
    assert fu["seq"] == 1, fu
    cursor = await wait_all(root, cap, cursor, [completed_of(a, "done: also write the alpha docs")], 20)
    assert models.conversation_of(a) is conv_a and len(conv_a.prompts) == 2, conv_a.prompts
    assert conv_a.prompts[1].startswith("[orchestrator wake v2]") and "follow-up #1" in conv_a.prompts[1]
    model_a = models.model_of(a)
    # The event can reach root before the model's own call has returned.
    await wait_until(lambda: len(model_a.reports) == 2, 5, "alpha's model to record its report")
    assert model_a.reports[-1] == ("worker_complete", 1, "done: also write the alpha docs"), model_a.reports
    workers = {w["path"]: w["state"] for w in (await root.call("worker_list", {"capability": cap}))["workers"]}
    assert workers == {"/root": "running", "/root/alpha": "completed", "/root/beta": "completed"}, workers
    assert_exactly_once(executor)
    step("a: follow-up 1 delivered into alpha's same conversation and completed")
    return cap, cursor, b


async def scenario_b(daemon, executor, models, root, cap, cursor, b):
    welcomes, seen = executor.welcomes, len(executor.commands_seen)
    conv_b = models.conversation_of(b)
    killed = asyncio.Event()

    async def kill_before_result(entry, outcome):
        # The worst moment: beta's wake is submitted, its result not yet sent.
        if entry.worker_id == b and entry.kind == "conversation_send" and not killed.is_set():
            await daemon.kill()
            killed.set()
    executor.before_result = kill_before_result
    # Outstanding at the kill: a new worker's create and beta's follow-up.
    out = await root.call("worker_spawn", {"capability": cap, "name": "gamma", "idempotency_key": "spawn-gamma",
                                           "assignment": assignment("build gamma")})
    c = out["worker"]["worker_id"]
    fu = await root.call("worker_followup", {"capability": cap, "worker_id": b, "idempotency_key": "fu-beta-1",
                                             "instructions": "also test beta"})
    assert fu["seq"] == 1, fu
    await asyncio.wait_for(killed.wait(), 10)
    executor.before_result = None
    step(f"b: daemon SIGKILLed after beta's wake was submitted, before its result "
         f"({len(executor.commands_seen) - seen} new command frames had arrived)")
    await daemon.start()
    step(f"b: daemon restarted on the same address {daemon.listen}")
    await wait_until(lambda: executor.welcomes > welcomes, 15, "the executor to reconnect")
    step("b: the executor reconnected by itself")
    # Root's MCP session died with the daemon; Peer.call reopens it.
    cursor = await wait_all(root, cap, cursor, [completed_of(b, "done: also test beta"), completed_of(c)], 25)
    wakes = [p for p in conv_b.prompts if p.startswith("[orchestrator wake")]
    assert len(conv_b.prompts) == 2 and len(wakes) == 1 and "follow-up #1" in wakes[0], conv_b.prompts
    assert models.conversation_of(b) is conv_b
    assert executor.creates_per_worker[c] == 1 and len(models.conversation_of(c).prompts) == 1
    assert len(executor.conversations) == 3, len(executor.conversations)
    # The lost result made the daemon replay beta's send (same commandId),
    # and the journal answered it without a second submission.
    after = executor.commands_seen[seen:]
    sends = [cmd for cmd in after if cmd["workerId"] == b and cmd["op"]["kind"] == "conversation_send"]
    assert len(sends) == 2 and len({cmd["commandId"] for cmd in sends}) == 1, sends
    assert len({cmd["idempotencyKey"] for cmd in sends}) == 1, sends
    assert sends[1]["deadlineMs"] > sends[0]["deadlineMs"], "a replay carries a fresh deadline"
    assert_exactly_once(executor)
    inspects = sum(cmd["op"]["kind"] == "conversation_inspect" for cmd in after)
    step(f"b: beta's send replayed and answered from the journal; follow-up delivered once and completed; "
         f"gamma created once ({inspects} inspect(s) after the reconnect)")
    return cursor


async def scenario_c(executor, root, cap):
    ensured = await root.call("runtime_ensure", {"capability": cap, "desired_workers": 2})
    assert len(ensured["outcome"]["provisioned"]) == 2, ensured

    def ready(st):
        slots = [s for s in st["slots"] if s["health"] == "parked" and s["admitted"] and s["can_act"]]
        return st["state"] == "READY" and len(slots) == 2
    status = await poll_status(root, cap, ready, 20, "the pool to be READY with 2 admitted slots")
    # Admitted over stateless calls: each slot's runtime_bootstrap (or
    # worker_attach) was attributed to its own conversation.
    events = (await root.call("events_list", {"capability": cap, "limit": 500}))["events"]
    attributed = {e["data"]["worker_id"] for e in events if e["type"] == "caller.attributed"}
    assert {s["worker_id"] for s in status["slots"]} <= attributed, (status["slots"], attributed)
    step("c: pool READY with 2 admitted slots (stateless calls, each attributed)")

    task = await root.call("task_dispatch", {"capability": cap, "instructions": "summarize the pool",
                                             "idempotency_key": "task-1"})
    deadline = time.monotonic() + 20
    while (collected := await root.call("task_collect", {"capability": cap, "task_id": task["task_id"]}))[
            "status"] != "completed":
        assert time.monotonic() < deadline, f"the task never completed: {collected}"
        await asyncio.sleep(0.1)
    assert collected["result"] == "done: summarize the pool", collected
    slot = next(s for s in status["slots"] if s["worker_id"] == task["worker_id"])
    conv = executor.conversations[slot["conversation_id"]]
    assert len(conv.prompts) == 2 and conv.prompts[1].startswith("[orchestrator wake"), conv.prompts
    assert_exactly_once(executor)
    step(f"c: task {task['task_id']} completed by slot {task['slot']}; task_collect returned its result")

    # The other slot's tab is lost; runtime_recover reopens exactly it.
    other = next(s for s in status["slots"] if s["worker_id"] != task["worker_id"])
    lost = executor.conversations[other["conversation_id"]]
    prompts_before = list(lost.prompts)
    await executor.lose_tab(lost.conversation_id)
    await poll_status(root, cap, lambda st: any(s["slot"] == other["slot"] and s["health"] == "lost"
                                                for s in st["slots"]), 10, "the slot to be lost")
    recovered = await root.call("runtime_recover", {"capability": cap})
    assert recovered["outcome"]["recovering"] == [other["slot"]], recovered
    status = await poll_status(root, cap, ready, 10, "the pool to be READY again")
    again = next(s for s in status["slots"] if s["slot"] == other["slot"])
    assert again["conversation_id"] == lost.conversation_id and again["continuation_epoch"] == 1, again
    assert lost.state == "idle" and lost.prompts == prompts_before, (lost.state, lost.prompts)
    step(f"c: slot {other['slot']}'s lost tab reopened at the same conversation (epoch 1)")

    # runtime_stop retires both idle slots and closes their tabs.
    stopped = await root.call("runtime_stop", {"capability": cap})
    assert sorted(stopped["outcome"]["retiring"]) == [0, 1], stopped
    pool = [conv, lost]
    await wait_until(lambda: all(c.state == "closed" for c in pool), 10, "both pool tabs to close")
    await poll_status(root, cap, lambda st: st["live"] == 0, 10, "no live slot")
    assert_exactly_once(executor)
    step("c: runtime_stop closed both pool conversations")


async def main(binary, state_dir):
    state_dir = os.path.abspath(state_dir)
    os.makedirs(os.path.dirname(state_dir), exist_ok=True)
    daemon = Daemon(binary, state_dir)
    executor = models = root = None
    try:
        credential = await daemon.pair("doc-executor")
        await daemon.start()
        executor = DocExecutor(daemon.executor_url, credential, reply_s=0.2)
        executor.start()
        await asyncio.wait_for(executor.connected.wait(), 10)
        models = Models(executor, daemon.mcp_url)
        root = Peer(daemon.mcp_url)
        step(f"daemon at {daemon.listen}; executor welcomed: {executor.welcome}")

        cap, cursor, b = await scenario_a(executor, models, root)
        await scenario_b(daemon, executor, models, root, cap, cursor, b)
        await scenario_c(executor, root, cap)

        # Idle past the lease: only the executor's heartbeats keep its session.
        welcomes = executor.welcomes
        await asyncio.sleep(LEASE_MS / 1000 * 1.5)
        assert executor.welcomes == welcomes and executor.connected.is_set(), executor.closes

        errors = [e for m in models.by_conversation.values() for e in m.errors]
        assert not errors, errors
        assert executor.fatal is None, executor.fatal
        # The only session end is the SIGKILL's (1006: no close frame).
        assert [code for code, _ in executor.closes] == [1006], executor.closes
        counts = sorted(executor.submission_counts.values())
        print(f"ok: scenarios a, b, c passed; {len(executor.conversations)} conversations, prompts per "
              f"conversation {counts}, {executor.welcomes} executor sessions, {len(executor.commands_seen)} "
              f"command frames, {time.monotonic() - T0:.1f}s")
    except BaseException:
        if executor is not None:
            dump(executor, models)
        raise
    finally:
        try:
            if root is not None:
                await root.close()
            if models is not None:
                await models.stop()
            if executor is not None:
                await executor.stop()
        finally:
            await daemon.kill()


def dump(executor, models):
    """What the executor saw, for a failing run."""
    out = sys.stderr
    print("--- executor state at failure", file=out)
    for cmd in executor.commands_seen:
        print(f"  command {cmd['commandId']} {cmd['idempotencyKey']} {cmd['op']['kind']}", file=out)
    for conv in executor.conversations.values():
        print(f"  conversation {conv.conversation_id} {conv.state} prompts={[p[:40] for p in conv.prompts]}", file=out)
    print(f"  closes {executor.closes}; welcomes {executor.welcomes}; fatal {executor.fatal}", file=out)
    for m in (models.by_conversation.values() if models else []):
        print(f"  model {m.conversation_id} reports={m.reports} errors={m.errors}", file=out)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    logging.basicConfig(level=os.environ.get("LOG", "WARNING"))
    # The SDK logs every session it loses to the SIGKILL, and warns "Session
    # termination failed: 202" on each close: noise for this test.
    logging.getLogger("mcp.client.streamable_http").setLevel(logging.CRITICAL)
    asyncio.run(asyncio.wait_for(main(sys.argv[1], sys.argv[2]), TOTAL_BUDGET_S))
