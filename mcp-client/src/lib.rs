//! A minimal MCP client over streamable HTTP (legacy session mode): what
//! `orchestrator doctor` uses to read the daemon's catalog, and fakechat's
//! scripted agent to call the orchestrator exactly as a ChatGPT
//! conversation's host would. Plain HTTP on loopback only; no TLS, no
//! dependency beyond tokio's sockets, so the product binary stays small.

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const VERSION: &str = "2025-11-25";

/// A tool error: its stable code and message.
#[derive(Debug, Clone)]
pub struct ToolError {
    /// For example `FORBIDDEN`.
    pub code: String,
    /// Human-readable.
    pub message: String,
}

impl std::error::Error for ToolError {}

impl std::fmt::Display for ToolError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

/// Why a call did not get an answer (a tool's own refusal is a [`ToolError`]).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The endpoint is not an `http://host:port/path` URL.
    #[error("only http:// MCP URLs (on loopback) are supported: {0}")]
    Url(String),
    /// The connection failed.
    #[error("MCP connection: {0}")]
    Io(#[from] std::io::Error),
    /// The reply was not the MCP the client expects.
    #[error("MCP reply: {0}")]
    Protocol(String),
}

/// One MCP session.
pub struct Client {
    authority: String,
    path: String,
    session: String,
    next_id: u64,
    /// The server's `serverInfo` from `initialize`.
    server_info: Value,
}

struct Reply {
    head: String,
    body: String,
}

impl Reply {
    fn header(&self, name: &str) -> Option<String> {
        self.head.lines().find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.trim().eq_ignore_ascii_case(name).then(|| v.trim().to_owned())
        })
    }
}

fn dechunk(mut rest: &str) -> String {
    let mut out = String::new();
    while let Some((size, tail)) = rest.split_once("\r\n") {
        let Ok(size) = usize::from_str_radix(size.trim(), 16) else { break };
        if size == 0 || tail.len() < size {
            break;
        }
        out.push_str(&tail[..size]);
        rest = tail[size..].trim_start_matches("\r\n");
    }
    out
}

async fn post(authority: &str, path: &str, session: Option<&str>, body: &str) -> Result<Reply, Error> {
    let mut headers = vec![
        ("Content-Type", "application/json"),
        ("Accept", "application/json, text/event-stream"),
        ("MCP-Protocol-Version", VERSION),
    ];
    if let Some(s) = session {
        headers.push(("Mcp-Session-Id", s));
    }
    request("POST", authority, path, &headers, body).await
}

/// One HTTP/1.1 request on a fresh connection, the reply read to its end.
async fn request(
    method: &str,
    authority: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> Result<Reply, Error> {
    let mut stream = TcpStream::connect(authority).await?;
    stream.set_nodelay(true)?;
    let mut req = format!("{method} {path} HTTP/1.1\r\nHost: {authority}\r\nConnection: close\r\n");
    for (name, value) in headers {
        req.push_str(&format!("{name}: {value}\r\n"));
    }
    req.push_str(&format!("Content-Length: {}\r\n\r\n{body}", body.len()));
    stream.write_all(req.as_bytes()).await?;
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).await?;
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let mut reply = Reply { head: head.to_owned(), body: body.to_owned() };
    if reply.header("transfer-encoding").is_some_and(|v| v.eq_ignore_ascii_case("chunked")) {
        reply.body = dechunk(&reply.body);
    }
    Ok(reply)
}

/// `GET path` on `authority` (loopback `host:port`) with `headers`: the body
/// of a 200 reply; any other status is an [`Error::Protocol`] naming it.
pub async fn get(authority: &str, path: &str, headers: &[(&str, &str)]) -> Result<String, Error> {
    let reply = request("GET", authority, path, headers, "").await?;
    let status = reply.head.split_whitespace().nth(1).unwrap_or("?").to_owned();
    if status != "200" {
        return Err(Error::Protocol(format!("HTTP {status}: {}", reply.body.trim())));
    }
    Ok(reply.body)
}

fn message(body: &str) -> Result<Value, Error> {
    let json = body.lines().filter_map(|l| l.strip_prefix("data: ")).find(|l| l.starts_with('{')).unwrap_or(body);
    serde_json::from_str(json).map_err(|e| Error::Protocol(format!("{e}: {json}")))
}

impl Client {
    /// Connects to an `http://host:port/path` MCP endpoint.
    pub async fn connect(url: &str) -> Result<Client, Error> {
        let rest = url.strip_prefix("http://").ok_or_else(|| Error::Url(url.to_owned()))?;
        let (authority, path) =
            rest.split_once('/').map(|(a, p)| (a.to_owned(), format!("/{p}"))).unwrap_or((rest.to_owned(), "/".into()));
        let init = json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{
            "protocolVersion": VERSION, "capabilities": {}, "clientInfo": {"name": "mcp-client", "version": env!("CARGO_PKG_VERSION")}}});
        let reply = post(&authority, &path, None, &init.to_string()).await?;
        let session = reply
            .header("mcp-session-id")
            .ok_or_else(|| Error::Protocol(format!("no MCP session id in {}", reply.head)))?;
        let server_info = message(&reply.body)?["result"]["serverInfo"].clone();
        post(&authority, &path, Some(&session), r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#).await?;
        Ok(Client { authority, path, session, next_id: 1, server_info })
    }

    /// The server's `serverInfo` (name, version).
    pub fn server_info(&self) -> &Value {
        &self.server_info
    }

    /// `tools/list`: the catalog as a host fetches it.
    pub async fn list_tools(&mut self) -> Result<Vec<Value>, Error> {
        self.next_id += 1;
        let body = json!({"jsonrpc":"2.0","id":self.next_id,"method":"tools/list","params":{}});
        let reply = post(&self.authority, &self.path, Some(&self.session), &body.to_string()).await?;
        let msg = message(&reply.body)?;
        msg["result"]["tools"]
            .as_array()
            .cloned()
            .ok_or_else(|| Error::Protocol(format!("tools/list: no tools in {msg}")))
    }

    /// Calls a tool; its structured content, or the typed tool error.
    pub async fn call(&mut self, tool: &str, args: Value) -> Result<Result<Value, ToolError>, Error> {
        self.next_id += 1;
        let body =
            json!({"jsonrpc":"2.0","id":self.next_id,"method":"tools/call","params":{"name":tool,"arguments":args}});
        let reply = post(&self.authority, &self.path, Some(&self.session), &body.to_string()).await?;
        let msg = message(&reply.body)?;
        if let Some(err) = msg.get("error") {
            return Err(Error::Protocol(format!("{tool}: JSON-RPC error {err}")));
        }
        let result = &msg["result"];
        if result["isError"] == true {
            let text = result["content"][0]["text"].as_str().unwrap_or_default();
            let err: Value = serde_json::from_str(text).unwrap_or_default();
            return Ok(Err(ToolError {
                code: err["code"].as_str().unwrap_or("UNKNOWN").to_owned(),
                message: err["message"].as_str().unwrap_or(text).to_owned(),
            }));
        }
        Ok(Ok(result["structuredContent"].clone()))
    }
}
