//! A minimal MCP client over streamable HTTP (a legacy session, or the
//! stateless 2026-07-28 revision, as ChatGPT's connector calls): what
//! `orchestrator doctor` uses to read the daemon's catalog, and fakechat's
//! scripted agent to call the orchestrator exactly as a ChatGPT
//! conversation's host would; and [`post_each`], the one-message relay
//! `orchestrator mcp-stdio` forwards a stdio client's messages with. Plain
//! HTTP on loopback only; no TLS, no dependency beyond tokio's sockets, so
//! the product binary stays small.

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

/// The MCP revision of the session handshake (`initialize`).
pub const VERSION: &str = "2025-11-25";
/// The stateless revision: no `initialize`, no session.
const STATELESS: &str = "2026-07-28";

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

/// One MCP session, or stateless calls.
pub struct Client {
    authority: String,
    path: String,
    /// The session id; `None`: every request is a stateless one.
    session: Option<String>,
    next_id: u64,
    /// The server's `serverInfo` from `initialize`.
    server_info: Value,
    /// `Bearer <secret>`, sent with every request, when the server wants one.
    authorization: Option<String>,
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

async fn post_with(
    authority: &str,
    path: &str,
    session: Option<&str>,
    body: &str,
    extra: &[(&str, &str)],
) -> Result<Reply, Error> {
    let mut headers = vec![("Content-Type", "application/json"), ("Accept", "application/json, text/event-stream")];
    // A stateless request names its revision in `extra`; every other one is
    // the legacy handshake or a request in its session.
    if !extra.iter().any(|(name, _)| name.eq_ignore_ascii_case("MCP-Protocol-Version")) {
        headers.push(("MCP-Protocol-Version", VERSION));
    }
    if let Some(s) = session {
        headers.push(("Mcp-Session-Id", s));
    }
    headers.extend_from_slice(extra);
    request("POST", authority, path, &headers, body).await
}

/// Writes one HTTP/1.1 request on a fresh connection (closed after the reply).
async fn send(
    method: &str,
    authority: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> Result<TcpStream, Error> {
    let mut stream = TcpStream::connect(authority).await?;
    stream.set_nodelay(true)?;
    // A `Host` among `headers` names the site asked for (as a tunnel
    // forwards it); the connection still goes to `authority`.
    let is_host = |name: &str| name.eq_ignore_ascii_case("host");
    let host = headers.iter().find(|(name, _)| is_host(name)).map_or(authority, |(_, value)| *value);
    let mut req = format!("{method} {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n");
    for (name, value) in headers.iter().filter(|(name, _)| !is_host(name)) {
        req.push_str(&format!("{name}: {value}\r\n"));
    }
    req.push_str(&format!("Content-Length: {}\r\n\r\n{body}", body.len()));
    stream.write_all(req.as_bytes()).await?;
    Ok(stream)
}

/// One HTTP/1.1 request on a fresh connection, the reply read to its end.
async fn request(
    method: &str,
    authority: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> Result<Reply, Error> {
    let mut stream = send(method, authority, path, headers, body).await?;
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

/// `DELETE endpoint` with `headers` (an MCP session's end): the status.
pub async fn delete(endpoint: &Endpoint, headers: &[(&str, &str)]) -> Result<u16, Error> {
    let reply = request("DELETE", &endpoint.authority, &endpoint.path, headers, "").await?;
    Ok(reply.head.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0))
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

/// `POST path` on `authority` (loopback `host:port`) with a bearer token and
/// no body: the body of a 200 reply (any other status is an error naming it).
pub async fn post_with_bearer(authority: &str, path: &str, token: &str) -> Result<String, Error> {
    let bearer = format!("Bearer {token}");
    let reply = request("POST", authority, path, &[("Authorization", bearer.as_str())], "").await?;
    let status = reply.head.split_whitespace().nth(1).unwrap_or("?").to_owned();
    if status != "200" {
        return Err(Error::Protocol(format!("HTTP {status}: {}", reply.body.trim())));
    }
    Ok(reply.body)
}

/// `POST path` on `authority` (loopback `host:port`) with a JSON body: the
/// status and the reply's body (the canary's fault hook).
pub async fn post_json(authority: &str, path: &str, body: &Value) -> Result<(u16, String), Error> {
    let headers = [("Content-Type", "application/json")];
    let reply = request("POST", authority, path, &headers, &body.to_string()).await?;
    let status = reply.head.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    Ok((status, reply.body))
}

fn message(body: &str) -> Result<Value, Error> {
    let json = body.lines().filter_map(|l| l.strip_prefix("data: ")).find(|l| l.starts_with('{')).unwrap_or(body);
    serde_json::from_str(json).map_err(|e| Error::Protocol(format!("{e}: {json}")))
}

/// An `http://host:port/path` MCP endpoint, split for requests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    /// `host:port`.
    pub authority: String,
    /// The request path, starting with `/`.
    pub path: String,
}

impl Endpoint {
    /// Splits `url`; anything but `http://` is an [`Error::Url`].
    pub fn parse(url: &str) -> Result<Endpoint, Error> {
        let rest = url.strip_prefix("http://").ok_or_else(|| Error::Url(url.to_owned()))?;
        let (authority, path) =
            rest.split_once('/').map(|(a, p)| (a.to_owned(), format!("/{p}"))).unwrap_or((rest.to_owned(), "/".into()));
        if authority.is_empty() {
            return Err(Error::Url(url.to_owned()));
        }
        Ok(Endpoint { authority, path })
    }
}

/// The longest response head, and the longest single message, a relay
/// takes: a reply past either is a protocol error, not unbounded memory.
const HEAD_MAX: usize = 64 << 10;
const MESSAGE_MAX: usize = 16 << 20;

/// How [`post_each`]'s reply ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Relayed {
    /// The HTTP status.
    pub status: u16,
    /// The `Mcp-Session-Id` the reply carried (an `initialize` answer's).
    pub session: Option<String>,
    /// The body of a non-2xx reply (cut to 1 KiB), for the caller's error.
    pub refusal: String,
}

/// POSTs one JSON-RPC message (`body`) to `endpoint` with `headers`, and
/// hands every JSON-RPC message of the reply to `each` *as it arrives*
/// (a JSON body, or each `data:` event of an SSE stream), so a long poll's
/// notifications are not held back until its end. A 202 has none.
pub async fn post_each(
    endpoint: &Endpoint,
    headers: &[(&str, &str)],
    body: &str,
    mut each: impl FnMut(Value),
) -> Result<Relayed, Error> {
    let stream = send("POST", &endpoint.authority, &endpoint.path, headers, body).await?;
    let mut reader = BufReader::new(stream);
    let mut head = String::new();
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).await? == 0 || line == "\r\n" || line == "\n" {
            break;
        }
        head.push_str(&line);
        if head.len() > HEAD_MAX {
            return Err(Error::Protocol("a reply head over 64 KiB".into()));
        }
    }
    let reply = Reply { head, body: String::new() };
    let status = reply.head.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    let session = reply.header("mcp-session-id");
    let sse = reply.header("content-type").is_some_and(|t| t.starts_with("text/event-stream"));
    let mut body = Body::new(&reply);
    if !(200..300).contains(&status) {
        let mut text = Vec::new();
        while let Some(piece) = body.next(&mut reader).await? {
            text.extend_from_slice(&piece);
            if text.len() > 1024 {
                break;
            }
        }
        let refusal = String::from_utf8_lossy(&text[..text.len().min(1024)]).trim().to_owned();
        return Ok(Relayed { status, session, refusal });
    }
    let mut events = Sse::default();
    let mut whole = Vec::new();
    while let Some(piece) = body.next(&mut reader).await? {
        if sse {
            events.feed(&piece, &mut each)?;
        } else {
            whole.extend_from_slice(&piece);
            if whole.len() > MESSAGE_MAX {
                return Err(Error::Protocol("a reply over 16 MiB".into()));
            }
        }
    }
    if sse {
        events.feed(b"\n\n", &mut each)?;
    } else if !whole.iter().all(u8::is_ascii_whitespace) {
        match serde_json::from_slice(&whole).map_err(|e| Error::Protocol(format!("a JSON reply: {e}")))? {
            Value::Array(batch) => batch.into_iter().for_each(&mut each),
            message => each(message),
        }
    }
    Ok(Relayed { status, session, refusal: String::new() })
}

