//! `docs/executor-protocol.md`, sentence by sentence where it says what the
//! daemon does: the real binary, a raw executor speaking the wire protocol
//! by hand (every frame visible), and MCP calls as ChatGPT makes them. A
//! sentence of the doc that the daemon contradicts fails here. (What single
//! frames may hold is in `protocol/tests/executor_doc.rs`.)

mod support;

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use support::{Daemon, Mcp, credential, ws_url};
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::Message;

const WAIT: Duration = Duration::from_secs(20);

/// An executor written by hand from the doc: it says `hello`, keeps its
/// lease with heartbeats, answers `conversation_inspect` with the state it
/// last reported, answers `callerLookup` (when told to) as a page showing
/// the id as its newest, and hands every other command to the test.
struct Raw {
    out: mpsc::UnboundedSender<String>,
    commands: mpsc::UnboundedReceiver<Value>,
    shared: Arc<Mutex<Shared>>,
    welcome: Value,
}

#[derive(Default)]
struct Shared {
    /// Every `callerLookup` received, in order.
    lookups: Vec<Value>,
    /// Whether a lookup is answered with `callerSeen {newest: true}`.
    answer_lookups: bool,
    /// Per worker: its conversation and the state last reported.
    pages: HashMap<String, (String, String)>,
}

impl Raw {
    /// Connects to `url` as `executor_id` (protocol 2) and waits for `welcome`.
    async fn connect(url: &str, token: &str, executor_id: &str) -> Raw {
        let (socket, _) = tokio_tungstenite::connect_async(url).await.unwrap();
        let (mut sink, mut stream) = socket.split();
        let hello = json!({"type": "hello", "protocolVersion": 2, "token": token, "executorId": executor_id,
            "executorInstanceId": "raw-1", "executorKind": "fake", "capabilities": [], "host": {"os": "linux"}});
        sink.send(Message::Text(hello.to_string().into())).await.unwrap();
        let welcome: Value = loop {
            match tokio::time::timeout(WAIT, stream.next()).await.expect("an answer to hello") {
                Some(Ok(Message::Text(text))) => break serde_json::from_str(&text).unwrap(),
                Some(Ok(Message::Close(close))) => panic!("closed instead of welcomed: {close:?}"),
                Some(Ok(_)) => continue,
                other => panic!("no welcome: {other:?}"),
            }
        };
        let (out, mut outgoing) = mpsc::unbounded_channel::<String>();
        tokio::spawn(async move {
            let mut beat = tokio::time::interval(Duration::from_secs(5));
            let mut seq = 0u64;
            loop {
                let text = tokio::select! {
                    next = outgoing.recv() => match next { Some(text) => text, None => return },
                    _ = beat.tick() => {
                        seq += 1;
                        json!({"type": "heartbeat", "seq": seq}).to_string()
                    }
                };
                if sink.send(Message::Text(text.into())).await.is_err() {
                    return;
                }
            }
        });
        let shared = Arc::new(Mutex::new(Shared::default()));
        let (to_test, commands) = mpsc::unbounded_channel();
        let (answers, seen) = (out.clone(), shared.clone());
        tokio::spawn(async move {
            while let Some(Ok(message)) = stream.next().await {
                let Message::Text(text) = message else { continue };
                let frame: Value = serde_json::from_str(&text).unwrap();
                if frame["type"] == "callerLookup" {
                    let answer = {
                        let mut s = seen.lock().unwrap();
                        s.lookups.push(frame.clone());
                        s.answer_lookups
                    };
                    if answer {
                        let _ = answers.send(
                            json!({"type": "callerSeen", "workerId": frame["workerId"],
                                "conversationId": frame["conversationId"], "requestId": frame["requestId"],
                                "newest": true})
                            .to_string(),
                        );
                    }
                } else if frame["op"]["kind"] == "conversation_inspect" {
                    let worker = frame["workerId"].as_str().unwrap().to_owned();
                    let state = seen.lock().unwrap().pages.get(&worker).map(|(_, s)| s.clone());
                    let _ = answers.send(json!({"type": "ack", "commandId": frame["commandId"]}).to_string());
                    if let Some(state) = state {
                        let report = json!({"type": "conversationState", "workerId": worker, "state": state});
                        let _ = answers.send(report.to_string());
                    }
                    let ok = json!({"type": "result", "commandId": frame["commandId"], "outcome": {"status": "ok"}});
                    let _ = answers.send(ok.to_string());
                } else if frame["type"] == "command" {
                    let _ = to_test.send(frame);
                }
            }
        });
        Raw { out, commands, shared, welcome }
    }

