//! `fakechat`: a fake chatgpt.com over HTTPS for real-browser tests.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{Parser, Subcommand, ValueEnum};
use fakechat::server::Csp;

#[derive(Parser)]
#[command(name = "fakechat", about = "A faithful fake chatgpt.com for tests")]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Clone, Copy, ValueEnum)]
enum CspMode {
    /// Nonce scripts only, no 'wasm-unsafe-eval' (default: the worst case).
    Strict,
    /// Nonce scripts plus 'wasm-unsafe-eval', like the captured real header.
    Real,
    /// No Content-Security-Policy header.
    None,
}

#[derive(Subcommand)]
enum Cmd {
    /// Serve the fake site over HTTPS.
    Serve {
        /// Address to listen on (loopback).
        #[arg(long, default_value = "127.0.0.1:8443")]
        listen: SocketAddr,
        /// The orchestrator's MCP URL the scripted agent calls (http://127.0.0.1:PORT/mcp).
        #[arg(long)]
        mcp_url: Option<String>,
        /// Where to write ca.pem (the CA tests must trust).
        #[arg(long)]
        cert_dir: Option<PathBuf>,
        /// Content-Security-Policy of the pages.
        #[arg(long, value_enum, default_value = "strict")]
        csp: CspMode,
    },
    /// Write the state fixtures (default: chatgpt-dom/fixtures).
    Fixtures {
        /// Output directory.
        #[arg(long, default_value = "chatgpt-dom/fixtures")]
        out: PathBuf,
    },
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt().with_writer(std::io::stderr).init();
    match Cli::parse().command {
        Cmd::Serve { listen, mcp_url, cert_dir, csp } => {
            if !listen.ip().is_loopback() {
                anyhow::bail!("fakechat serves loopback only");
            }
            let csp = match csp {
                CspMode::Strict => Csp::Strict,
                CspMode::Real => Csp::RealLike,
                CspMode::None => Csp::None,
            };
            let running = fakechat::start(listen, mcp_url, csp, cert_dir.as_deref()).await?;
            println!("fakechat listening on https://{}", running.addr);
            if let Some(dir) = cert_dir {
                println!("CA certificate: {}", dir.join("ca.pem").display());
            }
            tokio::signal::ctrl_c().await?;
        }
        Cmd::Fixtures { out } => {
            let n = fakechat::fixtures::write(&out)?;
            println!("wrote {n} fixtures to {}", out.display());
        }
    }
    Ok(())
}
