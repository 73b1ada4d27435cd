//! The agent's way to the daemon: plain TCP on the daemon's machine, TLS
//! to the pinned certificate from another (issue 47).

use super::Config;

/// What the daemon's socket runs over: TCP on its machine, TLS from another.
pub(super) trait Io: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send {}
impl<T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send> Io for T {}

/// Opens the daemon's executor endpoint: plain TCP to a loopback `ws://`
/// one, TLS trusting only the pinned certificate to a `wss://` one (a
/// certificate with another pin ends the handshake before `hello`).
pub(super) async fn dial(config: &Config) -> Result<tokio_tungstenite::WebSocketStream<Box<dyn Io>>, String> {
    let url = config.daemon.as_str();
    let (rest, tls) = match (url.strip_prefix("wss://"), url.strip_prefix("ws://")) {
        (Some(rest), _) => (rest, true),
        (None, Some(rest)) => (rest, false),
        _ => return Err(format!("{url} is not a ws:// or wss:// URL")),
    };
    let authority = rest.split('/').next().unwrap_or_default();
    let tcp = tokio::net::TcpStream::connect(authority).await.map_err(|e| e.to_string())?;
    let _ = tcp.set_nodelay(true);
    let io: Box<dyn Io> = match (tls, config.daemon_pin) {
        (false, _) => Box::new(tcp),
        (true, Some(pin)) => Box::new(
            executor_tls::connector(pin).connect(executor_tls::server_name(), tcp).await.map_err(|e| e.to_string())?,
        ),
        (true, None) => return Err("a wss:// endpoint is dialled only with its pinned certificate".into()),
    };
    let (socket, _) = tokio_tungstenite::client_async(url, io).await.map_err(|e| e.to_string())?;
    Ok(socket)
}