    fn send(&self, frame: Value) {
        self.out.send(frame.to_string()).unwrap();
    }

    /// The next command (inspects are answered without the test).
    async fn command(&mut self) -> Value {
        tokio::time::timeout(WAIT, self.commands.recv()).await.expect("a command in time").expect("a live session")
    }

    /// Whether no command comes within `within`.
    async fn no_command_within(&mut self, within: Duration) -> Result<(), Value> {
        match tokio::time::timeout(within, self.commands.recv()).await {
            Ok(Some(command)) => Err(command),
            _ => Ok(()),
        }
    }

    /// Reports `state` for `worker`'s page (and answers inspects with it).
    fn state(&self, worker: &str, state: &str) {
        if let Some(page) = self.shared.lock().unwrap().pages.get_mut(worker) {
            page.1 = state.to_owned();
        }
        self.send(json!({"type": "conversationState", "workerId": worker, "state": state}));
    }

    /// Serves a create as the doc's example does: the conversation exists,
    /// is bound, the result says so, and its first turn is generating.
    fn serve_create(&self, create: &Value, conversation: &str) {
        assert_eq!(create["op"]["kind"], "conversation_create", "{create}");
        let (command, worker) = (&create["commandId"], create["workerId"].as_str().unwrap());
        self.shared.lock().unwrap().pages.insert(worker.to_owned(), (conversation.to_owned(), "generating".into()));
        self.send(json!({"type": "ack", "commandId": command}));
        self.send(json!({"type": "conversationCreated", "commandId": command, "workerId": worker}));
        self.send(json!({"type": "conversationBound", "workerId": worker, "conversationId": conversation,
            "url": format!("https://chatgpt.com/c/{conversation}")}));
        self.send(json!({"type": "result", "commandId": command,
            "outcome": {"status": "ok", "conversationId": conversation}}));
        self.send(json!({"type": "conversationState", "workerId": worker, "state": "generating"}));
    }

    /// Acknowledges a command and reports it performed.
    fn ack_ok(&self, command: &Value) {
        self.send(json!({"type": "ack", "commandId": command["commandId"]}));
        self.send(json!({"type": "result", "commandId": command["commandId"],
            "outcome": {"status": "ok", "conversationId": command["op"]["conversationId"]}}));
    }

    fn answer_lookups(&self, answer: bool) {
        self.shared.lock().unwrap().answer_lookups = answer;
    }

    /// How many `callerLookup`s named `request_id`.
    fn lookups_for(&self, request_id: &str) -> usize {
        self.shared.lock().unwrap().lookups.iter().filter(|l| l["requestId"] == request_id).count()
    }

    fn lookups(&self) -> usize {
        self.shared.lock().unwrap().lookups.len()
    }
}

/// Root of a fresh run on `daemon`: its MCP session and capability.
struct Root {
    mcp: Mcp,
    cap: String,
}

impl Root {
    fn new(daemon: &Daemon, run: Value) -> Root {
        let mcp = Mcp::connect(&daemon.addr);
        let cap = mcp.ok("run_create", run)["root_capability"].as_str().unwrap().to_owned();
        Root { mcp, cap }
    }

    /// A run whose workers are resumed on their own, without waiting for
    /// an idle grace.
    fn auto(daemon: &Daemon) -> Root {
        let root = Root::new(daemon, json!({"title": "doc", "attribution": "capability_only"}));
        let policy = json!({"mode": "auto", "idle_grace_ms": 0});
        root.mcp.ok("run_continuation_set_default", json!({"capability": root.cap, "policy": policy}));
        root
    }

    /// Spawns `name`: its worker id and the attach identity its bootstrap carries.
    fn spawn(&self, name: &str) -> (String, String) {
        let out = self.mcp.ok(
            "worker_spawn",
            json!({"capability": self.cap, "name": name, "assignment": {"objective": format!("be {name}")}}),
        );
        let prompt = out["bootstrap_prompt"].as_str().unwrap();
        let attach = prompt.split('"').find(|p| p.starts_with("att_")).unwrap().to_owned();
        (out["worker"]["worker_id"].as_str().unwrap().to_owned(), attach)
    }

