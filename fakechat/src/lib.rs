//! fakechat: a fake `chatgpt.com` for real-browser tests.
//!
//! # Layout
//! - [`render`]: the DOM, as a pure function of a view (pages, updates, fixtures).
//! - [`hub`]: conversations, tabs and the oracle's records.
//! - [`agent`]: the scripted agent playing the model; calls the orchestrator's MCP.
//! - [`server`]: routes (real paths, page script, fake backend, control, oracle).
//! - [`tls`]: a throwaway CA and a `chatgpt.com` certificate.
//! - [`fixtures`]: the sanitized state fixtures for `chatgpt-dom`.
//!
//! Architecture invariant: test infrastructure only. Nothing here is used by
//! the product, and the product's adapter never calls fakechat's backend: it
//! sees the DOM and uses the page's own controls, as on the real site.

pub mod agent;
pub mod fixtures;
pub mod hub;
pub mod render;
pub mod server;
pub mod tls;

use std::net::SocketAddr;
use std::sync::Arc;

/// Serves `router` over TLS on `listener` until the task is dropped.
pub async fn serve_tls(listener: tokio::net::TcpListener, router: axum::Router, tls: Arc<rustls::ServerConfig>) {
    let acceptor = tokio_rustls::TlsAcceptor::from(tls);
    loop {
        let Ok((tcp, _)) = listener.accept().await else { continue };
        let _ = tcp.set_nodelay(true);
        let (acceptor, router) = (acceptor.clone(), router.clone());
        tokio::spawn(async move {
            let Ok(stream) = acceptor.accept(tcp).await else { return };
            let io = hyper_util::rt::TokioIo::new(stream);
            let service = hyper_util::service::TowerToHyperService::new(router);
            let _ = hyper_util::server::conn::auto::Builder::new(hyper_util::rt::TokioExecutor::new())
                .serve_connection_with_upgrades(io, service)
                .await;
        });
    }
}

/// A running fakechat (for tests that embed it).
pub struct Running {
    /// Where it listens.
    pub addr: SocketAddr,
    /// Its state, for direct inspection.
    pub hub: Arc<hub::Hub>,
    /// The CA to trust.
    pub ca_pem: String,
}

/// Starts fakechat on `listen` in the current runtime.
pub async fn start(
    listen: SocketAddr,
    mcp_url: Option<String>,
    csp: server::Csp,
    cert_dir: Option<&std::path::Path>,
) -> anyhow::Result<Running> {
    let certs = tls::generate(cert_dir)?;
    let listener = tokio::net::TcpListener::bind(listen).await?;
    let addr = listener.local_addr()?;
    let hub = Arc::new(hub::Hub::new(mcp_url));
    tokio::spawn(serve_tls(listener, server::router(hub.clone(), csp), certs.server));
    Ok(Running { addr, hub, ca_pem: certs.ca_pem })
}