/// A reply body read piece by piece, by its framing.
enum Body {
    Chunked,
    Length(usize),
    UntilClose,
}

impl Body {
    fn new(reply: &Reply) -> Body {
        if reply.header("transfer-encoding").is_some_and(|v| v.eq_ignore_ascii_case("chunked")) {
            Body::Chunked
        } else if let Some(n) = reply.header("content-length").and_then(|n| n.parse().ok()) {
            Body::Length(n)
        } else {
            Body::UntilClose
        }
    }

    /// The next piece of the body, or `None` at its end.
    async fn next(&mut self, reader: &mut BufReader<TcpStream>) -> Result<Option<Vec<u8>>, Error> {
        match self {
            Body::Chunked => {
                let mut size = String::new();
                reader.read_line(&mut size).await?;
                let size = usize::from_str_radix(size.trim().split(';').next().unwrap_or(""), 16)
                    .map_err(|_| Error::Protocol(format!("a chunk size {size:?}")))?;
                if size == 0 {
                    return Ok(None);
                }
                if size > MESSAGE_MAX {
                    return Err(Error::Protocol("a chunk over 16 MiB".into()));
                }
                let mut piece = vec![0; size + 2];
                reader.read_exact(&mut piece).await?;
                piece.truncate(size);
                Ok(Some(piece))
            }
            Body::Length(0) => Ok(None),
            Body::Length(left) => {
                let mut piece = vec![0; (*left).min(64 << 10)];
                let n = reader.read(&mut piece).await?;
                if n == 0 {
                    return Err(Error::Protocol("the reply ended before its length".into()));
                }
                *left -= n;
                piece.truncate(n);
                Ok(Some(piece))
            }
            Body::UntilClose => {
                let mut piece = vec![0; 64 << 10];
                let n = reader.read(&mut piece).await?;
                piece.truncate(n);
                Ok((n > 0).then_some(piece))
            }
        }
    }
}