    fn events(&self) -> Vec<Value> {
        self.mcp.ok("events_list", json!({"capability": self.cap, "limit": 500}))["events"].as_array().unwrap().clone()
    }

    fn events_of(&self, kind: &str) -> Vec<Value> {
        self.events().into_iter().filter(|e| e["type"] == kind).collect()
    }
}

/// A `tools/call` sent as ChatGPT's connector sends it (stateless, no
/// session), with exactly these `x-request-id` headers; `pretty`: the body
/// spaced out as a person would write it.
fn call(addr: &str, request_ids: &[&str], tool: &str, args: Value, pretty: bool) -> Result<Value, (String, String)> {
    let meta = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {}});
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": tool, "arguments": args, "_meta": meta}});
    let body = if pretty { serde_json::to_string_pretty(&body).unwrap() } else { body.to_string() };
    let mut headers = vec![
        ("Accept", "application/json, text/event-stream"),
        ("Content-Type", "application/json"),
        ("MCP-Protocol-Version", "2026-07-28"),
        ("Mcp-Method", "tools/call"),
        ("Mcp-Name", tool),
    ];
    headers.extend(request_ids.iter().map(|id| ("x-request-id", *id)));
    let response = support::request(addr, "POST", "/mcp", &headers, &body);
    let json = response.body.lines().filter_map(|l| l.strip_prefix("data: ")).find(|l| l.starts_with('{'));
    let message: Value = serde_json::from_str(json.unwrap_or(&response.body))
        .unwrap_or_else(|e| panic!("{e}: {} {}", response.status, response.body));
    let result = &message["result"];
    if result["isError"] == true {
        let text = result["content"][0]["text"].as_str().unwrap_or_default();
        let err: Value = serde_json::from_str(text).unwrap_or_default();
        return Err((
            err["code"].as_str().unwrap_or_default().to_owned(),
            err["message"].as_str().unwrap_or(text).to_owned(),
        ));
    }
    Ok(result["structuredContent"].clone())
}

/// The tag a command's prompt opens with, without its wording's version:
/// `[orchestrator resume v2 attempt 1] …` is `orchestrator resume attempt 1`.
fn tag(command: &Value) -> String {
    let prompt = command["op"]["prompt"].as_str().unwrap_or_default();
    let inside = prompt.strip_prefix('[').and_then(|p| p.split_once(']')).map_or("", |(tag, _)| tag);
    let version = |w: &&str| w.len() > 1 && w.starts_with('v') && w[1..].bytes().all(|b| b.is_ascii_digit());
    inside.split_whitespace().filter(|w| !version(w)).collect::<Vec<_>>().join(" ")
}

/// [`call`] off the async workers: it may wait on the raw executor.
async fn call_as(addr: &str, request_id: &str, tool: &str, args: Value) -> Result<Value, (String, String)> {
    let (addr, request_id, tool) = (addr.to_owned(), request_id.to_owned(), tool.to_owned());
    tokio::task::spawn_blocking(move || call(&addr, &[request_id.as_str()], &tool, args, false)).await.unwrap()
}

/// Connecting: `pair --json` prints one object, `{endpoint, executorId,
/// credential}`, the endpoint built from `pair`'s own `--listen`; a daemon
/// already running accepts the new credential at its next `hello`, with
/// no restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pair_json_prints_the_endpoint_the_executor_and_its_credential_and_a_running_daemon_welcomes_it() {
    let state = tempfile::tempdir().unwrap();
    let daemon = Daemon::start(state.path());
    let pair = |extra: &[&str]| -> Value {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_orchestrator"))
            .args(["pair", "--state-dir"])
            .arg(state.path())
            .args(extra)
            .arg("--json")
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        serde_json::from_slice(&out.stdout).expect("one JSON document")
    };
    // Paired after the daemon started, as a second browser would be.
    let printed = pair(&["--executor-id", "late-1", "--listen", &daemon.addr]);
    let keys: BTreeSet<&str> = printed.as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(keys, BTreeSet::from(["credential", "endpoint", "executorId"]), "{printed}");
    assert_eq!(printed["endpoint"], ws_url(&daemon));
    assert_eq!(printed["executorId"], "late-1");
    let credential = printed["credential"].as_str().unwrap();
    let secret = credential.strip_prefix("exc1.late-1.").expect("exc1.<executorId>.<secret>");
    assert!(secret.len() == 64 && secret.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')), "{credential}");
    let raw = Raw::connect(printed["endpoint"].as_str().unwrap(), credential, "late-1").await;
    assert_eq!(raw.welcome["type"], "welcome", "{}", raw.welcome);
    assert_eq!(raw.welcome["protocolVersion"], 2);
    assert!(raw.welcome["heartbeatMs"].is_u64() && raw.welcome["leaseMs"].is_u64(), "{}", raw.welcome);
    // Without --listen the endpoint is the default address, whatever the
    // running daemon listens on.
    let default = pair(&["--executor-id", "late-2"]);
    assert_eq!(default["endpoint"], "ws://127.0.0.1:7777/executor");
}

