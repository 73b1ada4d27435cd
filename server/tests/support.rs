//! Test support: run the real `orchestrator` binary and external clients.

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

/// A running `orchestrator serve` on an ephemeral loopback port.
pub struct Daemon {
    pub child: Child,
    pub addr: String,
}

impl Daemon {
    /// Starts the daemon on `state_dir` with extra args and env, and waits
    /// for it to print its MCP endpoint.
    pub fn start_with(state_dir: &Path, extra: &[&str], env: &[(&str, &str)]) -> Daemon {
        Self::spawn(state_dir, "127.0.0.1:0", extra, env)
    }

    /// Starts the daemon on a given address (to restart it where executors dial).
    pub fn start_at(state_dir: &Path, addr: &str, extra: &[&str]) -> Daemon {
        Self::spawn(state_dir, addr, extra, &[])
    }

    /// Starts the daemon on a given address with extra args and env.
    pub fn start_at_with(state_dir: &Path, addr: &str, extra: &[&str], env: &[(&str, &str)]) -> Daemon {
        Self::spawn(state_dir, addr, extra, env)
    }

    fn spawn(state_dir: &Path, listen: &str, extra: &[&str], env: &[(&str, &str)]) -> Daemon {
        Self::spawn_logging(state_dir, listen, extra, env, Stdio::inherit())
    }

    /// Starts the daemon with `RUST_LOG=trace`, its stderr into `log`.
    pub fn start_tracing(state_dir: &Path, extra: &[&str], env: &[(&str, &str)], log: std::fs::File) -> Daemon {
        let mut env = env.to_vec();
        env.push(("RUST_LOG", "trace"));
        Self::spawn_logging(state_dir, "127.0.0.1:0", extra, &env, Stdio::from(log))
    }

    fn spawn_logging(state_dir: &Path, listen: &str, extra: &[&str], env: &[(&str, &str)], stderr: Stdio) -> Daemon {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_orchestrator"));
        cmd.args(["serve", "--listen", listen, "--state-dir"]).arg(state_dir).args(extra).env("RUST_LOG", "warn");
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd.stdout(Stdio::piped()).stderr(stderr).spawn().unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let addr = loop {
            let line = lines.next().expect("daemon exited before printing its endpoint").unwrap();
            if let Some(url) = line.strip_prefix("MCP endpoint: http://") {
                break url.trim_end_matches("/mcp").to_owned();
            }
        };
        // Keep draining stdout so the daemon never writes into a closed pipe.
        std::thread::spawn(move || lines.for_each(drop));
        Daemon { child, addr }
    }

    /// Starts the daemon on `listen` with its stderr appended to `log`.
    pub fn start_logging_to(state_dir: &Path, listen: &str, extra: &[&str], log: std::fs::File) -> Daemon {
        Self::spawn_logging(state_dir, listen, extra, &[], Stdio::from(log))
    }

    pub fn start(state_dir: &Path) -> Daemon {
        Self::start_with(state_dir, &[], &[])
    }

    pub fn mcp_url(&self) -> String {
        format!("http://{}/mcp", self.addr)
    }

    /// SIGKILL: no shutdown path runs.
    pub fn kill9(mut self) {
        self.kill();
    }

    /// SIGKILL in place (the handle stays, dead).
    pub fn kill(&mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn tests_dir() -> PathBuf {
    e2e::workspace().join("server/tests")
}

/// Runs one of the Python client scripts; panics with its output on failure.
pub fn python(script: &str, args: &[&str]) -> String {
    let dir = tests_dir().join("py");
    let probe = Command::new("python3").args(["-c", "import mcp"]).output().expect("python3 is installed");
    assert!(
        probe.status.success(),
        "the Python MCP SDK is missing: run the README test command, which installs it (pip install -r server/tests/py/requirements.txt)"
    );
    let out = Command::new("python3").arg(dir.join(script)).args(args).current_dir(&dir).output().unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{script} {args:?} failed:\n{text}");
    text
}

/// The TypeScript SDK client directory, with its dependencies installed.
pub fn ts_dir() -> PathBuf {
    let dir = tests_dir().join("ts");
    assert!(
        dir.join("node_modules/@modelcontextprotocol/sdk").is_dir(),
        "the TypeScript MCP SDK is missing: run the README test command (npm ci --prefix server/tests/ts)"
    );
    dir
}

/// A raw HTTP response.
pub struct Response {
    pub status: u16,
    pub head: String,
    pub body: String,
}

impl Response {
    /// A header's value (case-insensitive name).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.head.lines().find_map(|line| {
            let (k, v) = line.split_once(':')?;
            k.trim().eq_ignore_ascii_case(name).then(|| v.trim())
        })
    }
}

