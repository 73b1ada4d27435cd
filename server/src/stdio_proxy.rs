//! `orchestrator mcp-stdio` beside a running daemon: a relay, not a second
//! server. Each JSON-RPC message a stdio client writes (one per line) is
//! POSTed to the daemon's own MCP endpoint and every message of the reply
//! is written back as a line as it arrives. So a stdio client gets the same
//! tools, the same executors and the same store as an HTTP client, and the
//! daemon sees it as one streamable-HTTP client with its own session.
//!
//! What it must not do: decide anything. It holds no state but the
//! session id and protocol version the daemon handed out, and answers a
//! request itself only when the daemon could not (a JSON-RPC error naming
//! why), so a client never waits on a reply that will not come.

use std::sync::{Arc, Mutex};

use mcp_client::{Endpoint, post_each};
use serde_json::{Value, json};
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc;

/// The longest line (one JSON-RPC message) taken from the client.
const LINE_MAX: usize = 8 << 20;

/// The running daemon a relay forwards to.
#[derive(Debug, Clone)]
pub struct Upstream {
    endpoint: Endpoint,
    /// The MCP secret, sent as a bearer when the daemon has one.
    bearer: Option<String>,
}

impl Upstream {
    /// The daemon at `mcp_url` (loopback `http://`), with its MCP secret if any.
    pub fn new(mcp_url: &str, secret: Option<String>) -> anyhow::Result<Upstream> {
        Ok(Upstream { endpoint: Endpoint::parse(mcp_url)?, bearer: secret.map(|s| format!("Bearer {s}")) })
    }
}

/// What the daemon handed out at `initialize`.
#[derive(Default)]
struct Session {
    id: Option<String>,
    protocol: Option<String>,
}

/// Relays `input` to `upstream` until `input` ends, then waits for the
/// replies still open and ends the daemon session.
pub async fn relay<R, W>(upstream: Upstream, mut input: R, output: W) -> anyhow::Result<()>
where
    R: AsyncBufRead + Unpin,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (out, lines) = mpsc::unbounded_channel::<Value>();
    let writer = tokio::spawn(write_lines(lines, output));
    let upstream = Arc::new(upstream);
    let session = Arc::new(Mutex::new(Session::default()));
    let mut open = tokio::task::JoinSet::new();
    let mut line = Vec::new();
    loop {
        line.clear();
        let n = (&mut input).take(LINE_MAX as u64 + 1).read_until(b'\n', &mut line).await?;
        if n == 0 {
            break;
        }
        if line.len() > LINE_MAX {
            let _ = out.send(rpc_error(Value::Null, -32600, "a message over 8 MiB"));
            // Skip the rest of the oversized line.
            while !line.ends_with(b"\n") {
                line.clear();
                if (&mut input).take(LINE_MAX as u64).read_until(b'\n', &mut line).await? == 0 {
                    break;
                }
            }
            continue;
        }
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let message: Value = match serde_json::from_slice(&line) {
            Ok(m) => m,
            Err(e) => {
                let _ = out.send(rpc_error(Value::Null, -32700, &format!("not JSON: {e}")));
                continue;
            }
        };
        let (upstream, session, out) = (upstream.clone(), session.clone(), out.clone());
        if message["method"] == "initialize" {
            // In order: everything after it needs the session it opens.
            forward(&upstream, &session, message, &out).await;
        } else {
            open.spawn(async move { forward(&upstream, &session, message, &out).await });
        }
    }
    while open.join_next().await.is_some() {}
    let id = session.lock().expect("session lock").id.clone();
    if let Some(id) = id {
        let mut headers = vec![("Mcp-Session-Id", id.as_str())];
        if let Some(b) = &upstream.bearer {
            headers.push(("Authorization", b));
        }
        let _ = mcp_client::delete(&upstream.endpoint, &headers).await;
    }
    drop(out);
    writer.await??;
    Ok(())
}

async fn write_lines<W: AsyncWrite + Unpin>(
    mut lines: mpsc::UnboundedReceiver<Value>,
    mut output: W,
) -> anyhow::Result<()> {
    while let Some(message) = lines.recv().await {
        let mut text = serde_json::to_vec(&message)?;
        text.push(b'\n');
        output.write_all(&text).await?;
        output.flush().await?;
    }
    Ok(())
}

/// POSTs one message and relays its reply; answers a request with an error
/// when the daemon gave none.
async fn forward(upstream: &Upstream, session: &Mutex<Session>, message: Value, out: &mpsc::UnboundedSender<Value>) {
    let (id, protocol) = {
        let s = session.lock().expect("session lock");
        (s.id.clone(), s.protocol.clone())
    };
    let mut headers: Vec<(&str, String)> =
        vec![("Content-Type", "application/json".into()), ("Accept", "application/json, text/event-stream".into())];
    if let Some(id) = id {
        headers.push(("Mcp-Session-Id", id));
    }
    // A stateless (2026-07-28) request names its version and method in
    // headers too; a session's requests carry the negotiated version.
    let params = &message["params"];
    let stated = params["_meta"]["io.modelcontextprotocol/protocolVersion"].as_str().map(str::to_owned);
    if let Some(version) = stated.or(protocol) {
        headers.push(("MCP-Protocol-Version", version));
    }
    if stated_stateless(&message) {
        if let Some(method) = message["method"].as_str() {
            headers.push(("Mcp-Method", method.to_owned()));
        }
        if let Some(name) = params["name"].as_str().or(params["uri"].as_str()) {
            headers.push(("Mcp-Name", name.to_owned()));
        }
    }
    if let Some(bearer) = &upstream.bearer {
        headers.push(("Authorization", bearer.clone()));
    }
    let headers: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let request_id = message.get("method").and(message.get("id")).cloned();
    let initialize = message["method"] == "initialize";
    let mut answered = false;
    let relayed = post_each(&upstream.endpoint, &headers, &message.to_string(), |reply| {
        if initialize && let Some(version) = reply["result"]["protocolVersion"].as_str() {
            session.lock().expect("session lock").protocol = Some(version.to_owned());
        }
        answered |= request_id.as_ref().is_some_and(|id| reply.get("id") == Some(id) && reply.get("method").is_none());
        let _ = out.send(reply);
    })
    .await;
    let failure = match relayed {
        Ok(r) if (200..300).contains(&r.status) => {
            if initialize && let Some(id) = r.session {
                session.lock().expect("session lock").id = Some(id);
            }
            None
        }
        Ok(r) => Some(format!("the daemon refused the message: HTTP {}: {}", r.status, r.refusal)),
        Err(e) => Some(format!("the daemon at {} did not answer: {e}", upstream.endpoint.authority)),
    };
    match request_id {
        Some(id) if !answered => {
            let why = failure.unwrap_or_else(|| "the daemon ended its reply without an answer".into());
            let _ = out.send(rpc_error(id, -32603, &why));
        }
        None if failure.is_some() => tracing::warn!("mcp-stdio: {}", failure.unwrap_or_default()),
        _ => {}
    }
}

fn stated_stateless(message: &Value) -> bool {
    message["params"]["_meta"].get("io.modelcontextprotocol/protocolVersion").is_some()
}

fn rpc_error(id: Value, code: i64, message: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
}
