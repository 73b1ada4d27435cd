"""A small asyncio executor for the orchestrator, written from
`docs/executor-protocol.md` alone (plus SPEC.md §6/§6a and docs/errors.md);
no Rust source and not the reference fake executor were read.

Instead of a browser it simulates ChatGPT conversations in memory: each managed
conversation has a lowercase UUID, the URL `https://chatgpt.com/c/<uuid>`, a
coarse state and the list of prompts submitted to it. A test observes every
submission through `DocExecutor.submissions` (an asyncio queue of
`(conversation_id, prompt)`) and `DocExecutor.submission_counts`; also
`creates_per_worker`, `effects_per_key` (journal effects), `commands_seen`,
`closes`, and two hooks: `lose_tab()` (a tab disappears) and `before_result`
(awaited between an effect and its first result, e.g. to kill the daemon).

    executor = DocExecutor("ws://127.0.0.1:PORT/executor", credential)
    executor.start()          # connects, and reconnects, until stop()
    conversation_id, prompt = await executor.submissions.get()

What the protocol doc leaves open, and what this executor guessed:

1. `heartbeat.seq` is "integer >= 0, increasing per connection": read as
   "restarts with each connection"; this executor sends 1, 2, ... per session.
   (The daemon turned out not to check it: a decreasing seq is accepted.)
2. Heartbeat cadence: one every `heartbeatMs` whatever else was sent ("any
   frame" renews the lease, so this is merely the simplest safe choice).
3. Which frames follow `conversation_open` is not shown anywhere: this
   executor sends `conversationBound` (same UUID and URL) and
   `conversationState{idle}`, and the `ok` result with the conversationId; no
   `conversationCreated` (that frame names a create's commandId).
4. The field reference lists no field for `conversation_inspect` and
   `conversation_close` (the prose writes `conversation_inspect
   {conversationId}`; `conversation_open` lists only `op.url`): all three are
   resolved by the command's `workerId`, and an `op.conversationId`, when
   present, must name that worker's conversation.
5. Error codes for commands this executor cannot serve are not given by the
   protocol doc: a conversation it does not manage is `UNMANAGED_TARGET`
   (borrowed from SPEC §6b, the WebExtension section); `conversation_steer`
   (reserved, not in our capabilities) and unknown op kinds are
   `INVALID_ARGUMENT`.
6. The lifecycle says `created -> loading -> bound -> idle`, the example
   never reports `loading`: this executor follows the example (created,
   bound, result, `generating`, then `idle` when the simulated reply ends).
7. "performed" means the effect happened. An error answered without acting
   (`DEADLINE_EXCEEDED`, `UNMANAGED_TARGET`) leaves the key "received", so a
   replay (with its fresh deadline) is evaluated again and acts at most once
   (rule 3: "a replay of a received-but-not-performed key acts now, once").
8. A replay of a performed create is answered with `ack` + the stored
   `result` only (rule 3); its `conversationCreated` is not repeated; the
   binding reaches the daemon again through the after-`welcome` resync.
9. The after-`welcome` resync covers every open conversation
   (`conversationBound` + `conversationState`) and re-sends
   `conversationClosed` for a tab that was lost; a conversation closed on the
   daemon's own `conversation_close` is forgotten and not reported again.
10. A replay that arrives while its first attempt is still running (waiting
   for the page to become idle) only retargets the result and the deadline
   (as SPEC §6b describes for the WebExtension).
11. Close codes: the doc lists them but not what an executor should do; here
   4001 and 4002 stop the executor (a retry cannot succeed), 4003 is logged
   as our own bug and retried with backoff, everything else (4004, 4005,
   4006, 1001, a dropped connection) is retried with backoff (0.1 s first).
12. The frame-rate bound (100/s, burst 200, pings included) is kept on our
   side with a token bucket at 50/s, burst 100, leaving room for pings.
13. A first daemon frame other than `welcome` (undocumented) stops the
   executor; unknown daemon frame types and malformed commands are ignored.
"""

from __future__ import annotations

import asyncio
import collections
import json
import logging
import random
import re
import time
import uuid
from dataclasses import dataclass, field

from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus

PROTOCOL_VERSION = 2  # v2: caller attribution (`callerSeen` / `callerLookup`)
# Frame bounds (docs/executor-protocol.md, "Frames" and "Field reference").
FRAME_MAX = 256 * 1024  # a text frame of more bytes is closed with 4003
DETAIL_MAX = 2048  # `detail` and `url`
FACT_MAX = 256  # a host fact or one capability
CAPABILITIES_MAX = 32
ID_RE = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
URL_PREFIX = "https://chatgpt.com/"
BACKOFF_FIRST_S = 0.1
BACKOFF_MAX_S = 30.0  # "jittered, doubling, <= 30 s"
WELCOME_TIMEOUT_S = 10.0
# Close codes after which reconnecting cannot help (bad credential, version).
FATAL_CLOSE_CODES = {4001, 4002}

log = logging.getLogger("doc_executor")


def now_ms() -> int:
    return int(time.time() * 1000)


def clip(text: str, limit: int = DETAIL_MAX) -> str:
    """Cuts `text` to at most `limit` UTF-8 bytes, on a character boundary."""
    raw = text.encode("utf-8")
    if len(raw) <= limit:
        return text
    return raw[:limit].decode("utf-8", errors="ignore")


class FatalExecutorError(Exception):
    """The daemon refused us for a reason a reconnect cannot fix."""


@dataclass
class SimConversation:
    """One simulated ChatGPT conversation in one managed tab."""

    conversation_id: str
    worker_id: str
    state: str = "loading"  # loading | generating | idle | error | closed
    prompts: list[str] = field(default_factory=list)
    app: str | None = None
    forgotten: bool = False  # closed on the daemon's command: never reported again
    # The request ids its page shows (`metadata.request_id`, one per turn),
    # in the page's order: the last is the newest.
    requests: list[str] = field(default_factory=list)
    idle: asyncio.Event = field(default_factory=asyncio.Event)
    _reply: asyncio.Task | None = None

    @property
    def url(self) -> str:
        return f"{URL_PREFIX}c/{self.conversation_id}"


@dataclass
class JournalEntry:
    """`received -> (effect) -> performed(outcome)`, keyed by idempotencyKey."""

    key: str
    kind: str
    worker_id: str
    command_id: str  # the newest command carrying this key: results go to it
    deadline_ms: int  # the newest attempt's deadline
    status: str = "received"
    outcome: dict | None = None  # the stored outcome, once performed
    task: asyncio.Task | None = None


