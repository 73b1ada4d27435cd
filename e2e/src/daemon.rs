//! The real daemon process on a temporary state dir.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use anyhow::Context;

/// A running `orchestrator serve`.
pub struct Daemon {
    child: Child,
    binary: PathBuf,
    state_dir: PathBuf,
    /// The flags it was started with, used again by every restart.
    extra: Vec<String>,
    /// `host:port`.
    pub addr: String,
}

impl Daemon {
    /// Starts `orchestrator serve` and waits for its endpoint line.
    pub fn start(binary: &Path, state_dir: &Path, listen: &str, extra: &[&str]) -> anyhow::Result<Daemon> {
        let (child, addr) = spawn(binary, state_dir, listen, extra)?;
        let extra = extra.iter().map(|a| (*a).to_owned()).collect();
        Ok(Daemon { child, binary: binary.to_owned(), state_dir: state_dir.to_owned(), extra, addr })
    }

    /// The daemon's process id (for resource figures).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The MCP endpoint.
    pub fn mcp_url(&self) -> String {
        format!("http://{}/mcp", self.addr)
    }

    /// The executor endpoint the extension dials.
    pub fn executor_url(&self) -> String {
        format!("ws://{}/executor", self.addr)
    }

    /// A new executor credential, as `orchestrator pair --operator` issues
    /// it for a person's browser: each call pairs one more executor (the
    /// extension adopts the credential's id).
    pub fn credential(&self) -> anyhow::Result<String> {
        let out = Command::new(&self.binary)
            .args(["pair", "--json", "--operator", "--state-dir"])
            .arg(&self.state_dir)
            .output()?;
        anyhow::ensure!(out.status.success(), "`orchestrator pair` failed: {}", String::from_utf8_lossy(&out.stderr));
        let paired: serde_json::Value = serde_json::from_slice(&out.stdout)?;
        paired["credential"].as_str().map(str::to_owned).context("`orchestrator pair` printed no credential")
    }

    /// A new executor credential written to `file` owner-only, as
    /// `carrier-agent --credential-file` requires it.
    pub fn credential_file(&self, file: &Path) -> anyhow::Result<()> {
        use std::os::unix::fs::OpenOptionsExt;
        let mut f = std::fs::OpenOptions::new().write(true).create(true).truncate(true).mode(0o600).open(file)?;
        std::io::Write::write_all(&mut f, self.credential()?.as_bytes())?;
        Ok(())
    }

    /// A dashboard link, as `orchestrator ui` prints it (a one-time ticket).
    pub fn ui_link(&self) -> anyhow::Result<String> {
        let out = Command::new(&self.binary)
            .args(["ui", "--state-dir"])
            .arg(&self.state_dir)
            .args(["--addr", &self.addr])
            .output()?;
        anyhow::ensure!(out.status.success(), "`orchestrator ui` failed: {}", String::from_utf8_lossy(&out.stderr));
        let stdout = String::from_utf8(out.stdout)?;
        stdout.lines().next().map(str::to_owned).context("`orchestrator ui` printed no link")
    }

    /// Kills the daemon and starts it again on the same address, state and
    /// flags.
    pub fn restart(&mut self) -> anyhow::Result<()> {
        self.kill();
        self.start_again()
    }

    /// Starts the daemon again on the same address, state and flags after a
    /// [`Daemon::kill`]: its port was closed meanwhile.
    pub fn start_again(&mut self) -> anyhow::Result<()> {
        let extra: Vec<&str> = self.extra.iter().map(String::as_str).collect();
        // The port was just released; binding it again may take a moment.
        let mut last = None;
        for _ in 0..50 {
            match spawn(&self.binary, &self.state_dir, &self.addr, &extra) {
                Ok((child, addr)) => {
                    (self.child, self.addr) = (child, addr);
                    return Ok(());
                }
                Err(e) => last = Some(e),
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        Err(last.expect("tried at least once"))
    }

    /// SIGKILL: no shutdown path runs.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        self.kill();
    }
}

fn spawn(binary: &Path, state_dir: &Path, listen: &str, extra: &[&str]) -> anyhow::Result<(Child, String)> {
    let mut child = Command::new(binary)
        .args(["serve", "--listen", listen, "--state-dir"])
        .arg(state_dir)
        .args(extra)
        .args(if extra.contains(&"--app-label") { &[][..] } else { &["--app-label", crate::APP_LABEL][..] })
        .env("RUST_LOG", std::env::var("RUST_LOG").unwrap_or_else(|_| "warn".into()))
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .with_context(|| format!("starting {}", binary.display()))?;
    let mut lines = BufReader::new(child.stdout.take().expect("piped")).lines();
    let addr = loop {
        let Some(line) = lines.next() else {
            let _ = child.wait();
            anyhow::bail!("the daemon exited before printing its endpoint");
        };
        if let Some(url) = line?.strip_prefix("MCP endpoint: http://") {
            break url.trim_end_matches("/mcp").to_owned();
        }
    };
    // Keep draining stdout so the daemon never writes into a closed pipe.
    std::thread::spawn(move || lines.for_each(drop));
    Ok((child, addr))
}
