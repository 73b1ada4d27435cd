//! What the bridge's tests share: the daemon's end of an in-memory
//! WebSocket, so a session or a pairing socket runs with no network.

use std::pin::Pin;
use std::task::{Context, Poll};

use axum::extract::ws::Message;
use futures_util::{Sink, Stream};
use tokio::sync::mpsc;

/// The daemon's end of an in-memory WebSocket.
pub struct MemSocket {
    pub incoming: mpsc::UnboundedReceiver<Result<Message, axum::Error>>,
    pub outgoing: mpsc::UnboundedSender<Message>,
}

impl Stream for MemSocket {
    type Item = Result<Message, axum::Error>;
    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.incoming.poll_recv(cx)
    }
}

impl Sink<Message> for MemSocket {
    type Error = axum::Error;
    fn poll_ready(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Result<(), axum::Error>> {
        Poll::Ready(Ok(()))
    }
    fn start_send(self: Pin<&mut Self>, item: Message) -> Result<(), axum::Error> {
        self.outgoing.send(item).map_err(axum::Error::new)
    }
    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Result<(), axum::Error>> {
        Poll::Ready(Ok(()))
    }
    fn poll_close(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Result<(), axum::Error>> {
        Poll::Ready(Ok(()))
    }
}