/// One raw HTTP/1.1 request on a fresh connection.
pub fn request(addr: &str, method: &str, path: &str, headers: &[(&str, &str)], body: &str) -> Response {
    try_request(addr, method, path, headers, body).unwrap()
}

/// One raw HTTP/1.1 request; an error when the daemon cannot be reached.
pub fn try_request(
    addr: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> std::io::Result<Response> {
    let mut stream = TcpStream::connect(addr)?;
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    let mut req = format!("{method} {path} HTTP/1.1\r\nConnection: close\r\nContent-Length: {}\r\n", body.len());
    if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("host")) {
        req.push_str(&format!("Host: {addr}\r\n"));
    }
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    req.push_str(body);
    stream.write_all(req.as_bytes())?;
    let mut response = String::new();
    let _ = stream.read_to_string(&mut response);
    let status = response.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    let (head, body) = response.split_once("\r\n\r\n").unwrap_or((&response, ""));
    let mut r = Response { status, head: head.to_owned(), body: body.to_owned() };
    if r.header("transfer-encoding").is_some_and(|v| v.eq_ignore_ascii_case("chunked")) {
        r.body = dechunk(&r.body);
    }
    Ok(r)
}

/// Joins the chunks of a chunked transfer-encoded body.
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

/// One raw HTTP/1.1 request; returns the status code and body.
pub fn http(addr: &str, method: &str, path: &str, headers: &[(&str, &str)], body: &str) -> (u16, String) {
    let r = request(addr, method, path, headers, body);
    (r.status, r.body)
}

/// A minimal MCP client over raw HTTP (legacy session mode), enough for Rust
/// tests and benches to drive the daemon without another SDK.
pub struct Mcp {
    addr: String,
    path: String,
    session: String,
    next_id: std::sync::atomic::AtomicU64,
}

const ACCEPT_BOTH: (&str, &str) = ("Accept", "application/json, text/event-stream");
const JSON_BODY: (&str, &str) = ("Content-Type", "application/json");
const LEGACY_VERSION: &str = "2025-11-25";

/// The JSON-RPC message inside an SSE or JSON body.
fn rpc_message(body: &str) -> serde_json::Value {
    let json = body.lines().filter_map(|l| l.strip_prefix("data: ")).find(|l| l.starts_with('{')).unwrap_or(body);
    serde_json::from_str(json).unwrap_or_else(|e| panic!("{e}: {body}"))
}

impl Mcp {
    pub fn connect(addr: &str) -> Mcp {
        Self::connect_at(addr, "/mcp")
    }

    /// Connects at another path (the secret path `/s/<secret>/mcp`).
    pub fn connect_at(addr: &str, path: &str) -> Mcp {
        Self::try_connect_at(addr, path).expect("an MCP session")
    }