/// Caller attribution: every call that must be attributed costs one
/// `callerLookup` naming the part of its `x-request-id` before the first
/// `/`, the turn's later calls as much as its first (a call is judged only
/// on a report made after it started, so an unanswered lookup refuses even
/// a later call of an attributed turn); a missing, repeated or malformed
/// header, a reading tool, and the id of an earlier turn once a newer turn
/// attributed calls (refused at once) cost none.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_attributed_call_costs_a_caller_lookup_the_turns_first_and_its_later_ones_alike() {
    let state = tempfile::tempdir().unwrap();
    let daemon = Daemon::start_with(state.path(), &["--attribution-wait-ms", "1500"], &[]);
    let mut raw = Raw::connect(&ws_url(&daemon), &credential(state.path(), "raw"), "raw").await;
    let root = Root::new(&daemon, json!({"title": "attributed"}));
    let (_, attach) = root.spawn("w");
    let create = raw.command().await;
    raw.serve_create(&create, "0a0a0a0a-1111-4111-8111-111111111111");
    raw.answer_lookups(true);
    let (turn1, turn2) = ("wfr_0197doc0000000000000001", "wfr_0197doc0000000000000002");
    let addr = daemon.addr.as_str();
    let attributed = || root.events_of("caller.attributed").len();

    // The turn's first call: one lookup, for the id before the `/`.
    let me = call_as(addr, &format!("{turn1}/a1"), "worker_attach", json!({"attach_identity": attach})).await;
    let cap = me.unwrap_or_else(|e| panic!("{e:?}"))["capability"].as_str().unwrap().to_owned();
    assert!(raw.lookups_for(turn1) >= 1, "the first call was looked up");
    let first = raw.lookups_for(turn1);
    assert_eq!(raw.lookups(), first, "only that id was asked for");
    assert_eq!(attributed(), 1, "the turn's first call records caller.attributed");
    // A later call of the same turn (another suffix) is looked up again.
    let progress = json!({"capability": cap, "summary": "half", "followup": 0});
    call_as(addr, &format!("{turn1}/a2"), "worker_progress", progress.clone()).await.unwrap();
    assert!(raw.lookups_for(turn1) > first, "the turn's later call cost a lookup too");
    assert_eq!(attributed(), 1, "and recorded nothing new");
    // Unanswered, even a later call of that turn is refused: the earlier
    // reports do not speak for it.
    raw.answer_lookups(false);
    let before = raw.lookups_for(turn1);
    let unseen = call_as(addr, &format!("{turn1}/a3"), "worker_progress", progress.clone()).await.unwrap_err();
    assert_eq!(unseen.0, "UNIDENTIFIED_CALLER", "{unseen:?}");
    assert!(unseen.1.contains("no managed conversation showed this call"), "{unseen:?}");
    assert!(raw.lookups_for(turn1) > before);

    // Costing none: a reading tool, a malformed, repeated or missing header.
    let lookups = raw.lookups();
    call_as(addr, &format!("{turn1}/a4"), "run_get", json!({"capability": cap})).await.unwrap();
    let cap_call = |ids: &[&str]| call(addr, ids, "worker_progress", progress.clone(), false).unwrap_err();
    let long = "w".repeat(101);
    let refused: [&[&str]; 5] = [&["wfr 0197/x"], &["/x"], &[long.as_str()], &[turn1, turn1], &[]];
    for ids in refused {
        let (code, message) = tokio::task::block_in_place(|| cap_call(ids));
        assert_eq!(code, "UNIDENTIFIED_CALLER", "{ids:?}: {message}");
        let why = if ids.is_empty() { "carries no x-request-id" } else { "repeated or malformed" };
        assert!(message.contains(why), "{ids:?}: {message}");
    }
    assert_eq!(raw.lookups(), lookups, "none of these was looked up");

    // The next turn: its first call is attributed; the earlier turn's id is
    // then refused at once, without a lookup.
    raw.answer_lookups(true);
    call_as(addr, &format!("{turn2}/b1"), "worker_progress", progress.clone()).await.unwrap();
    assert_eq!(attributed(), 2);
    let before = raw.lookups_for(turn1);
    let replay = call_as(addr, &format!("{turn1}/a5"), "worker_progress", progress).await.unwrap_err();
    assert_eq!(replay.0, "UNIDENTIFIED_CALLER", "{replay:?}");
    assert!(replay.1.contains("has ended"), "{replay:?}");
    assert_eq!(raw.lookups_for(turn1), before, "an ended turn's id is refused before any lookup");
}