class DocExecutor:
    def __init__(self, url: str, credential: str, *, executor_kind: str = "fake",
                 reply_s: float = 0.2, host_os: str = "linux", capabilities: tuple[str, ...] = ()):
        parts = credential.split(".")
        if len(parts) != 3 or parts[0] != "exc1" or not ID_RE.match(parts[1]):
            raise ValueError("a credential looks like exc1.<executorId>.<64 hex>")
        # Over a bound the daemon refuses the whole hello (4003 TOO_LARGE).
        if len(capabilities) > CAPABILITIES_MAX or any(len(c.encode()) > FACT_MAX for c in capabilities):
            raise ValueError(f"at most {CAPABILITIES_MAX} capabilities of at most {FACT_MAX} bytes")
        self.capabilities = list(capabilities)
        self.url = url
        self._credential = credential  # travels only in `hello`; never logged
        self.executor_id = parts[1]  # "hello.executorId must be the id inside it"
        # New with every process start; kept across this process's reconnects so
        # that our own reconnect replaces a half-open older session (4005).
        self.instance_id = "inst-" + uuid.uuid4().hex[:16]
        self.executor_kind = executor_kind
        self.host_os = clip(host_os, FACT_MAX)
        self.reply_s = reply_s

        # --- the simulated browser -------------------------------------------
        self.conversations: dict[str, SimConversation] = {}
        self.by_worker: dict[str, str] = {}  # worker -> its managed conversation
        # Test hooks: every submitted prompt, and counts per conversation.
        self.submissions: asyncio.Queue[tuple[str, str]] = asyncio.Queue()
        self.submission_counts: collections.Counter[str] = collections.Counter()
        self.creates_per_worker: collections.Counter[str] = collections.Counter()
        self.effects_per_key: collections.Counter[str] = collections.Counter()
        # Test hook: awaited with (entry, outcome) after an effect and before
        # its first result is sent (e.g. to kill the daemon right there).
        self.before_result = None

        # --- the journal: in memory, outlives every session -------------------
        self.journal: dict[str, JournalEntry] = {}

        # --- session bookkeeping ----------------------------------------------
        self.welcomes = 0  # sessions that reached `welcome`
        self.welcome: dict | None = None
        self.connected = asyncio.Event()
        self.closes: list[tuple[int | None, str]] = []  # (code, reason) per session end
        self.commands_seen: list[dict] = []  # every command frame, in order
        self.fatal: str | None = None
        self._ws = None  # the current welcomed session, or None
        self._stopping = False
        self._runner: asyncio.Task | None = None
        self._tokens = 100.0  # frame-rate token bucket
        self._tokens_at = time.monotonic()

    # ------------------------------------------------------------------ life

    def start(self) -> asyncio.Task:
        self._runner = asyncio.create_task(self.run(), name="doc-executor")
        return self._runner

    async def stop(self) -> None:
        self._stopping = True
        if self._runner is not None:
            self._runner.cancel()
            try:
                await self._runner
            except (asyncio.CancelledError, Exception):
                pass
        for conv in self.conversations.values():
            if conv._reply is not None:
                conv._reply.cancel()
        for entry in self.journal.values():
            if entry.task is not None:
                entry.task.cancel()

    async def run(self) -> None:
        """Connects, serves, and after any disconnect reconnects with the same
        executorId and credential, backing off (jittered, doubling, <= 30 s)."""
        attempt = 0
        while not self._stopping:
            welcomed_before = self.welcomes
            try:
                async with connect(self.url, proxy=None, compression=None, max_size=4 * FRAME_MAX,
                                   open_timeout=5, close_timeout=2) as ws:
                    await self._session(ws)
            except FatalExecutorError as e:
                self.fatal = str(e)
                log.error("executor stopped: %s", e)
                return
            except (OSError, InvalidHandshake, ConnectionClosed, asyncio.TimeoutError) as e:
                if isinstance(e, InvalidStatus):  # 403: Host or Origin refused
                    log.warning("upgrade refused: HTTP %s", e.response.status_code)
                else:
                    log.info("connection failed: %r", e)
            except Exception:  # a bug of ours: log it, keep the executor alive
                log.exception("session failed")
            finally:
                self._ws = None
                self.connected.clear()
            if self.welcomes > welcomed_before:
                attempt = 0  # a session was established: start the backoff again
            delay = min(BACKOFF_MAX_S, BACKOFF_FIRST_S * (2 ** attempt))
            attempt += 1
            await asyncio.sleep(random.uniform(delay / 2, delay))

    async def _session(self, ws) -> None:
        hello = {
            "type": "hello",
            "protocolVersion": PROTOCOL_VERSION,
            "token": self._credential,
            "executorId": self.executor_id,
            "executorInstanceId": self.instance_id,
            "executorKind": self.executor_kind,
            "capabilities": self.capabilities,  # by default none: no `conversation_steer`
            "host": {"os": self.host_os},
        }
        await self._send_on(ws, hello)  # first frame, well within 10 s
        heartbeat = None
        try:
            welcome = json.loads(await asyncio.wait_for(ws.recv(), WELCOME_TIMEOUT_S))
            if welcome.get("type") != "welcome" or welcome.get("protocolVersion") != PROTOCOL_VERSION:
                raise FatalExecutorError(f"unexpected first daemon frame {welcome.get('type')!r}")
            self.welcome = welcome
            self.welcomes += 1
            self._ws = ws
            heartbeat = asyncio.create_task(self._heartbeat(ws, welcome["heartbeatMs"] / 1000))
            # Right after `welcome`: every binding and current state, even
            # unchanged (reports sent while the daemon was down were lost).
            await self._resync(ws)
            self.connected.set()
            async for raw in ws:
                if isinstance(raw, bytes):
                    continue  # the daemon sends text frames only
                try:
                    frame = json.loads(raw)
                except ValueError:
                    log.warning("ignoring a daemon frame that is not JSON")
                    continue
                self._on_daemon_frame(frame)
        except ConnectionClosed:
            pass
        finally:
            if heartbeat is not None:
                heartbeat.cancel()
            if self._ws is ws:
                self._ws = None
                self.connected.clear()
            code, reason = ws.close_code, ws.close_reason or ""
            self.closes.append((code, reason))
            log.info("session closed: %s %s", code, reason)
            if code in FATAL_CLOSE_CODES:
                raise FatalExecutorError(f"{code} {reason}")
            if code == 4003:
                log.error("the daemon says we broke the protocol: %s", reason)

    async def _heartbeat(self, ws, every_s: float) -> None:
        seq = 0
        while True:
            await asyncio.sleep(every_s)
            seq += 1
            await self._send_on(ws, {"type": "heartbeat", "seq": seq})

    async def _resync(self, ws) -> None:
        for conv in list(self.conversations.values()):
            if self.by_worker.get(conv.worker_id) != conv.conversation_id or conv.forgotten:
                continue
            if conv.state == "closed":  # the tab was lost: that report may have been lost too
                await self._send_on(ws, {"type": "conversationClosed", "workerId": conv.worker_id})
                continue
            await self._send_on(ws, self._bound_frame(conv))
            await self._send_on(ws, self._state_frame(conv))

    # ------------------------------------------------------------- sending

    async def _send_on(self, ws, frame: dict) -> None:
        text = json.dumps(frame, separators=(",", ":"), ensure_ascii=False)
        if len(text.encode("utf-8")) > FRAME_MAX:
            raise ValueError(f"refusing to send a {frame['type']} frame over {FRAME_MAX} bytes")
        # Token bucket: the daemon closes at more than 100 frames/s (burst 200).
        while True:
            t = time.monotonic()
            self._tokens = min(100.0, self._tokens + (t - self._tokens_at) * 50.0)
            self._tokens_at = t
            if self._tokens >= 1:
                self._tokens -= 1
                break
            await asyncio.sleep(0.02)
        await ws.send(text)

    async def _send(self, frame: dict) -> None:
        """Sends on the current welcomed session; without one the frame is lost,
        which the protocol tolerates: commands are replayed and answered from
        the journal, and observations are re-sent after the next `welcome`."""
        ws = self._ws
        if ws is None:
            return
        try:
            await self._send_on(ws, frame)
        except ConnectionClosed:
            pass

    async def _result(self, command_id: str, outcome: dict) -> None:
        await self._send({"type": "result", "commandId": command_id, "outcome": outcome})

    @staticmethod
    def _ok(conversation_id: str | None = None) -> dict:
        out = {"status": "ok"}
        if conversation_id is not None:
            out["conversationId"] = conversation_id
        return out

    @staticmethod
    def _error(code: str, detail: str) -> dict:
        return {"status": "error", "code": code, "detail": clip(detail)}

    def _bound_frame(self, conv: SimConversation) -> dict:
        assert len(conv.url.encode()) <= DETAIL_MAX and conv.url.startswith(URL_PREFIX)
        return {"type": "conversationBound", "workerId": conv.worker_id,
                "conversationId": conv.conversation_id, "url": conv.url}

    def _state_frame(self, conv: SimConversation) -> dict:
        return {"type": "conversationState", "workerId": conv.worker_id, "state": conv.state}

    async def _set_state(self, conv: SimConversation, state: str) -> None:
        conv.state = state
        if state == "idle":
            conv.idle.set()
        else:
            conv.idle.clear()
        await self._send(self._state_frame(conv))

    # ------------------------------------------------------------ commands

    # ------------------------------------------------- caller attribution (v2)

    def page_shows_request(self, conversation_id: str, request_id: str) -> None:
        """The model in `conversation_id` made a tool call: its page now shows
        the turn's request id (ChatGPT gives every call of a turn the same
        one). Reported at once (`callerSeen`), once; again if asked."""
        conv = self.conversations.get(conversation_id)
        if conv is None or conv.forgotten or request_id in conv.requests:
            return
        conv.requests.append(request_id)
        asyncio.create_task(self._caller_seen(conv, request_id))

    async def _caller_seen(self, conv: SimConversation, request_id: str) -> None:
        # Only for the tab's own, bound conversation, and never any text.
        if self.by_worker.get(conv.worker_id) != conv.conversation_id:
            return
        await self._send({"type": "callerSeen", "workerId": conv.worker_id, "conversationId": conv.conversation_id,
                          "requestId": request_id, "newest": conv.requests[-1] == request_id})

    def _on_caller_lookup(self, frame: dict) -> None:
        """A call waits on attribution: answer from the worker's page, if it
        shows that conversation and that request id (else say nothing)."""
        conv = self.conversations.get(self.by_worker.get(frame.get("workerId"), ""))
        if conv is None or conv.conversation_id != frame.get("conversationId"):
            return
        if frame.get("requestId") in conv.requests:
            asyncio.create_task(self._caller_seen(conv, frame["requestId"]))

    def _on_daemon_frame(self, frame: dict) -> None:
        kind = frame.get("type")
        if kind == "callerLookup":
            self._on_caller_lookup(frame)
        elif kind == "command":
            if not all(isinstance(frame.get(f), (str, int)) for f in ("commandId", "workerId", "deadlineMs",
                                                                    "idempotencyKey")) \
                    or not isinstance(frame.get("op"), dict):
                log.warning("ignoring a malformed command frame")
                return
            self.commands_seen.append(frame)
            asyncio.create_task(self._on_command(frame))
        else:
            log.info("ignoring daemon frame %r", kind)  # daemon frames may grow

    async def _on_command(self, cmd: dict) -> None:
        command_id, worker_id, key = cmd["commandId"], cmd["workerId"], cmd["idempotencyKey"]
        op = cmd["op"]
        if op.get("kind") == "conversation_inspect":
            # Read-only: no journal entry; a replay is answered the same way.
            await self._send({"type": "ack", "commandId": command_id})
            await self._inspect(command_id, worker_id, op)
            return
        entry = self.journal.get(key)
        if entry is not None and entry.status == "performed":
            # A replay of a performed key: ack + the stored result, no effect.
            entry.command_id = command_id
            await self._send({"type": "ack", "commandId": command_id})
            await self._result(command_id, entry.outcome)
            return
        if entry is not None and entry.task is not None and not entry.task.done():
            # Work in progress (replayed after a reconnect): only retarget the
            # result to this command and attempt; the running task answers it.
            entry.command_id, entry.deadline_ms = command_id, cmd["deadlineMs"]
            await self._send({"type": "ack", "commandId": command_id})
            return
        if entry is None:
            entry = JournalEntry(key=key, kind=op.get("kind", "?"), worker_id=worker_id,
                                 command_id=command_id, deadline_ms=cmd["deadlineMs"])
            self.journal[key] = entry
        else:  # received, not performed: act now, once
            entry.command_id, entry.deadline_ms = command_id, cmd["deadlineMs"]
        # Claimed before the first await, so a concurrent replay only retargets.
        entry.task = asyncio.current_task()
        # The ack says the command is journaled (it is, above), nothing more.
        await self._send({"type": "ack", "commandId": command_id})
        after = None
        try:
            outcome, after = await self._perform(entry, op)
        except Exception as e:  # a bug of ours must still answer, and never act twice
            log.exception("command %s failed", command_id)
            outcome = entry.outcome if entry.status == "performed" else self._error("INTERNAL", repr(e))
        if self.before_result is not None:
            await self.before_result(entry, outcome)
        await self._result(entry.command_id, outcome)
        if after is not None:
            await after()  # observations that follow the result (as in the doc's examples)

    def _deadline_passed(self, entry: JournalEntry) -> bool:
        return now_ms() > entry.deadline_ms

    async def _wait_idle(self, entry: JournalEntry, conv: SimConversation) -> bool:
        """A prompt goes in only when the page is idle; waits until the
        (possibly refreshed) deadline. False: the deadline passed first."""
        while not conv.idle.is_set():
            left = (entry.deadline_ms - now_ms()) / 1000
            if left <= 0:
                return False
            try:
                await asyncio.wait_for(conv.idle.wait(), min(left, 1.0))
            except asyncio.TimeoutError:
                pass
        return not self._deadline_passed(entry)

    def _performed(self, entry: JournalEntry, outcome: dict) -> dict:
        entry.status, entry.outcome = "performed", outcome
        self.effects_per_key[entry.key] += 1
        return outcome

    async def _perform(self, entry: JournalEntry, op: dict):
        """Returns (outcome, after): `after` sends what follows the result."""
        kind = op.get("kind")
        if kind == "conversation_create":
            return await self._create(entry, op)
        if kind == "conversation_send":
            return await self._submit_into(entry, op)
        if kind == "conversation_open":
            return await self._open(entry, op)
        if kind == "conversation_close":
            return await self._close(entry, op)
        return self._error("INVALID_ARGUMENT", f"op {kind!r} is not supported by this executor"), None

    async def _create(self, entry: JournalEntry, op: dict):
        if self._deadline_passed(entry):
            return self._error("DEADLINE_EXCEEDED", "the create's deadline passed before it started"), None
        conv = SimConversation(conversation_id=str(uuid.uuid4()), worker_id=entry.worker_id, app=op.get("app"))
        self.conversations[conv.conversation_id] = conv
        self.by_worker[entry.worker_id] = conv.conversation_id
        self.creates_per_worker[entry.worker_id] += 1
        await self._send({"type": "conversationCreated", "commandId": entry.command_id, "workerId": entry.worker_id})
        await self._send(self._bound_frame(conv))
        self._submit(conv, op["prompt"])  # the effect
        return self._performed(entry, self._ok(conv.conversation_id)), lambda: self._generate(conv)

    async def _submit_into(self, entry: JournalEntry, op: dict):
        conv = self._managed(entry.worker_id, op.get("conversationId"))
        if conv is None or conv.state == "closed":
            return self._error("UNMANAGED_TARGET", "this executor manages no open conversation for that worker"), None
        if not await self._wait_idle(entry, conv):
            return self._error("DEADLINE_EXCEEDED", "the deadline passed before the page was ready for the prompt"), None
        self._submit(conv, op["prompt"])  # the effect
        # `send` completes on submission, not at the end of generation.
        return self._performed(entry, self._ok(conv.conversation_id)), lambda: self._generate(conv)

    async def _open(self, entry: JournalEntry, op: dict):
        m = re.fullmatch(r"https://chatgpt\.com/c/([0-9a-f-]{36})", op.get("url", ""))
        conv = self.conversations.get(m.group(1)) if m else None
        if conv is None or conv.worker_id != entry.worker_id:
            return self._error("UNMANAGED_TARGET", "no conversation of that worker has that url"), None
        if self._deadline_passed(entry):
            return self._error("DEADLINE_EXCEEDED", "the open's deadline passed before it started"), None
        self.by_worker[entry.worker_id] = conv.conversation_id
        conv.state, conv.forgotten = "loading", False  # the effect: a new managed tab at exactly that URL
        outcome = self._performed(entry, self._ok(conv.conversation_id))
        await self._send(self._bound_frame(conv))
        await self._set_state(conv, "idle")
        return outcome, None

    async def _close(self, entry: JournalEntry, op: dict):
        conv = self._managed(entry.worker_id, op.get("conversationId"))
        if conv is None:
            return self._error("UNMANAGED_TARGET", "this executor manages no conversation for that worker"), None
        if self._deadline_passed(entry):
            return self._error("DEADLINE_EXCEEDED", "the close's deadline passed before it started"), None
        if conv._reply is not None:
            conv._reply.cancel()
        conv.state = "closed"  # the effect: the tab is gone
        conv.forgotten = True  # "the carrier closes the tab and forgets it"
        conv.idle.clear()
        outcome = self._performed(entry, self._ok(conv.conversation_id))
        await self._send({"type": "conversationClosed", "workerId": conv.worker_id})
        return outcome, None

    async def _inspect(self, command_id: str, worker_id: str, op: dict) -> None:
        conv = self._managed(worker_id, op.get("conversationId"))
        if conv is None:
            await self._result(command_id, self._error("UNMANAGED_TARGET", "no managed conversation for that worker"))
            return
        if conv.state == "closed":
            await self._send({"type": "conversationClosed", "workerId": worker_id})
        else:
            await self._send(self._state_frame(conv))  # changed or not
        await self._result(command_id, self._ok(conv.conversation_id))

    def _managed(self, worker_id: str, conversation_id: str | None) -> SimConversation | None:
        cid = self.by_worker.get(worker_id)
        if cid is None or (conversation_id is not None and conversation_id != cid):
            return None
        return self.conversations[cid]

    # --------------------------------------------------- the simulated page

    async def lose_tab(self, conversation_id: str) -> None:
        """Test hook: the managed tab is gone (closed by a person, crashed)."""
        conv = self.conversations[conversation_id]
        if conv._reply is not None:
            conv._reply.cancel()
        conv.state = "closed"
        conv.idle.clear()
        await self._send({"type": "conversationClosed", "workerId": conv.worker_id})

    def _submit(self, conv: SimConversation, prompt: str) -> None:
        """The one external effect: the page took the prompt."""
        conv.prompts.append(prompt)
        self.submission_counts[conv.conversation_id] += 1
        conv.idle.clear()
        conv.state = "generating"
        self.submissions.put_nowait((conv.conversation_id, prompt))

    async def _generate(self, conv: SimConversation) -> None:
        """Reports `generating`, and `idle` once the simulated reply is done."""
        await self._set_state(conv, "generating")

        async def reply():
            await asyncio.sleep(self.reply_s)
            if conv.state == "generating":
                await self._set_state(conv, "idle")
        conv._reply = asyncio.create_task(reply())
