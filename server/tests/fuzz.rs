//! Schema-driven fuzzing of every MCP tool and every executor frame against
//! the real binary. Arguments are generated from each tool's *published*
//! input schema (`tools/list`) — mostly well-typed with hostile values
//! (huge, empty, control characters, forged credentials, wrong types,
//! unknown fields, missing required ones), sometimes with root's real
//! capability so calls reach the domain. Properties, per call:
//!
//! - an answer comes back (bounded: the reply's read timeout);
//! - it is a result, or a tool error whose text is `{code, message}` with a
//!   code from `docs/errors.md`, or a JSON-RPC invalid-params error; never
//!   an internal error;
//! - a refused call stores nothing (root's run cursor does not move).
//!
//! Executor frames are generated from the frame schema and sent after a
//! valid `hello`: the session either takes the frame or closes with a
//! documented code, and the daemon stays healthy.
//!
//! Quick mode in CI (`FUZZ_CASES`, default 40 per tool); the seed is
//! printed and `FUZZ_SEED` replays a run.

mod support;

use std::collections::HashSet;

use protocol::ErrorCode;
use protocol::executor::PROTOCOL_VERSION;
use serde_json::{Map, Value, json};
use support::{Daemon, Mcp, credential, hello, http, refused_after};
use tokio_tungstenite::tungstenite::Message;

/// xorshift64*: small, seeded, reproducible.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
}

fn cases() -> usize {
    std::env::var("FUZZ_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(40)
}

fn seed() -> u64 {
    let seed = std::env::var("FUZZ_SEED").ok().and_then(|v| v.parse().ok()).unwrap_or_else(|| {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64 | 1
    });
    eprintln!("fuzz seed {seed} (FUZZ_SEED={seed} replays it)");
    seed
}

/// What the generator knows beyond the schema: real credentials to mix in.
struct Context {
    capability: String,
    worker_id: String,
}

/// A hostile string: usually plausible, sometimes extreme.
fn string(rng: &mut Rng, field: &str, ctx: &Context) -> Value {
    let s = match rng.below(12) {
        0 => String::new(),
        1 => "x".repeat(40_000 + rng.below(40_000)),
        2 => "\u{0}\u{7}\n\r\t".into(),
        3 => "cap_00000000000000000000000000000000_".to_owned() + &"0".repeat(64),
        4 => "att_ffffffffffffffffffffffffffffffff_".to_owned() + &"F".repeat(32),
        5 => "wrk_".to_owned() + &"a".repeat(32),
        6 => "../../etc/passwd".into(),
        7 => "ünïcødé ✓ 漢字 \u{202e}".into(),
        8 => "/root".into(),
        9 => format!("{}", rng.next()),
        _ => "a".repeat(1 + rng.below(300)),
    };
    // Real credentials and ids, so calls reach past authentication.
    if field == "capability" && rng.chance(70) {
        return json!(ctx.capability);
    }
    if (field == "worker_id" || field == "to") && rng.chance(50) {
        return json!(ctx.worker_id);
    }
    json!(s)
}

fn resolve<'a>(schema: &'a Value, defs: &'a Value) -> &'a Value {
    match schema.get("$ref").and_then(Value::as_str) {
        Some(r) => r.strip_prefix("#/$defs/").and_then(|name| defs.get(name)).unwrap_or(schema),
        None => schema,
    }
}

/// A value for `schema`: the schema's own shape most of the time.
fn value(rng: &mut Rng, schema: &Value, defs: &Value, field: &str, depth: u32, ctx: &Context) -> Value {
    let schema = resolve(schema, defs);
    if let Some(constant) = schema.get("const")
        && rng.chance(95)
    {
        return constant.clone();
    }
    // MCP requires `arguments` (and frames) to be objects: only inner values get the wrong type.
    if depth > 4 || (depth > 0 && rng.chance(8)) {
        // The wrong type altogether.
        return [json!(null), json!(true), json!(-1), json!(1e300), json!([]), json!({}), json!("s")][rng.below(7)]
            .clone();
    }
    if let Some(options) = schema.get("anyOf").or_else(|| schema.get("oneOf")).and_then(Value::as_array) {
        let pick = rng.below(options.len());
        return value(rng, &options[pick], defs, field, depth + 1, ctx);
    }
    if let Some(choices) = schema.get("enum").and_then(Value::as_array) {
        return if rng.chance(85) { choices[rng.below(choices.len())].clone() } else { string(rng, field, ctx) };
    }
    let types: Vec<&str> = match schema.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
        _ => vec!["object"],
    };
    match types[rng.below(types.len().max(1))] {
        "null" => Value::Null,
        "boolean" => json!(rng.chance(50)),
        "integer" => {
            // Waits are capped so a case never sleeps for long; everything else ranges wide.
            if field.ends_with("timeout_ms") {
                return json!(rng.below(200));
            }
            [json!(0), json!(1), json!(rng.below(600)), json!(u64::MAX), json!(-5), json!(2.5)][rng.below(6)].clone()
        }
        "number" => json!(rng.below(1000) as f64 / 7.0),
        "string" => string(rng, field, ctx),
        "array" => {
            let items = schema.get("items").cloned().unwrap_or(json!({}));
            let n = if rng.chance(10) { 65 + rng.below(10) } else { rng.below(4) };
            Value::Array((0..n).map(|_| value(rng, &items, defs, field, depth + 1, ctx)).collect())
        }
        _ => {
            let mut out = Map::new();
            let required: HashSet<&str> = schema
                .get("required")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect();
            if let Some(props) = schema.get("properties").and_then(Value::as_object) {
                for (name, sub) in props {
                    let keep = if required.contains(name.as_str()) { rng.chance(95) } else { rng.chance(50) };
                    if keep {
                        out.insert(name.clone(), value(rng, sub, defs, name, depth + 1, ctx));
                    }
                }
            }
            if rng.chance(10) {
                out.insert("admin".into(), json!(true));
            }
            // An absent or null wait is the default (25 s): a case never
            // sleeps that long, even on a log with nothing after its cursor
            // (an empty ownership stream).
            let waits = schema.get("properties").is_some_and(|p| p.get("timeout_ms").is_some());
            if waits && out.get("timeout_ms").is_none_or(Value::is_null) {
                out.insert("timeout_ms".into(), json!(rng.below(200)));
            }
            Value::Object(out)
        }
    }
}