    /// A session, or `None` when the daemon cannot be reached or gives none.
    pub fn try_connect_at(addr: &str, path: &str) -> Option<Mcp> {
        let init = format!(
            r#"{{"jsonrpc":"2.0","id":0,"method":"initialize","params":{{"protocolVersion":"{LEGACY_VERSION}","capabilities":{{}},"clientInfo":{{"name":"rust-tests","version":"0"}}}}}}"#
        );
        let r = try_request(addr, "POST", path, &[ACCEPT_BOTH, JSON_BODY], &init).ok()?;
        let session = r.header("mcp-session-id")?.to_owned();
        let mcp = Mcp { addr: addr.to_owned(), path: path.to_owned(), session, next_id: 1.into() };
        mcp.try_post(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#).ok()?;
        Some(mcp)
    }

    /// Calls a tool as a history records it: ok, a typed error, or unknown
    /// (no answer: the daemon died or the session is gone; the call may or
    /// may not have taken effect).
    pub fn attempt(&self, tool: &str, args: serde_json::Value) -> Attempt {
        let id = self.next_id.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let body =
            serde_json::json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":{"name":tool,"arguments":args}});
        let Ok(r) = self.try_post(&body.to_string()) else { return Attempt::Unknown };
        let parsed = r.body.lines().filter_map(|l| l.strip_prefix("data: ")).find(|l| l.starts_with('{'));
        let Some(message) =
            parsed.or(Some(r.body.as_str())).and_then(|m| serde_json::from_str::<serde_json::Value>(m).ok())
        else {
            return Attempt::Unknown;
        };
        if r.status != 200 || message.get("result").is_none() {
            return Attempt::Unknown;
        }
        match tool_outcome(&r) {
            Ok(v) => Attempt::Ok(v),
            Err((code, message)) => Attempt::Failed(code, message),
        }
    }

    fn post(&self, body: &str) -> Response {
        self.try_post(body).unwrap()
    }

    /// Every post carries a fresh `x-request-id`, as ChatGPT's connector
    /// sends one with each call (a fake executor's pages show it).
    fn try_post(&self, body: &str) -> std::io::Result<Response> {
        self.try_post_as(body, &fresh_request_id())
    }

    fn try_post_as(&self, body: &str, request_id: &str) -> std::io::Result<Response> {
        let headers = [
            ACCEPT_BOTH,
            JSON_BODY,
            ("Mcp-Session-Id", self.session.as_str()),
            ("MCP-Protocol-Version", LEGACY_VERSION),
            ("x-request-id", request_id),
        ];
        try_request(&self.addr, "POST", &self.path, &headers, body)
    }

    /// Calls a tool with this `x-request-id` (a replay, or one a page shows).
    pub fn call_as(
        &self,
        request_id: &str,
        tool: &str,
        args: serde_json::Value,
    ) -> Result<serde_json::Value, (String, String)> {
        let id = self.next_id.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let body =
            serde_json::json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":{"name":tool,"arguments":args}});
        tool_outcome(&self.try_post_as(&body.to_string(), request_id).unwrap())
    }

    /// Calls a tool: its structured content, or its error `(code, message)`.
    pub fn call(&self, tool: &str, args: serde_json::Value) -> Result<serde_json::Value, (String, String)> {
        let id = self.next_id.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let body =
            serde_json::json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":{"name":tool,"arguments":args}});
        tool_outcome(&self.post(&body.to_string()))
    }

    /// Calls a tool; the whole JSON-RPC reply (`result` or `error`).
    pub fn raw(&self, tool: &str, args: serde_json::Value) -> serde_json::Value {
        let id = self.next_id.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let body =
            serde_json::json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":{"name":tool,"arguments":args}});
        rpc_message(&self.post(&body.to_string()).body)
    }

    /// Lists the tools: the JSON-RPC `result`.
    pub fn list_tools(&self) -> serde_json::Value {
        let id = self.next_id.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let body = serde_json::json!({"jsonrpc":"2.0","id":id,"method":"tools/list","params":{}});
        rpc_message(&self.post(&body.to_string()).body)["result"].clone()
    }

    /// Calls a tool that must succeed.
    pub fn ok(&self, tool: &str, args: serde_json::Value) -> serde_json::Value {
        self.call(tool, args).unwrap_or_else(|(code, msg)| panic!("{tool}: {code}: {msg}"))
    }
}

/// A request id no call used before: `wfr_<time><count>/t1`, as ChatGPT's
/// `x-request-id` looks.
pub fn fresh_request_id() -> String {
    static COUNT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = COUNT.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos();
    format!("wfr_{t:x}{}{n}/t1", std::process::id())
}

/// A tool call's outcome, as a Jepsen-style history records it.
#[derive(Debug, Clone)]
pub enum Attempt {
    /// The structured result.
    Ok(serde_json::Value),
    /// A typed error `(code, message)`: nothing happened.
    Failed(String, String),
    /// No answer: it may or may not have happened.
    Unknown,
}

/// One stateless MCP call (the 2026-07-28 revision: no `initialize`, no
/// session): its structured content, or its error `(code, message)`.
pub fn stateless_call(addr: &str, tool: &str, args: serde_json::Value) -> Result<serde_json::Value, (String, String)> {
    stateless_call_as(addr, &fresh_request_id(), tool, args)
}

/// [`stateless_call`] with this `x-request-id`.
pub fn stateless_call_as(
    addr: &str,
    request_id: &str,
    tool: &str,
    args: serde_json::Value,
) -> Result<serde_json::Value, (String, String)> {
    let meta = serde_json::json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {}
    });
    let body = serde_json::json!({"jsonrpc":"2.0","id":1,"method":"tools/call",
        "params":{"name":tool,"arguments":args,"_meta":meta}});
    let headers = [
        ACCEPT_BOTH,
        JSON_BODY,
        ("MCP-Protocol-Version", "2026-07-28"),
        ("Mcp-Method", "tools/call"),
        ("Mcp-Name", tool),
        ("x-request-id", request_id),
    ];
    let r = request(addr, "POST", "/mcp", &headers, &body.to_string());
    assert!(r.header("mcp-session-id").is_none(), "a stateless call got a session");
    tool_outcome(&r)
}