/// `op.prompt` never holds the assignment, whose bound (64 KiB) is measured
/// on the daemon's own compact JSON of it: omitted lists count as `[]`,
/// `scope` as its two empty lists, an omitted text not at all; escapes
/// count (2 bytes for a quote, a backslash, a newline or a tab, 6 for
/// another control character), other characters their UTF-8 bytes; the
/// caller's spacing does not count.
#[test]
fn the_whole_assignment_is_measured_as_the_daemons_compact_json_of_it() {
    const SKELETON: &str = r#"{"objective":"","constraints":[],"acceptance_criteria":[],"dependencies":[],"scope":{"allowed":[],"forbidden":[]},"artifact_refs":[],"completion_protocol":""}"#;
    let state = tempfile::tempdir().unwrap();
    let daemon = Daemon::start(state.path());
    let root = Root::new(&daemon, json!({"title": "bounds"}));
    // 1 + 2 × 20000 + 2 × 100 + (2 + 2 + 2 + 6) bytes once escaped.
    let objective = format!("x{}{}\t\"\\\u{1}", "\n".repeat(20_000), "é".repeat(100));
    let measured_objective = 1 + 2 * 20_000 + 2 * 100 + 12;
    let fill = 64 * 1024 - SKELETON.len() - measured_objective;
    assert!(fill <= 32 * 1024, "every text stays within its own bound");
    let spawn = |name: &str, completion: usize| {
        let assignment = json!({"objective": objective, "completion_protocol": "a".repeat(completion)});
        let args = json!({"capability": root.cap, "name": name, "assignment": assignment});
        call(&daemon.addr, &[], "worker_spawn", args, true)
    };
    spawn("fits", fill).unwrap_or_else(|e| panic!("exactly 65536 bytes is within the bound: {e:?}"));
    let (code, message) = spawn("over", fill + 1).unwrap_err();
    assert_eq!(code, "TOO_LARGE", "{message}");
    assert!(message.contains("assignment") && message.contains("65537") && message.contains("65536"), "{message}");
}

/// Rule 8: the `attempt N` of a resume counts the worker's continuations
/// from 1, its command keyed `resume:<workerId>:<N>`; the bootstrap and a
/// follow-up's wake are not numbered (the seed's attempt 2 is attempt 1).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn continuation_attempts_are_numbered_from_1_without_the_bootstrap_or_follow_ups() {
    let state = tempfile::tempdir().unwrap();
    let daemon = Daemon::start_with(state.path(), &["--continuation-pacing-ms", "1000"], &[]);
    let mut raw = Raw::connect(&ws_url(&daemon), &credential(state.path(), "raw"), "raw").await;
    let root = Root::auto(&daemon);
    let (w, attach) = root.spawn("w");
    let create = raw.command().await;
    assert_eq!(tag(&create), "orchestrator bootstrap", "{create}");
    raw.serve_create(&create, "0b0b0b0b-2222-4222-8222-222222222222");
    root.mcp.ok("worker_attach", json!({"attach_identity": attach}));
    let sent = |command: &Value, expected: &str, key: String| {
        assert_eq!(command["op"]["kind"], "conversation_send", "{command}");
        assert_eq!(tag(command), expected, "{command}");
        assert_eq!(command["idempotencyKey"], key.as_str(), "{command}");
    };

    raw.state(&w, "idle");
    let resume = raw.command().await;
    sent(&resume, "orchestrator resume attempt 1", format!("resume:{w}:1"));
    raw.ack_ok(&resume);
    raw.state(&w, "generating");
    // A follow-up's wake in between: delivered once the turn ends, unnumbered.
    root.mcp.ok("worker_followup", json!({"capability": root.cap, "worker_id": w, "instructions": "and B"}));
    raw.state(&w, "idle");
    let wake = raw.command().await;
    sent(&wake, "orchestrator wake", format!("followup:{w}:1"));
    raw.ack_ok(&wake);
    raw.state(&w, "generating");
    raw.state(&w, "idle");
    let resume = raw.command().await;
    sent(&resume, "orchestrator resume attempt 2", format!("resume:{w}:2"));
    let attempts: Vec<Value> =
        root.events_of("execution.scheduled").iter().map(|e| e["data"]["attempt"].clone()).collect();
    assert_eq!(attempts, [json!(1), json!(2)]);
}