/// The known wire codes.
fn codes() -> HashSet<&'static str> {
    ErrorCode::ALL.iter().map(|c| c.as_str()).collect()
}

/// Checks one reply: a result, a typed tool error, or invalid params.
fn check_reply(tool: &str, args: &Value, reply: &Value, known: &HashSet<&str>) -> bool {
    let context = || format!("{tool} {}", serde_json::to_string(args).unwrap().chars().take(400).collect::<String>());
    if let Some(error) = reply.get("error") {
        assert_eq!(error["code"], -32602, "{}: JSON-RPC error {error}", context());
        return false;
    }
    let result = &reply["result"];
    assert!(result.is_object(), "{}: no result: {reply}", context());
    if result["isError"] != true {
        return true;
    }
    let text = result["content"][0]["text"].as_str().unwrap_or_default();
    let err: Value =
        serde_json::from_str(text).unwrap_or_else(|e| panic!("{}: error text is not JSON ({e}): {text}", context()));
    let code = err["code"].as_str().unwrap_or_default();
    assert!(known.contains(code), "{}: unknown code {code}: {text}", context());
    assert!(err["message"].is_string(), "{}: {text}", context());
    assert!(result.get("structuredContent").is_none_or(Value::is_null), "{}: error in structuredContent", context());
    false
}

#[test]
fn every_tool_answers_generated_hostile_arguments_with_a_typed_error_and_stores_nothing_on_refusal() {
    let dir = tempfile::tempdir().unwrap();
    let daemon = Daemon::start(dir.path());
    let mcp = Mcp::connect(&daemon.addr);
    let tools = mcp.list_tools()["tools"].as_array().unwrap().clone();
    assert!(tools.len() >= 20, "{} tools", tools.len());
    let known = codes();
    let mut rng = Rng(seed());
    let mut summary = Vec::new();
    for tool in &tools {
        let name = tool["name"].as_str().unwrap();
        // A fresh run per tool, so one tool's successes (a cancel) do not blunt the next.
        let created = mcp.ok("run_create", json!({"title": format!("fuzz {name}")}));
        let capability = created["root_capability"].as_str().unwrap().to_owned();
        let spawned = mcp
            .ok("worker_spawn", json!({"capability": capability, "name": "w", "assignment": {"objective": "fuzzed"}}));
        let ctx = Context { capability, worker_id: spawned["worker"]["worker_id"].as_str().unwrap().to_owned() };
        let cursor = || mcp.ok("run_get", json!({"capability": ctx.capability}))["run"]["cursor"].as_u64().unwrap();
        let schema = &tool["inputSchema"];
        let defs = schema.get("$defs").cloned().unwrap_or(json!({}));
        let (mut ok, mut refused) = (0, 0);
        for _ in 0..cases() {
            let args = value(&mut rng, schema, &defs, "", 0, &ctx);
            let before = cursor();
            let reply = mcp.raw(name, args.clone());
            if check_reply(name, &args, &reply, &known) {
                ok += 1;
            } else {
                refused += 1;
                assert_eq!(cursor(), before, "{name} {args}: a refused call stored events");
            }
        }
        summary.push(format!("{name}: {ok} ok, {refused} refused"));
    }
    eprintln!("fuzz: {} cases per tool\n  {}", cases(), summary.join("\n  "));
    assert_eq!(http(&daemon.addr, "GET", "/healthz", &[], "").0, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_executor_frame_is_taken_or_refused_with_a_documented_reason() {
    let state = tempfile::tempdir().unwrap();
    let daemon = Daemon::start(state.path());
    let schema = serde_json::to_value(schemars::schema_for!(protocol::executor::ExecutorFrame)).unwrap();
    let defs = schema.get("$defs").cloned().unwrap_or(json!({}));
    let ctx = Context { capability: "cap".into(), worker_id: "wrk_".to_owned() + &"0".repeat(32) };
    let token = credential(state.path(), "raw");
    let mut rng = Rng(seed());
    let (mut taken, mut refused) = (0, 0);
    let documented = [4001u16, 4003, 4004, 4005, 4006];
    for _ in 0..cases() * 5 {
        let frame = value(&mut rng, &schema, &defs, "", 0, &ctx);
        let messages = vec![
            Message::Text(hello(&token, PROTOCOL_VERSION).into()),
            Message::Text(frame.to_string().into()),
            // A frame no session accepts: ends every session with a reason we can read.
            Message::Text(hello(&token, PROTOCOL_VERSION).into()),
        ];
        let (code, reason) = refused_after(&daemon, None, messages).await.unwrap_or_else(|e| panic!("{frame}: {e}"));
        assert!(documented.contains(&code), "{frame}: {code} {reason}");
        if reason.contains("hello sent twice") { taken += 1 } else { refused += 1 }
    }
    eprintln!("fuzz: {} executor frames, {taken} taken, {refused} refused with a reason", cases() * 5);
    assert_eq!(http(&daemon.addr, "GET", "/healthz", &[], "").0, 200);
}