/// A `tools/call` reply: its structured content, or its error `(code, message)`.
fn tool_outcome(r: &Response) -> Result<serde_json::Value, (String, String)> {
    let result = rpc_message(&r.body)["result"].clone();
    if result["isError"] == true {
        let text = result["content"][0]["text"].as_str().unwrap_or_default();
        let err: serde_json::Value = serde_json::from_str(text).unwrap_or_default();
        return Err((
            err["code"].as_str().unwrap_or("").to_owned(),
            err["message"].as_str().unwrap_or(text).to_owned(),
        ));
    }
    Ok(result["structuredContent"].clone())
}

/// A credential for `executor_id`, issued as `orchestrator pair` would.
pub fn credential(state: &Path, executor_id: &str) -> String {
    carrier_webext::Credentials::open_or_create(&state.join("executors")).unwrap().issue(executor_id).unwrap()
}

/// The daemon's executor endpoint.
pub fn ws_url(daemon: &Daemon) -> String {
    format!("ws://{}/executor", daemon.addr)
}

/// A `hello` frame as executor `raw` (instance `raw-1`).
pub fn hello(token: &str, version: u32) -> String {
    serde_json::json!({"type":"hello","protocolVersion":version,"token":token,"executorId":"raw",
        "executorInstanceId":"raw-1","executorKind":"fake"})
    .to_string()
}

/// Opens a raw executor WebSocket, sends `frames` (text), and returns the
/// close frame the daemon sends (code, reason).
pub async fn refused(daemon: &Daemon, origin: Option<&str>, frames: Vec<String>) -> Result<(u16, String), String> {
    let frames = frames.into_iter().map(|f| tokio_tungstenite::tungstenite::Message::Text(f.into())).collect();
    refused_after(daemon, origin, frames).await
}

/// Like [`refused`], with any WebSocket messages (pings, raw frames).
pub async fn refused_after(
    daemon: &Daemon,
    origin: Option<&str>,
    messages: Vec<tokio_tungstenite::tungstenite::Message>,
) -> Result<(u16, String), String> {
    use futures_util::{SinkExt, StreamExt};
    use tokio_tungstenite::tungstenite::Message;
    use tokio_tungstenite::tungstenite::client::IntoClientRequest;
    let mut request = ws_url(daemon).into_client_request().unwrap();
    if let Some(origin) = origin {
        request.headers_mut().insert("Origin", origin.parse().unwrap());
    }
    let config = tokio_tungstenite::tungstenite::protocol::WebSocketConfig::default()
        .max_message_size(Some(64 << 20))
        .max_frame_size(Some(64 << 20));
    let (mut socket, _) =
        tokio_tungstenite::connect_async_with_config(request, Some(config), false).await.map_err(|e| e.to_string())?;
    for m in messages {
        if socket.send(m).await.is_err() {
            break;
        }
    }
    while let Some(msg) =
        tokio::time::timeout(Duration::from_secs(20), socket.next()).await.expect("the daemon answers")
    {
        match msg {
            Ok(Message::Close(Some(close))) => return Ok((close.code.into(), close.reason.to_string())),
            Ok(_) => continue,
            Err(e) => return Err(e.to_string()),
        }
    }
    Err("closed without a reason".into())
}