/// Server-sent events, cut into the JSON messages of their `data:` lines.
#[derive(Default)]
struct Sse {
    line: Vec<u8>,
    data: String,
}

impl Sse {
    fn feed(&mut self, bytes: &[u8], each: &mut impl FnMut(Value)) -> Result<(), Error> {
        for &b in bytes {
            if b != b'\n' {
                self.line.push(b);
                if self.line.len() > MESSAGE_MAX {
                    return Err(Error::Protocol("an event over 16 MiB".into()));
                }
                continue;
            }
            let line = String::from_utf8_lossy(self.line.strip_suffix(b"\r").unwrap_or(&self.line)).into_owned();
            self.line.clear();
            if line.is_empty() {
                // An event ends; one without data (a priming event) is none.
                if !self.data.trim().is_empty() {
                    let message = serde_json::from_str(&self.data)
                        .map_err(|e| Error::Protocol(format!("an event's data: {e}")))?;
                    each(message);
                }
                self.data.clear();
            } else if let Some(data) = line.strip_prefix("data:") {
                if !self.data.is_empty() {
                    self.data.push('\n');
                }
                self.data.push_str(data.strip_prefix(' ').unwrap_or(data));
            }
        }
        Ok(())
    }
}

impl Client {
    /// Connects to an `http://host:port/path` MCP endpoint.
    pub async fn connect(url: &str) -> Result<Client, Error> {
        Client::connect_bearing(url, None).await
    }

