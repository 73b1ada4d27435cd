//! Two hosts in one pool: a second CDP host agent and its own browser run in
//! a network namespace this test creates (a host of its own: its own
//! loopback, reaching the daemon's machine only over a veth link), as an
//! operator would run `orchestrator carrier-agent` on another machine. No
//! tunnel (issue 47): the agent dials the daemon's TLS executor endpoint
//! (`serve --executor-listen`) with the certificate `pair --remote` pinned,
//! and plain TCP from there gets no WebSocket. ensure(4) places workers on
//! both hosts; killing one host's browser affects only that host's workers.

mod support;

use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(40);

fn orchestrator() -> &'static std::path::Path {
    std::path::Path::new(env!("CARGO_BIN_EXE_orchestrator"))
}

/// A network namespace with a veth link to this host: `host_ip` on our
/// side, `ns_ip` inside. Deleted (with its link) on drop.
struct Host {
    name: String,
    host_ip: String,
}

fn ip(args: &[&str]) {
    let out = Command::new("ip").args(args).output().expect("iproute2");
    assert!(out.status.success(), "ip {args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

impl Host {
    fn create() -> Host {
        let n = std::process::id() % 250;
        let (name, outside, inside) = (format!("orch-h{n}"), format!("vo{n}"), format!("vi{n}"));
        let (host_ip, ns_ip) = (format!("10.231.{n}.1"), format!("10.231.{n}.2"));
        let _ = Command::new("ip").args(["netns", "del", &name]).output();
        ip(&["netns", "add", &name]);
        let host = Host { name: name.clone(), host_ip: host_ip.clone() };
        ip(&["link", "add", &outside, "type", "veth", "peer", "name", &inside]);
        ip(&["link", "set", &inside, "netns", &name]);
        ip(&["addr", "add", &format!("{host_ip}/30"), "dev", &outside]);
        ip(&["link", "set", &outside, "up"]);
        ip(&["netns", "exec", &name, "ip", "addr", "add", &format!("{ns_ip}/30"), "dev", &inside]);
        ip(&["netns", "exec", &name, "ip", "link", "set", &inside, "up"]);
        ip(&["netns", "exec", &name, "ip", "link", "set", "lo", "up"]);
        host
    }

    /// `program` run inside the namespace.
    fn command(&self, program: &std::path::Path) -> Command {
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", &self.name]).arg(program);
        cmd
    }

    /// `program` run inside the namespace on a machine named `hostname`
    /// (a UTS namespace of its own: another machine has another name).
    fn command_named(&self, hostname: &str, program: &std::path::Path) -> Command {
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", &self.name, "unshare", "--uts", "sh", "-c"])
            .arg(format!("hostname {hostname} && exec \"$@\""))
            .arg("sh")
            .arg(program);
        cmd
    }
}

impl Drop for Host {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.name]).output();
    }
}

/// Forwards TCP from `listen` to `to` (a tunnel's two ends).
async fn forward(listen: SocketAddr, to: SocketAddr) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind(listen).await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut inbound, _)) = listener.accept().await {
            tokio::spawn(async move {
                if let Ok(mut outbound) = tokio::net::TcpStream::connect(to).await {
                    let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                }
            });
        }
    });
    addr
}

/// Inside the namespace: a plain (not TLS) WebSocket upgrade to the
/// daemon's remote endpoint; prints `refused` unless it is switched.
const PLAIN_UPGRADE: &str = r#"
import socket, sys
host, port = sys.argv[1].rsplit(":", 1)
s = socket.create_connection((host, int(port)), timeout=5)
s.sendall(b"GET /executor HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"
          b"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n")
try:
    reply = s.recv(4096)
except OSError:
    reply = b""
print("switched" if b" 101 " in reply else "refused")
"#;

/// The three commands of docs/cdp-carrier.md's "A second host, no tunnel":
/// serve, pair, the agent. None of them is a tunnel.
fn second_host_commands() -> [String; 3] {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/cdp-carrier.md")).unwrap();
    let start = doc.find("## A second host, no tunnel").expect("the section");
    let end = doc[start + 3..].find("\n## ").map_or(doc.len(), |i| start + 3 + i);
    let commands = e2e::docs::sh_commands(&doc[start..end]);
    assert!(commands.iter().all(|c| !c.contains("ssh")), "{commands:?}");
    commands.try_into().unwrap_or_else(|c: Vec<String>| panic!("three commands, not {c:?}"))
}

struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn column(status: &Value, key: &str) -> Vec<String> {
    status["slots"].as_array().unwrap().iter().map(|s| s[key].as_str().unwrap_or_default().to_owned()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_hosts_share_the_pool_and_one_losing_its_browser_affects_only_its_workers() {
    let host = Host::create();
    // The daemon's TLS executor endpoint, on our end of the link.
    let remote = std::net::TcpListener::bind(format!("{}:0", host.host_ip)).unwrap().local_addr().unwrap().to_string();
    let args =
        ["--pool-pacing-ms", "40", "--max-launches", "4", "--max-active-workers", "8", "--executor-listen", &remote];
    let world = e2e::cdp::CdpWorld::start(orchestrator(), &args).await.unwrap();
    // The browser inside reaches chatgpt.com (fakechat) at our end of the link.
    let site = forward(format!("{}:0", host.host_ip).parse().unwrap(), world.fake.addr).await;

    // From the other host, plain TCP to the endpoint gets no WebSocket.
    let plain = host.command(std::path::Path::new("python3")).args(["-c", PLAIN_UPGRADE, &remote]).output().unwrap();
    assert_eq!(String::from_utf8_lossy(&plain.stdout).trim(), "refused", "{plain:?}");

    // Host B's browser, in the namespace, with remote debugging on a fresh profile.
    let b = world.dir.path().join("host-b");
    let profile = b.join("profile");
    let chromium = host.command(&e2e::browser::chromium().unwrap());
    let mut browser_b = Killed(e2e::cdp::spawn_with(chromium, &site.to_string(), &b, &profile).unwrap());

    // Host B's agent, as `orchestrator carrier-agent` runs on another
    // machine, with the credential `pair --remote` wrote on the daemon's:
    // the commands docs/cdp-carrier.md gives, with this test's address,
    // state directory, file and browser put in.
    let [serve, pair, agent] = second_host_commands();
    assert!(serve.contains("--executor-listen 10.0.0.1:7443"), "{serve}");
    let credential = b.join("host-b.json");
    std::fs::create_dir_all(&b).unwrap();
    let doc_words = |line: &str| {
        let line = line.replace("10.0.0.1:7443", &remote).replace("host-b.json", credential.to_str().unwrap());
        e2e::docs::shell_words(&line).unwrap().into_iter().skip(1).collect::<Vec<_>>()
    };
    let paired = Command::new(orchestrator())
        .args(doc_words(&pair))
        .arg("--state-dir")
        .arg(world.dir.path().join("state"))
        .output()
        .unwrap();
    assert!(paired.status.success(), "{}", String::from_utf8_lossy(&paired.stderr));
    let agent_words: Vec<String> = doc_words(&agent);
    let at = agent_words.iter().position(|w| w == "--channel").expect("the doc's agent names a channel");
    let _agent_b = Killed(
        host.command_named("host-b", orchestrator())
            .args(&agent_words[..at])
            .arg("--user-data-dir")
            .arg(&profile)
            .arg("--bundle")
            .arg(e2e::chromium_dist().unwrap().join("pkg"))
            .arg("--state-file")
            .arg(b.join("agent.json"))
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );

    let root = support::Mcp::connect(&world.daemon.addr);
    let cap = root.ok("run_create", json!({"title": "two hosts"}))["root_capability"].as_str().unwrap().to_owned();
    let call = |tool: &str, mut args: Value| {
        args["capability"] = json!(cap);
        root.ok(tool, args)
    };
    // Both executors are live before the pool places anything (as
    // `orchestrator status` shows them).
    let status = || -> Value {
        let out = Command::new(orchestrator())
            .args(["status", "--json", "--state-dir"])
            .arg(world.dir.path().join("state"))
            .output()
            .unwrap();
        serde_json::from_slice::<Value>(&out.stdout).unwrap_or_default()
    };
    let connected = || status()["executors_connected"].clone();
    let until = tokio::time::Instant::now() + WAIT;
    while connected().as_array().map_or(0, Vec::len) < 2 {
        assert!(tokio::time::Instant::now() < until, "host B's agent never joined: {}", connected());
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    call("runtime_ensure", json!({"desired_workers": 4}));
    let until = tokio::time::Instant::now() + WAIT;
    let ready = loop {
        let s = call("runtime_status", json!({}));
        let slots = s["slots"].as_array().unwrap();
        if s["state"] == "READY" && slots.len() == 4 && slots.iter().all(|x| x["admitted"] == true) {
            break s;
        }
        assert!(tokio::time::Instant::now() < until, "never READY with 4: {s:#}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let executors = column(&ready, "executor_id");
    let mut hosts = executors.clone();
    hosts.sort();
    hosts.dedup();
    assert_eq!(hosts.len(), 2, "workers on both hosts: {executors:?}");
    assert!(hosts.iter().all(|h| executors.iter().filter(|e| *e == h).count() == 2), "two each: {executors:?}");
    let on_a: Vec<String> = world.agent.targets();
    assert_eq!(on_a.len(), 2);
    // Each slot names its host (runtime_status), and `orchestrator hosts`
    // lists both machines with two workers each.
    let slot_hosts = column(&ready, "host");
    assert_eq!(slot_hosts.iter().filter(|h| *h == "host-b").count(), 2, "{slot_hosts:?}");
    assert_eq!(slot_hosts.iter().filter(|h| !h.is_empty() && *h != "host-b").count(), 2, "{slot_hosts:?}");
    let listed = Command::new(orchestrator())
        .args(["hosts", "--json", "--state-dir"])
        .arg(world.dir.path().join("state"))
        .output()
        .unwrap();
    let listed: Value = serde_json::from_slice(&listed.stdout).unwrap();
    let hosts = listed.as_array().unwrap();
    assert_eq!(hosts.len(), 2, "{listed:#}");
    for h in hosts {
        assert_eq!(h["connected"], true, "{h:#}");
        assert_eq!(h["workers"].as_array().unwrap().len(), 2, "{h:#}");
        assert_eq!((h["load"].as_u64(), h["capacity"].as_u64()), (Some(2), Some(8)), "{h:#}");
    }
    assert!(hosts.iter().any(|h| h["host"] == "host-b"), "{listed:#}");
    // The pool sees each host: its name, browser, load and capacity (v2 `hello`).
    let executors = status()["executors"].clone();
    assert_eq!(executors.as_array().map_or(0, Vec::len), 2, "{executors:#}");
    for e in executors.as_array().unwrap() {
        assert!(e["host"].as_str().is_some_and(|h| !h.is_empty()), "{e:#}");
        assert!(e["browser"].as_str().is_some_and(|b| b.contains("Chrome")), "{e:#}");
        assert_eq!((e["load"].as_u64(), e["capacity"].as_u64()), (Some(2), Some(8)), "{e:#}");
    }

    // Host B's browser dies: only B's workers are out of reach.
    let _ = browser_b.0.kill();
    let _ = browser_b.0.wait();
    let until = tokio::time::Instant::now() + WAIT;
    let after = loop {
        let s = call("runtime_status", json!({}));
        if s["reasons"].as_array().unwrap().contains(&json!("BROWSER_CONTROL_UNAVAILABLE")) {
            break s;
        }
        assert!(tokio::time::Instant::now() < until, "host B's loss never surfaced: {s:#}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let run = call("run_get", json!({}));
    let workers = run["workers"].as_array().unwrap();
    for slot in ready["slots"].as_array().unwrap() {
        let worker = workers.iter().find(|w| w["worker_id"] == slot["worker_id"]).unwrap();
        assert_ne!(worker["state"], "failed", "a lost browser is no worker's failure: {worker:#}");
    }
    assert_eq!(world.agent.targets(), on_a, "host A's targets are untouched");
    let host_a = &world.config.executor_id;
    let a_slots: Vec<&Value> =
        after["slots"].as_array().unwrap().iter().filter(|s| s["executor_id"] == host_a.as_str()).collect();
    assert_eq!(a_slots.len(), 2);
    for slot in a_slots {
        assert!(slot["health"] == "parked" && slot["can_act"] == true, "host A's worker is unaffected: {slot:#}");
    }
}