/// The status a well-formed WebSocket upgrade of `path` gets at `addr`,
/// naming `host` (default: `addr`) and carrying `extra` headers.
pub fn upgrade_status(addr: &str, path: &str, host: Option<&str>, extra: &[(&str, &str)]) -> u16 {
    let mut tcp = TcpStream::connect(addr).unwrap();
    tcp.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut request = format!(
        "GET {path} HTTP/1.1\r\nHost: {}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\
         Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n",
        host.unwrap_or(addr)
    );
    for (k, v) in extra {
        request.push_str(&format!("{k}: {v}\r\n"));
    }
    request.push_str("\r\n");
    tcp.write_all(request.as_bytes()).unwrap();
    let mut head = [0u8; 64];
    let n = tcp.read(&mut head).unwrap();
    String::from_utf8_lossy(&head[..n]).split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0)
}

/// A reverse proxy on loopback standing in for a tunnel (cloudflared, the
/// OpenAI tunnel client): it accepts on its own port and forwards every
/// request to `upstream` with the tunnel's public `Host`, as a tunnel
/// presents it, one request per connection (`Connection: close`), and
/// passes upgrades through untouched otherwise.
pub struct Tunnel {
    pub addr: String,
    upstream: Arc<std::sync::OnceLock<String>>,
}

impl Tunnel {
    pub fn start(upstream: &str, public_host: &str) -> Tunnel {
        let tunnel = Tunnel::bind(public_host);
        tunnel.forward_to(upstream);
        tunnel
    }

    /// A tunnel whose address is known before the daemon it forwards to
    /// starts (the daemon's OAuth issuer names it); [`Tunnel::forward_to`]
    /// before the first request.
    pub fn bind(public_host: &str) -> Tunnel {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let upstream: Arc<std::sync::OnceLock<String>> = Arc::default();
        let (target, public_host) = (upstream.clone(), public_host.to_owned());
        std::thread::spawn(move || {
            for client in listener.incoming().flatten() {
                let (target, public_host) = (target.clone(), public_host.clone());
                std::thread::spawn(move || {
                    if let Some(upstream) = target.get() {
                        Tunnel::forward(client, upstream, &public_host)
                    }
                });
            }
        });
        Tunnel { addr, upstream }
    }

    pub fn forward_to(&self, upstream: &str) {
        self.upstream.set(upstream.to_owned()).expect("forwarded once");
    }

    fn forward(mut client: TcpStream, upstream: &str, public_host: &str) {
        let mut head = Vec::new();
        let mut byte = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") {
            if head.len() > 64 << 10 || client.read(&mut byte).map_or(true, |n| n == 0) {
                return;
            }
            head.push(byte[0]);
        }
        let text = String::from_utf8_lossy(&head).into_owned();
        let mut lines = text.trim_end().split("\r\n");
        let mut rewritten = format!("{}\r\n", lines.next().unwrap_or_default());
        let upgrade = text.to_ascii_lowercase().contains("upgrade: websocket");
        for line in lines {
            let name = line.split(':').next().unwrap_or_default().to_ascii_lowercase();
            match name.as_str() {
                "host" => rewritten.push_str(&format!("Host: {public_host}\r\n")),
                "connection" if !upgrade => {}
                _ => rewritten.push_str(&format!("{line}\r\n")),
            }
        }
        if !upgrade {
            rewritten.push_str("Connection: close\r\n");
        }
        rewritten.push_str("X-Forwarded-Proto: https\r\n\r\n");
        let Ok(mut server) = TcpStream::connect(upstream) else { return };
        if server.write_all(rewritten.as_bytes()).is_err() {
            return;
        }
        let (mut client_in, mut server_out) = (client.try_clone().unwrap(), server.try_clone().unwrap());
        std::thread::spawn(move || {
            let _ = std::io::copy(&mut client_in, &mut server_out);
        });
        let _ = std::io::copy(&mut server, &mut client);
        let _ = client.shutdown(std::net::Shutdown::Both);
        let _ = server.shutdown(std::net::Shutdown::Both);
    }
}

/// `git -C dir args`; its trimmed standard output (panics on failure).
pub fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git").arg("-C").arg(dir).args(args).output().expect("git runs");
    assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).expect("utf-8").trim().to_owned()
}