/// `conversationState`: a `state: "error"` without its `error` is not
/// refused; it is recorded as an error page with no code, and nothing
/// follows on it; once the page is reported usable (`idle`) the worker's
/// turn is over and it is resumed as after any turn.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_error_state_without_its_code_is_recorded_and_nothing_follows_until_the_page_is_reported_usable() {
    let state = tempfile::tempdir().unwrap();
    let daemon = Daemon::start_with(state.path(), &["--continuation-pacing-ms", "1000"], &[]);
    let mut raw = Raw::connect(&ws_url(&daemon), &credential(state.path(), "raw"), "raw").await;
    let root = Root::auto(&daemon);
    let (w, attach) = root.spawn("w");
    let create = raw.command().await;
    raw.serve_create(&create, "0c0c0c0c-3333-4333-8333-333333333333");
    root.mcp.ok("worker_attach", json!({"attach_identity": attach}));

    raw.state(&w, "error");
    let deadline = tokio::time::Instant::now() + WAIT;
    let recorded = loop {
        let errors: Vec<Value> = root
            .events_of("conversation.state_changed")
            .into_iter()
            .filter(|e| e["data"]["state"] == "error")
            .collect();
        if let Some(event) = errors.first() {
            break event.clone();
        }
        assert!(tokio::time::Instant::now() < deadline, "the error page was never recorded");
        tokio::time::sleep(Duration::from_millis(25)).await;
    };
    assert!(recorded["data"].get("error").is_none(), "recorded without a code: {recorded}");
    // An idle page would be resumed within the pacing (1 s); this one is not.
    let quiet = raw.no_command_within(Duration::from_millis(2_500)).await;
    assert!(quiet.is_ok(), "something followed an error page with no code: {quiet:?}");
    assert!(root.events_of("execution.scheduled").is_empty());

    raw.state(&w, "idle");
    let resume = raw.command().await;
    assert_eq!(tag(&resume), "orchestrator resume attempt 1", "{resume}");
}

/// Rule 8, `never_started`: a resume answered `ok` whose page is never
/// reported `generating` and is not seen to end (here it stays `loading`)
/// is reported once `--stalled-turn-after-ms` after the result. A
/// bootstrap or a follow-up's wake that went the same way is not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_continuation_whose_turn_is_never_reported_running_is_reported_never_started() {
    let state = tempfile::tempdir().unwrap();
    let args = [
        "--continuation-pacing-ms",
        "1000",
        "--stalled-turn-after-ms",
        "60000",
        // No inspect within the test: the page's `loading` stands.
        "--executor-recheck-after-ms",
        "600000",
    ];
    let daemon = Daemon::start_with(state.path(), &args, &[]);
    let mut raw = Raw::connect(&ws_url(&daemon), &credential(state.path(), "raw"), "raw").await;
    let root = Root::auto(&daemon);

    // A: its resume goes in, and its page only ever says loading.
    let (a, attach) = root.spawn("a");
    let create = raw.command().await;
    raw.serve_create(&create, "0d0d0d0d-4444-4444-8444-444444444444");
    root.mcp.ok("worker_attach", json!({"attach_identity": attach}));
    raw.state(&a, "idle");
    let resume = raw.command().await;
    assert_eq!(tag(&resume), "orchestrator resume attempt 1", "{resume}");
    raw.ack_ok(&resume);
    raw.state(&a, "loading");
    let submitted = tokio::time::Instant::now();

    // B: only its bootstrap went in, and its page then says loading.
    let (b, _) = root.spawn("b");
    let create = raw.command().await;
    raw.serve_create(&create, "0e0e0e0e-5555-4555-8555-555555555555");
    raw.state(&b, "loading");
    // C: a follow-up's wake went in, and its page then says loading.
    let (c, attach) = root.spawn("c");
    let create = raw.command().await;
    raw.serve_create(&create, "0f0f0f0f-6666-4666-8666-666666666666");
    root.mcp.ok("worker_attach", json!({"attach_identity": attach}));
    root.mcp.ok("worker_followup", json!({"capability": root.cap, "worker_id": c, "instructions": "and C"}));
    raw.state(&c, "idle");
    let wake = raw.command().await;
    assert_eq!(wake["idempotencyKey"], format!("followup:{c}:1"), "{wake}");
    raw.ack_ok(&wake);
    raw.state(&c, "loading");

    let deadline = submitted + Duration::from_secs(100);
    let stalled = loop {
        let stalled = root.events_of("continuation.turn_stalled");
        if !stalled.is_empty() {
            break stalled;
        }
        assert!(tokio::time::Instant::now() < deadline, "never reported: {:#?}", root.events());
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    assert_eq!(stalled.len(), 1, "{stalled:#?}");
    assert_eq!(stalled[0]["data"]["worker_id"], a.as_str());
    assert_eq!(stalled[0]["data"]["stall"], "never_started");
    assert!(stalled[0]["data"]["for_ms"].as_u64().unwrap() >= 60_000, "{}", stalled[0]);
    // Nothing was sent into it meanwhile, and nothing else stalled.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(root.events_of("continuation.turn_stalled").len(), 1);
    assert_eq!(raw.no_command_within(Duration::from_millis(100)).await, Ok(()));
}

