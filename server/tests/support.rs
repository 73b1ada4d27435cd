//! Test support: run the real `orchestrator` binary and external clients.

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
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
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_orchestrator"));
        cmd.args(["serve", "--listen", "127.0.0.1:0", "--state-dir"]).arg(state_dir).args(extra);
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd.env("RUST_LOG", "warn").stdout(Stdio::piped()).stderr(Stdio::inherit()).spawn().unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let addr = loop {
            let line = lines.next().expect("daemon exited before printing its endpoint").unwrap();
            if let Some(url) = line.strip_prefix("MCP endpoint: http://") {
                break url.trim_end_matches("/mcp").to_owned();
            }
        };
        Daemon { child, addr }
    }

    pub fn start(state_dir: &Path) -> Daemon {
        Self::start_with(state_dir, &[], &[])
    }

    pub fn mcp_url(&self) -> String {
        format!("http://{}/mcp", self.addr)
    }

    /// SIGKILL: no shutdown path runs.
    pub fn kill9(mut self) {
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
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests")
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
    let mut stream = TcpStream::connect(addr).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut req = format!("{method} {path} HTTP/1.1\r\nConnection: close\r\nContent-Length: {}\r\n", body.len());
    if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("host")) {
        req.push_str(&format!("Host: {addr}\r\n"));
    }
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    req.push_str(body);
    stream.write_all(req.as_bytes()).unwrap();
    let mut response = String::new();
    let _ = stream.read_to_string(&mut response);
    let status = response.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    let (head, body) = response.split_once("\r\n\r\n").unwrap_or((&response, ""));
    let mut r = Response { status, head: head.to_owned(), body: body.to_owned() };
    if r.header("transfer-encoding").is_some_and(|v| v.eq_ignore_ascii_case("chunked")) {
        r.body = dechunk(&r.body);
    }
    r
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