/// A repository `root/repo` on `main` with one commit, and a linked
/// worktree `root/<name>` on branch `work/<name>` for each name. Returns
/// the repository's and the worktrees' resolved paths.
pub fn git_fixture(root: &Path, worktrees: &[&str]) -> (PathBuf, Vec<PathBuf>) {
    let repo = root.join("repo");
    std::fs::create_dir_all(&repo).expect("mkdir");
    git(&repo, &["init", "-q", "-b", "main"]);
    git(&repo, &["config", "user.name", "Test"]);
    git(&repo, &["config", "user.email", "test@localhost"]);
    std::fs::write(repo.join("README"), "fixture\n").expect("write");
    git(&repo, &["add", "README"]);
    git(&repo, &["commit", "-q", "-m", "first"]);
    let trees = worktrees
        .iter()
        .map(|name| {
            let path = root.join(name);
            git(&repo, &["worktree", "add", "-q", "-b", &format!("work/{name}"), path.to_str().expect("utf-8")]);
            std::fs::canonicalize(path).expect("resolves")
        })
        .collect();
    (std::fs::canonicalize(repo).expect("resolves"), trees)
}

/// `orchestrator who <target> --json` against the daemon at `addr` on `state_dir`.
pub fn who(state_dir: &Path, addr: &str, target: &str) -> anyhow::Result<serde_json::Value> {
    let out = Command::new(env!("CARGO_BIN_EXE_orchestrator"))
        .args(["who", target, "--json", "--addr", addr, "--state-dir"])
        .arg(state_dir)
        .output()?;
    if !out.status.success() {
        anyhow::bail!("who {target}: {}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    }
    Ok(serde_json::from_slice(&out.stdout)?)
}

/// The O9 ownership lifecycle (`e2e::scenario::ownership_lifecycle`) on a
/// fresh fixture under `trees`, against a daemon started with
/// `--worktree-root trees` (see [`worktree_root_arg`]).
pub async fn ownership_lifecycle(
    mcp_url: &str,
    state_dir: &Path,
    addr: &str,
    trees: &Path,
) -> e2e::scenario::OwnershipLifecycle {
    let (repo, worktrees) = git_fixture(trees, &["o9"]);
    let who = |target: &str| who(state_dir, addr, target);
    e2e::scenario::ownership_lifecycle(mcp_url, &repo, &worktrees[0], who, Duration::from_secs(60))
        .await
        .unwrap_or_else(|e| panic!("{e:#}"))
}

/// A page inspection through the daemon (`GET /admin/page-inspect`, as
/// `canary run`'s pre-flight asks) of chatgpt.com's new chat, checked
/// read-only where fakechat sees it: each of the `executors` connected
/// carriers read it `ready`, in a tab of its own that fakechat had not seen
/// before, and that tab saw no click, no key and no focus (fakechat's
/// interaction recorder). Returns the inspected tabs' fakechat ids.
pub async fn inspect_new_chat_read_only(
    fake: &fakechat::Running,
    addr: &str,
    state_dir: &Path,
    executors: usize,
) -> Vec<String> {
    let tabs = |oracle: serde_json::Value| -> std::collections::BTreeMap<String, serde_json::Value> {
        oracle["tabs"].as_object().cloned().unwrap_or_default().into_iter().collect()
    };
    let before = tabs(fake.hub.oracle());
    let readings = server::admin::inspect_page(addr, state_dir, "https://chatgpt.com/").await.unwrap();
    assert_eq!(readings.len(), executors, "{readings:?}");
    for reading in &readings {
        let inspection = reading.inspection.as_ref().unwrap_or_else(|| panic!("{reading:?}"));
        assert_eq!(inspection.state, "ready", "{reading:?}");
        assert!(inspection.usable(), "{reading:?}");
    }
    // The tab's last report is on its way as the reading returns.
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    let fresh = loop {
        let fresh: Vec<(String, serde_json::Value)> =
            tabs(fake.hub.oracle()).into_iter().filter(|(id, _)| !before.contains_key(id)).collect();
        if fresh.len() >= executors || std::time::Instant::now() > deadline {
            break fresh;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(fresh.len(), executors, "one tab per inspecting carrier: {fresh:?}");
    for (_, tab) in &fresh {
        assert_eq!(tab["path"], "/", "{tab}");
        assert_eq!(tab["interactions"], serde_json::json!({"clicks": 0, "keys": 0, "focus": 0}), "{tab}");
    }
    fresh.into_iter().map(|(id, _)| id).collect()
}