/// One raw session of protocol `version` declaring `capabilities`, paired
/// with the operator grant when `granted`: its welcome, then what the daemon
/// sends (frames, or the close code).
async fn operator_session(
    daemon: &Daemon,
    state: &std::path::Path,
    (id, granted): (&str, bool),
    version: u32,
    capabilities: Value,
) -> (
    futures_util::stream::SplitSink<
        tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>,
        Message,
    >,
    mpsc::UnboundedReceiver<Result<Value, u16>>,
) {
    let (socket, _) = tokio_tungstenite::connect_async(ws_url(daemon)).await.unwrap();
    let (mut sink, mut stream) = socket.split();
    let token = carrier_webext::Credentials::open_or_create(&state.join("executors")).unwrap().issue_with(id, granted);
    let hello = json!({"type": "hello", "protocolVersion": version, "token": token.unwrap(), "executorId": id,
        "executorInstanceId": format!("{id}-1"), "executorKind": "webext", "capabilities": capabilities,
        "host": {"os": "linux"}});
    sink.send(Message::Text(hello.to_string().into())).await.unwrap();
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Some(Ok(message)) = stream.next().await {
            let sent = match message {
                Message::Text(text) => tx.send(Ok(serde_json::from_str(&text).unwrap())),
                Message::Close(close) => tx.send(Err(close.map_or(0, |c| u16::from(c.code)))),
                _ => continue,
            };
            if sent.is_err() {
                return;
            }
        }
    });
    (sink, rx)
}

/// The next frame of `kind` (others skipped), or the close code.
async fn next_of(rx: &mut mpsc::UnboundedReceiver<Result<Value, u16>>, kind: &str) -> Result<Value, u16> {
    loop {
        let frame = tokio::time::timeout(WAIT, rx.recv()).await.expect("a frame in time").expect("a live session")?;
        if frame["type"] == kind {
            return Ok(frame);
        }
    }
}

