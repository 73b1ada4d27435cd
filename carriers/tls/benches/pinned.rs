//! The remote executor endpoint's cost (issue 47), as ratios against plain
//! TCP on the same loopback in the same run: connecting (TCP, then the TLS
//! handshake with the pin checked) and a small frame's round trip (an
//! executor frame is about 1 KiB). `cargo bench -p executor-tls`; under
//! `cargo test` a quick pass of the same steps.

use std::time::{Duration, Instant};

use executor_tls::{Identity, connector, server_name};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

const FRAME: usize = 1024;

fn median(mut xs: Vec<Duration>) -> Duration {
    xs.sort();
    xs[xs.len() / 2]
}

/// Echoes every frame back, on each connection, TLS or not.
async fn echo<S: AsyncRead + AsyncWrite + Unpin>(mut stream: S) {
    let mut frame = [0u8; FRAME];
    while stream.read_exact(&mut frame).await.is_ok() {
        if stream.write_all(&frame).await.is_err() {
            return;
        }
    }
}

/// `rounds` round trips of one frame; the median.
async fn round_trips<S: AsyncRead + AsyncWrite + Unpin>(stream: &mut S, rounds: usize) -> Duration {
    let (out, mut back) = ([7u8; FRAME], [0u8; FRAME]);
    let mut times = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        let at = Instant::now();
        stream.write_all(&out).await.unwrap();
        stream.read_exact(&mut back).await.unwrap();
        times.push(at.elapsed());
    }
    median(times)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let quick = !std::env::args().any(|a| a == "--bench");
    let (connects, rounds) = if quick { (20, 200) } else { (500, 20_000) };
    let dir = tempfile::tempdir().unwrap();
    let identity = Identity::load_or_create(dir.path()).unwrap();
    let (acceptor, pin) = (identity.acceptor().unwrap(), identity.pin());

    let plain = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let tls = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let (plain_addr, tls_addr) = (plain.local_addr().unwrap(), tls.local_addr().unwrap());
    tokio::spawn(async move {
        while let Ok((tcp, _)) = plain.accept().await {
            tcp.set_nodelay(true).unwrap();
            tokio::spawn(echo(tcp));
        }
    });
    tokio::spawn(async move {
        while let Ok((tcp, _)) = tls.accept().await {
            tcp.set_nodelay(true).unwrap();
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                if let Ok(stream) = acceptor.accept(tcp).await {
                    echo(stream).await;
                }
            });
        }
    });

    let (mut plain_connect, mut tls_connect) = (Vec::new(), Vec::new());
    for _ in 0..connects {
        let at = Instant::now();
        let tcp = tokio::net::TcpStream::connect(plain_addr).await.unwrap();
        plain_connect.push(at.elapsed());
        drop(tcp);
        let at = Instant::now();
        let tcp = tokio::net::TcpStream::connect(tls_addr).await.unwrap();
        let stream = connector(pin).connect(server_name(), tcp).await.unwrap();
        tls_connect.push(at.elapsed());
        drop(stream);
    }
    let mut tcp = tokio::net::TcpStream::connect(plain_addr).await.unwrap();
    tcp.set_nodelay(true).unwrap();
    let plain_trip = round_trips(&mut tcp, rounds).await;
    let tcp = tokio::net::TcpStream::connect(tls_addr).await.unwrap();
    tcp.set_nodelay(true).unwrap();
    let mut stream = connector(pin).connect(server_name(), tcp).await.unwrap();
    let tls_trip = round_trips(&mut stream, rounds).await;

    let (plain_connect, tls_connect) = (median(plain_connect), median(tls_connect));
    let ratio = |a: Duration, b: Duration| a.as_secs_f64() / b.as_secs_f64().max(1e-9);
    println!(
        "connect: TCP {plain_connect:?}, TLS pinned {tls_connect:?} ({:.1}x, once per session)",
        ratio(tls_connect, plain_connect)
    );
    println!(
        "1 KiB round trip: TCP {plain_trip:?}, TLS pinned {tls_trip:?} ({:.2}x){}",
        ratio(tls_trip, plain_trip),
        if quick { " [quick]" } else { "" }
    );
}
