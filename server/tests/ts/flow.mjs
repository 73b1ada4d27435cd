// Root and two children through one stdio connection to `orchestrator mcp-stdio`,
// driven by the TypeScript MCP SDK (a second, independent client implementation).
//
// usage: node flow.mjs ORCHESTRATOR_BIN STATE_DIR
import assert from "node:assert/strict";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const [bin, stateDir] = process.argv.slice(2);
const transport = new StdioClientTransport({ command: bin, args: ["mcp-stdio", "--state-dir", stateDir], stderr: "inherit" });
const client = new Client({ name: "ts-flow", version: "1.0.0" });
await client.connect(transport);

async function call(name, args) {
  const result = await client.callTool({ name, arguments: args });
  if (result.isError) {
    const body = JSON.parse(result.content[0].text);
    const err = new Error(`${name}: ${body.code}: ${body.message}`);
    err.code = body.code;
    throw err;
  }
  assert.ok(result.structuredContent, `${name} returned no structured content`);
  return result.structuredContent;
}

async function waitFor(capability, cursor, predicate) {
  for (let i = 0; i < 20; i++) {
    const page = await call("events_wait", { capability, after_cursor: cursor, timeout_ms: 5000 });
    for (const e of page.events) if (predicate(e)) return [e, e.cursor];
    cursor = page.cursor;
  }
  throw new Error("no matching event");
}

const attachOf = (prompt) => prompt.match(/"(att_[0-9a-f]{32}_[0-9a-f]{32})"/)[1];

const { tools } = await client.listTools();
assert.equal(tools.length, 40);
for (const t of tools) {
  assert.ok(t.outputSchema, `${t.name} has no outputSchema`);
  for (const h of ["readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint"]) {
    assert.equal(typeof t.annotations[h], "boolean", `${t.name}.${h}`);
  }
}

const created = await call("run_create", { title: "flow over stdio", attribution: "capability_only" });
const root = created.root_capability;
let cursor = created.run.cursor;
const spawnA = await call("worker_spawn", { capability: root, name: "alpha", assignment: { objective: "build A" } });
const spawnB = await call("worker_spawn", { capability: root, name: "beta", assignment: { objective: "build B" } });
const attA = await call("worker_attach", { attach_identity: attachOf(spawnA.bootstrap_prompt) });
const attB = await call("worker_attach", { attach_identity: attachOf(spawnB.bootstrap_prompt) });
assert.equal(attA.assignment.objective, "build A");
assert.equal(attB.assignment.objective, "build B");
const aId = attA.worker.worker_id;

const q = await call("message_send", { capability: attA.capability, to: "/root", kind: "question", body: "Which port?" });
let event;
[event, cursor] = await waitFor(root, cursor, (e) => e.type === "worker.message" && e.data.kind === "question");
assert.equal(event.data.message_id, q.message_id);
await call("message_send", { capability: root, to: aId, kind: "answer", body: "7777", in_reply_to: q.message_id });
const [answer] = await waitFor(attA.capability, 0, (e) => e.type === "worker.message" && e.data.kind === "answer");
assert.equal(answer.data.body, "7777");

// Wrong-worker and root-only refusals come back typed.
await assert.rejects(call("worker_complete", { capability: attA.capability, worker_id: attB.worker.worker_id, summary: "x" }), { code: "FORBIDDEN" });
await assert.rejects(call("worker_list", { capability: attB.capability }), { code: "FORBIDDEN" });

await call("worker_complete", { capability: attA.capability, summary: "A built" });
await call("worker_complete", { capability: attB.capability, summary: "B built" });
const done = new Set();
while (done.size < 2) {
  [event, cursor] = await waitFor(root, cursor, (e) => e.type === "worker.completed");
  done.add(event.data.worker_id);
}
const closed = await call("worker_complete", { capability: root, summary: "both built" });
assert.equal(closed.run_state, "completed");

const start = Date.now();
const idle = await call("events_wait", { capability: root, after_cursor: closed.cursor, timeout_ms: 1000 });
assert.equal(idle.timed_out, true);
assert.ok(Date.now() - start < 4000);

await client.close();
console.log("flow over stdio: ok");