    /// [`Client::connect`], sending `Authorization: Bearer <secret>` with
    /// every request when a secret is given (a daemon with an MCP secret
    /// wants it even on loopback).
    pub async fn connect_bearing(url: &str, secret: Option<&str>) -> Result<Client, Error> {
        let Endpoint { authority, path } = Endpoint::parse(url)?;
        let authorization = secret.map(|s| format!("Bearer {s}"));
        let auth: Vec<(&str, &str)> = authorization.iter().map(|a| ("Authorization", a.as_str())).collect();
        let init = json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{
            "protocolVersion": VERSION, "capabilities": {}, "clientInfo": {"name": "mcp-client", "version": env!("CARGO_PKG_VERSION")}}});
        let reply = post_with(&authority, &path, None, &init.to_string(), &auth).await?;
        let session = reply
            .header("mcp-session-id")
            .ok_or_else(|| Error::Protocol(format!("no MCP session id in {}", reply.head)))?;
        let server_info = message(&reply.body)?["result"]["serverInfo"].clone();
        let initialized = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
        post_with(&authority, &path, Some(&session), initialized, &auth).await?;
        Ok(Client { authority, path, session: Some(session), next_id: 1, server_info, authorization })
    }

    /// Stateless calls to an `http://host:port/path` MCP endpoint (the
    /// 2026-07-28 revision: no handshake, no session), as ChatGPT's
    /// connector makes them. `server_info` stays empty.
    pub fn stateless(url: &str) -> Result<Client, Error> {
        let Endpoint { authority, path } = Endpoint::parse(url)?;
        Ok(Client { authority, path, session: None, next_id: 1, server_info: Value::Null, authorization: None })
    }

    /// One request: in the session, or stateless with the revision's
    /// `_meta` and its method/name headers.
    async fn send(
        &mut self,
        method: &str,
        name: Option<&str>,
        mut params: Value,
        extra: &[(&str, &str)],
    ) -> Result<Reply, Error> {
        self.next_id += 1;
        let mut headers: Vec<(&str, &str)> = extra.to_vec();
        if let Some(authorization) = &self.authorization {
            headers.push(("Authorization", authorization));
        }
        if self.session.is_none() {
            params["_meta"] = json!({
                "io.modelcontextprotocol/protocolVersion": STATELESS,
                "io.modelcontextprotocol/clientCapabilities": {}
            });
            headers.extend([("MCP-Protocol-Version", STATELESS), ("Mcp-Method", method)]);
            if let Some(name) = name {
                headers.push(("Mcp-Name", name));
            }
        }
        let body = json!({"jsonrpc":"2.0","id":self.next_id,"method":method,"params":params});
        post_with(&self.authority, &self.path, self.session.as_deref(), &body.to_string(), &headers).await
    }

    /// The server's `serverInfo` (name, version).
    pub fn server_info(&self) -> &Value {
        &self.server_info
    }

    /// `tools/list`: the catalog as a host fetches it.
    pub async fn list_tools(&mut self) -> Result<Vec<Value>, Error> {
        let reply = self.send("tools/list", None, json!({}), &[]).await?;
        let msg = message(&reply.body)?;
        msg["result"]["tools"]
            .as_array()
            .cloned()
            .ok_or_else(|| Error::Protocol(format!("tools/list: no tools in {msg}")))
    }

    /// Calls a tool; its structured content, or the typed tool error.
    pub async fn call(&mut self, tool: &str, args: Value) -> Result<Result<Value, ToolError>, Error> {
        self.call_with(tool, args, &[]).await
    }

    /// Calls a tool with extra HTTP headers (ChatGPT's `x-request-id`).
    pub async fn call_with(
        &mut self,
        tool: &str,
        args: Value,
        headers: &[(&str, &str)],
    ) -> Result<Result<Value, ToolError>, Error> {
        let reply = self.send("tools/call", Some(tool), json!({"name":tool,"arguments":args}), headers).await?;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_are_cut_into_messages_across_any_split_and_priming_events_are_none() {
        let stream =
            b"id: 0\nretry: 3000\ndata:\n\ndata: {\"id\":1}\r\n\r\nevent: message\ndata: {\"id\":\ndata: 2}\n\n";
        for split in 1..stream.len() {
            let mut got = Vec::new();
            let mut sse = Sse::default();
            sse.feed(&stream[..split], &mut |m| got.push(m)).unwrap();
            sse.feed(&stream[split..], &mut |m| got.push(m)).unwrap();
            assert_eq!(got, [json!({"id": 1}), json!({"id": 2})], "split at {split}");
        }
    }

    #[test]
    fn only_loopback_style_http_urls_are_endpoints() {
        let e = Endpoint::parse("http://127.0.0.1:7777/s/abc/mcp").unwrap();
        assert_eq!((e.authority.as_str(), e.path.as_str()), ("127.0.0.1:7777", "/s/abc/mcp"));
        assert!(Endpoint::parse("https://x/mcp").is_err());
        assert!(Endpoint::parse("http:///mcp").is_err());
    }
}