/// The operator channel, as the doc says: a v3 session declaring
/// `"operator"`, paired with `--operator`, hears `operatorView` after
/// `welcome` and whenever the pool changes, in Execution Continuity's
/// terms; its `operatorAct` is applied as root and answered by
/// `operatorActed` (0 changed when already so, the refusal's code for a
/// slip); an `actId` outside its form closes it (4003). Without the
/// capability, or without the pairing's grant, no view comes and an act is
/// refused (4003); in a v2 session `operatorAct` is a frame of a newer
/// version (4003).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_executor_hears_the_pool_and_its_acts_are_made_as_root() {
    let state = tempfile::tempdir().unwrap();
    let daemon = Daemon::start(state.path());
    let root = Root::new(&daemon, json!({"title": "ops", "attribution": "capability_only"}));
    let (worker, _) = root.spawn("w");

    let (mut sink, mut rx) = operator_session(&daemon, state.path(), ("ops-1", true), 3, json!(["operator"])).await;
    assert_eq!(next_of(&mut rx, "welcome").await.unwrap()["protocolVersion"], 3);
    let view = next_of(&mut rx, "operatorView").await.unwrap();
    let run = &view["runs"][0];
    assert_eq!(run["title"], "ops", "{view}");
    let listed = run["workers"].as_array().unwrap().iter().find(|w| w["workerId"] == worker.as_str()).unwrap().clone();
    assert_eq!((listed["path"].as_str(), listed["held"].as_bool()), (Some("/root/w"), Some(false)), "{listed}");
    assert!(listed["status"].is_string() && listed["why"].is_string() && listed["sinceMs"].is_u64(), "{listed}");

    let act = |id: &str, extra: Value| {
        let mut act = json!({"type": "operatorAct", "actId": id});
        act.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        Message::Text(act.to_string().into())
    };
    sink.send(act("a1", json!({"action": "pause", "workerId": worker}))).await.unwrap();
    let acted = next_of(&mut rx, "operatorActed").await.unwrap();
    assert_eq!(acted, json!({"type": "operatorActed", "actId": "a1", "changed": 1}));
    // The next view shows it held (its control is now Resume).
    loop {
        let view = next_of(&mut rx, "operatorView").await.unwrap();
        let w =
            view["runs"][0]["workers"].as_array().unwrap().iter().find(|w| w["workerId"] == worker.as_str()).cloned();
        if w.is_some_and(|w| w["held"] == true) {
            break;
        }
    }
    assert_eq!(root.events_of("worker.hold_changed").len(), 1);
    sink.send(act("a2", json!({"action": "pause", "workerId": worker}))).await.unwrap();
    assert_eq!(next_of(&mut rx, "operatorActed").await.unwrap()["changed"], 0, "already paused");
    let run_id = run["runId"].as_str().unwrap();
    // A person's slip is answered, never a closed session.
    sink.send(act("a3", json!({"action": "continue", "runId": run_id}))).await.unwrap();
    let slip = next_of(&mut rx, "operatorActed").await.unwrap();
    assert_eq!((slip["actId"].as_str(), slip["error"].as_str()), (Some("a3"), Some("INVALID_ARGUMENT")), "{slip}");
    let long = "x".repeat(16 * 1024 + 1);
    sink.send(act("a4", json!({"action": "answer", "workerId": worker, "text": long}))).await.unwrap();
    assert_eq!(next_of(&mut rx, "operatorActed").await.unwrap()["error"], "TOO_LARGE");
    sink.send(act("a5", json!({"action": "answer", "workerId": worker, "text": "main"}))).await.unwrap();
    assert_eq!(next_of(&mut rx, "operatorActed").await.unwrap()["error"], "INVALID_TRANSITION", "it asks nothing");
    sink.send(act("not an id", json!({"action": "resume", "workerId": worker}))).await.unwrap();
    assert_eq!(next_of(&mut rx, "operatorActed").await, Err(4003), "an actId outside its form");

    // Without the capability, or claiming it without the pairing's grant: no view, no act.
    for (id, granted, capabilities) in [("ops-2", true, json!([])), ("ops-4", false, json!(["operator"]))] {
        let (mut plain, mut rx) = operator_session(&daemon, state.path(), (id, granted), 3, capabilities).await;
        next_of(&mut rx, "welcome").await.unwrap();
        let quiet = tokio::time::timeout(Duration::from_secs(1), next_of(&mut rx, "operatorView")).await;
        assert!(quiet.is_err(), "a view to {id}");
        plain.send(act("b1", json!({"action": "resume", "workerId": worker}))).await.unwrap();
        assert_eq!(next_of(&mut rx, "operatorActed").await, Err(4003), "{id}");
    }

    let (mut old, mut rx) = operator_session(&daemon, state.path(), ("ops-3", true), 2, json!(["operator"])).await;
    assert_eq!(next_of(&mut rx, "welcome").await.unwrap()["protocolVersion"], 2);
    old.send(act("c1", json!({"action": "resume", "workerId": worker}))).await.unwrap();
    assert_eq!(next_of(&mut rx, "operatorView").await, Err(4003), "operatorAct in a v2 session");
    assert_eq!(root.events_of("worker.hold_changed").len(), 1, "no refused act changed anything");
}
