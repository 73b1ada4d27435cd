//! `orchestrator`: the ChatGPT carrier pool orchestrator daemon.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context, bail};
use clap::{Parser, Subcommand};
use control::store::SqliteStore;
use control::{ControlPlane, SystemClock};
use rmcp::ServiceExt;
use server::http::{HttpConfig, app};
use server::state_dir::StateDir;
use server::tools::Tools;
use tokio_util::sync::CancellationToken;

#[derive(Parser)]
#[command(name = "orchestrator", version, about = "ChatGPT carrier pool orchestrator")]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Serve MCP over streamable HTTP at /mcp (and /healthz).
    Serve {
        /// State directory (default: $XDG_STATE_HOME/chatgpt-orchestrator).
        #[arg(long)]
        state_dir: Option<PathBuf>,
        /// Address to listen on. A non-loopback address requires ORCHESTRATOR_MCP_SECRET.
        #[arg(long, default_value = "127.0.0.1:7777")]
        listen: SocketAddr,
        /// Also accept this Host header (for example a tunnel's hostname). Repeatable.
        #[arg(long = "allowed-host")]
        allowed_hosts: Vec<String>,
        /// Accept requests carrying this Origin (scheme://host[:port]). Repeatable.
        #[arg(long = "allowed-origin")]
        allowed_origins: Vec<String>,
    },
    /// Serve the same MCP tools over stdio.
    McpStdio {
        /// State directory (default: $XDG_STATE_HOME/chatgpt-orchestrator).
        #[arg(long)]
        state_dir: Option<PathBuf>,
    },
}

fn open_plane(state_dir: Option<PathBuf>) -> anyhow::Result<(StateDir, Arc<ControlPlane>)> {
    let path = match state_dir {
        Some(p) => p,
        None => StateDir::default_path()?,
    };
    let dir = StateDir::open(&path)?;
    let store = SqliteStore::open(&dir.database()).context("opening the store")?;
    let plane = ControlPlane::open(Arc::new(store), Arc::new(SystemClock), dir.keyring()?)
        .map_err(|e| anyhow::anyhow!("{}: {e}", e.code()))?;
    Ok((dir, Arc::new(plane)))
}

/// Cancels `token` on SIGINT or SIGTERM.
fn cancel_on_signals(token: CancellationToken) -> anyhow::Result<()> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut int = signal(SignalKind::interrupt())?;
    let mut term = signal(SignalKind::terminate())?;
    tokio::spawn(async move {
        tokio::select! {
            _ = int.recv() => {}
            _ = term.recv() => {}
        }
        token.cancel();
    });
    Ok(())
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()))
        .init();
    let shutdown = CancellationToken::new();
    cancel_on_signals(shutdown.clone())?;
    match Cli::parse().command {
        Cmd::Serve { state_dir, listen, allowed_hosts, allowed_origins } => {
            let mcp_secret = std::env::var("ORCHESTRATOR_MCP_SECRET").ok().filter(|s| !s.is_empty());
            if let Some(secret) = &mcp_secret
                && (secret.len() < 32 || !secret.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'))
            {
                bail!("ORCHESTRATOR_MCP_SECRET must be at least 32 URL-safe characters [A-Za-z0-9_-]");
            }
            if !listen.ip().is_loopback() && mcp_secret.is_none() {
                bail!(
                    "refusing to listen on {listen} without ORCHESTRATOR_MCP_SECRET: the tools would be open to the network"
                );
            }
            let (dir, plane) = open_plane(state_dir)?;
            let config = HttpConfig { allowed_hosts, allowed_origins, mcp_secret };
            let listener = tokio::net::TcpListener::bind(listen).await.with_context(|| format!("binding {listen}"))?;
            let addr = listener.local_addr()?;
            println!("orchestrator listening on http://{addr} (state: {})", dir.path().display());
            println!("MCP endpoint: http://{addr}/mcp");
            let router = app(plane, &config, shutdown.child_token());
            axum::serve(listener, router).with_graceful_shutdown(shutdown.cancelled_owned()).await?;
            tracing::info!("stopped");
        }
        Cmd::McpStdio { state_dir } => {
            let (_dir, plane) = open_plane(state_dir)?;
            let service = Tools::new(plane).serve(rmcp::transport::stdio()).await?;
            tokio::select! {
                _ = service.waiting() => {}
                _ = shutdown.cancelled() => {}
            }
        }
    }
    Ok(())
}
