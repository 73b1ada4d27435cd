//! From clone to a first worker (issue 17): the daemon says what is missing
//! and what to run next, and exposure to ChatGPT is one safe story
//! (`orchestrator expose`, a secret path, no open extra Host).

mod support;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};

use support::{Daemon, http};

fn orchestrator() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_orchestrator"));
    cmd.env_remove("ORCHESTRATOR_MCP_SECRET").env("RUST_LOG", "warn");
    cmd
}

/// The banner's lines up to and including the last `setup:` line.
fn banner(state: &std::path::Path, extra: &[&str]) -> Vec<String> {
    let mut child = orchestrator()
        .args(["serve", "--listen", "127.0.0.1:0", "--state-dir"])
        .arg(state)
        .args(extra)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = Vec::new();
    for line in BufReader::new(child.stdout.take().unwrap()).lines() {
        let line = line.unwrap();
        let done = line.contains("executor(s) paired") || line.contains("no executor is paired");
        lines.push(line);
        if done {
            break;
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    lines
}

#[test]
fn the_banner_names_what_is_missing_and_the_next_step() {
    let dir = tempfile::tempdir().unwrap();
    let text = banner(dir.path(), &[]).join("\n");
    assert!(text.contains("no --app-label") && text.contains("--app-label \""), "{text}");
    assert!(text.contains("no executor is paired") && text.contains("orchestrator pair"), "{text}");
    assert!(text.contains("not exposed") && text.contains("orchestrator expose --host"), "{text}");

    let paired =
        orchestrator().args(["pair", "--executor-id", "ext-1", "--state-dir"]).arg(dir.path()).output().unwrap();
    assert!(paired.status.success());
    let text = banner(dir.path(), &["--app-label", "My Orch"]).join("\n");
    assert!(text.contains("app label \"My Orch\""), "{text}");
    assert!(text.contains("1 executor(s) paired"), "{text}");
}

#[test]
fn an_extra_host_without_a_secret_is_refused_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let out = orchestrator()
        .args(["serve", "--listen", "127.0.0.1:0", "--allowed-host", "tunnel.example", "--state-dir"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(!out.status.success(), "it started");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("orchestrator expose --host tunnel.example"), "{stderr}");
}

/// `orchestrator expose --host tunnel.example --json` on `dir`: what it printed.
fn expose(dir: &std::path::Path) -> serde_json::Value {
    let out =
        orchestrator().args(["expose", "--host", "tunnel.example", "--json", "--state-dir"]).arg(dir).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// `expose` creates an owner-only secret and prints the URL; `serve` with
/// the tunnel's host answers MCP at exactly that path and refuses `/mcp`
/// without the secret or with another one.
#[test]
fn expose_prints_the_url_that_the_daemon_then_answers() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let printed = expose(dir.path());
    let url = printed["url"].as_str().unwrap();
    assert_eq!(printed["serve"], "orchestrator serve --allowed-host tunnel.example");
    let path = url.strip_prefix("https://tunnel.example").unwrap();
    let secret = path.strip_prefix("/s/").and_then(|p| p.strip_suffix("/mcp")).unwrap();
    let mode = std::fs::metadata(dir.path().join("mcp-secret")).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    let again = orchestrator().args(["expose", "--host", "tunnel.example", "--state-dir"]).arg(dir.path()).output();
    assert!(String::from_utf8_lossy(&again.unwrap().stdout).contains(url), "the secret is kept");

    // The Daemon helper passes no secret: serve reads the state directory's.
    let daemon = Daemon::start_with(dir.path(), &["--allowed-host", "tunnel.example"], &[]);
    let init = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}"#;
    let headers = [
        ("Host", "tunnel.example"),
        ("Content-Type", "application/json"),
        ("Accept", "application/json, text/event-stream"),
    ];
    assert_eq!(http(&daemon.addr, "POST", path, &headers, init).0, 200, "the printed URL works");
    assert_eq!(http(&daemon.addr, "POST", "/mcp", &headers, init).0, 401, "not without the secret");
    let wrong = format!("/s/{}/mcp", "x".repeat(secret.len()));
    assert_eq!(http(&daemon.addr, "POST", &wrong, &headers, init).0, 404, "not with another secret");
    // `/executor` through the tunnel's host: security.rs,
    // the_executor_endpoint_is_never_reachable_through_the_exposed_host,
    // and through a real proxy below.
}

/// Through a reverse proxy on loopback standing in for the tunnel: the
/// Python SDK plays root and two workers at the URL `expose` printed, in
/// both protocol modes; `/mcp` without the secret and `/executor` are
/// refused through the tunnel, while a loopback executor still connects.
#[test]
fn the_pasted_url_works_through_a_tunnel_and_the_executor_endpoint_does_not() {
    let dir = tempfile::tempdir().unwrap();
    let printed = expose(dir.path());
    let path = printed["url"].as_str().unwrap().strip_prefix("https://tunnel.example").unwrap().to_owned();
    let daemon = Daemon::start_with(dir.path(), &["--allowed-host", "tunnel.example"], &[]);
    let tunnel = support::Tunnel::start(&daemon.addr, "tunnel.example");
    for mode in ["auto", "legacy"] {
        let out = support::python("flow.py", &[&format!("http://{}{path}", tunnel.addr), mode]);
        assert!(out.contains(&format!("flow over {mode}: ok")), "{out}");
    }
    let init = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}"#;
    let headers = [("Content-Type", "application/json"), ("Accept", "application/json, text/event-stream")];
    assert_eq!(http(&tunnel.addr, "POST", "/mcp", &headers, init).0, 401, "not without the secret");
    let upgrade = |addr: &str, path: &str| support::upgrade_status(addr, path, None, &[]);
    assert_eq!(upgrade(&tunnel.addr, "/executor"), 403, "no executor through the tunnel");
    let around = format!("{}/../../../executor", path.trim_end_matches("/mcp"));
    assert_ne!(upgrade(&tunnel.addr, &around), 101, "nor around the secret path");
    assert_eq!(upgrade(&daemon.addr, "/executor"), 101, "a loopback executor still connects");
}

/// `serve --oauth` for hosts that require OAuth 2.1, through the tunnel:
/// the Python SDK's own OAuth client discovers everything from a 401,
/// registers, gets the owner's consent (a wrong owner key and another
/// site's form are refused) and uses the tools with the token, in both
/// protocol modes. Unauthenticated `/mcp` names the resource metadata;
/// `/executor` stays unreachable; the registration outlives a restart.
#[test]
fn oauth_through_a_tunnel_with_the_python_sdk() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let printed = expose(dir.path());
    let owner_key = printed["oauth"]["ownerKey"].as_str().unwrap().to_owned();
    assert_eq!(printed["oauth"]["serve"], "orchestrator serve --allowed-host tunnel.example --oauth");
    let tunnel = support::Tunnel::bind("tunnel.example");
    let public = format!("http://{}", tunnel.addr);
    let args = ["--allowed-host", "tunnel.example", "--oauth", "--public-url", &public];
    let daemon = Daemon::start_with(dir.path(), &args, &[]);
    tunnel.forward_to(&daemon.addr);
    for mode in ["auto", "legacy"] {
        let out = support::python("oauth_flow.py", &[&format!("{public}/mcp"), &owner_key, mode]);
        assert!(out.contains(&format!("oauth over {mode}: ok")), "{out}");
    }
    let r = support::request(&tunnel.addr, "POST", "/mcp", &[("Content-Type", "application/json")], "{}");
    assert_eq!(r.status, 401);
    let challenge = r.header("www-authenticate").unwrap_or_default();
    let metadata_url = format!("{public}/.well-known/oauth-protected-resource/mcp");
    assert!(challenge.contains(&format!("resource_metadata=\"{metadata_url}\"")), "{challenge}");
    let (status, body) = http(&tunnel.addr, "GET", "/.well-known/oauth-protected-resource/mcp", &[], "");
    assert_eq!(status, 200);
    let resource: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(resource["resource"], format!("{public}/mcp"));
    assert_eq!(resource["authorization_servers"][0], public);
    let wrong = [("Authorization", "Bearer not-a-token"), ("Content-Type", "application/json")];
    assert_eq!(http(&tunnel.addr, "POST", "/mcp", &wrong, "{}").0, 401, "an unknown token");
    assert_eq!(support::upgrade_status(&tunnel.addr, "/executor", None, &[]), 403, "no executor through the tunnel");
    assert_eq!(http(&daemon.addr, "GET", "/authorize", &[("Host", "evil.example")], "").0, 403, "allowed hosts only");

    let kept = dir.path().join(server::oauth::CLIENTS_FILE);
    assert_eq!(std::fs::metadata(&kept).unwrap().permissions().mode() & 0o777, 0o600);
    let clients: Vec<serde_json::Value> = serde_json::from_slice(&std::fs::read(&kept).unwrap()).unwrap();
    assert_eq!(clients.len(), 2, "one registration per flow");
    drop(daemon);
    let daemon = Daemon::start_with(dir.path(), &args, &[]);
    let client_id = clients[0]["client_id"].as_str().unwrap();
    let authorize = format!(
        "/authorize?response_type=code&client_id={client_id}&redirect_uri=http%3A%2F%2F127.0.0.1%3A9%2Fcallback\
         &scope=mcp&state=s&code_challenge=E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM&code_challenge_method=S256"
    );
    let (status, page) = http(&daemon.addr, "GET", &authorize, &[], "");
    assert_eq!(status, 200, "the kept client is known after a restart: {page}");
    assert!(page.contains("Allow an MCP client"), "{page}");
}

/// A worker spawned while the setup is incomplete says so in `worker_list`
/// and `run_get`: the missing app label first, then the missing executor,
/// each with the next step (instead of a bare `launch_requested`).
#[test]
fn worker_views_name_the_missing_setup_and_the_next_step() {
    use serde_json::json;
    for (extra, on, step) in
        [(&[][..], "app_setup", "--app-label"), (&["--app-label", "My Orch"][..], "executor", "orchestrator pair")]
    {
        let dir = tempfile::tempdir().unwrap();
        let daemon = Daemon::start_with(dir.path(), extra, &[]);
        let root = support::Mcp::connect(&daemon.addr);
        let cap = root.ok("run_create", json!({"title": "first run"}))["root_capability"].as_str().unwrap().to_owned();
        root.ok("worker_spawn", json!({"capability": cap, "name": "w", "assignment": {"objective": "o"}}));
        // `orchestrator status` shows the same, in a table and as JSON.
        let status = |json: bool| {
            let mut cmd = orchestrator();
            cmd.args(["status", "--addr", &daemon.addr, "--state-dir"]).arg(dir.path());
            if json {
                cmd.arg("--json");
            }
            let out = cmd.output().unwrap();
            assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
            String::from_utf8(out.stdout).unwrap()
        };
        let table = status(false);
        assert!(table.contains("/root/w") && table.contains(&format!("waiting for {on}")), "{table}");
        let report: serde_json::Value = serde_json::from_str(&status(true)).unwrap();
        assert_eq!(report["runs"][0]["title"], "first run");
        for tool in ["worker_list", "run_get"] {
            let out = root.ok(tool, json!({"capability": cap}));
            let worker = out["workers"].as_array().unwrap().iter().find(|w| w["path"] != "/root").unwrap().clone();
            assert_eq!(worker["waiting_for"]["on"], on, "{tool}: {worker}");
            let next = worker["waiting_for"]["next_step"].as_str().unwrap();
            assert!(next.contains(step), "{tool}: {next}");
        }
    }
}

/// `service install` writes a systemd user unit that `systemd-analyze
/// verify` accepts and a launchd agent that a plist parser reads; bad
/// `serve` arguments are caught at install time; `uninstall` removes it.
#[test]
fn service_files_are_valid_for_their_managers() {
    let home = tempfile::tempdir().unwrap();
    let install = |extra: &[&str]| {
        let mut cmd = orchestrator();
        cmd.env("HOME", home.path()).env_remove("XDG_STATE_HOME").args(["service", "install"]).args(extra);
        cmd.output().unwrap()
    };
    let out = install(&["--for", "systemd", "--", "--app-label", "My Orch 100%", "--listen", "127.0.0.1:7777"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let unit = home.path().join(".config/systemd/user/chatgpt-orchestrator.service");
    let text = std::fs::read_to_string(&unit).unwrap();
    assert!(text.contains("serve --app-label \"My Orch 100%%\" --listen 127.0.0.1:7777"), "{text}");
    let verify = Command::new("systemd-analyze")
        .arg("verify")
        .arg(&unit)
        .output()
        .expect("systemd-analyze (CI installs systemd)");
    assert!(
        verify.status.success(),
        "systemd-analyze verify: {}{}",
        String::from_utf8_lossy(&verify.stdout),
        String::from_utf8_lossy(&verify.stderr)
    );

    let plist = install(&["--for", "launchd", "--print", "--", "--app-label", "A&B <x>"]);
    assert!(plist.status.success());
    let path = home.path().join("agent.plist");
    std::fs::write(&path, &plist.stdout).unwrap();
    let parsed = Command::new("python3")
        .args(["-c", "import plistlib, sys, json; print(json.dumps(plistlib.load(open(sys.argv[1], 'rb'))))"])
        .arg(&path)
        .output()
        .unwrap();
    assert!(parsed.status.success(), "{}", String::from_utf8_lossy(&parsed.stderr));
    let agent: serde_json::Value = serde_json::from_slice(&parsed.stdout).unwrap();
    assert_eq!(agent["Label"], "com.chatgpt-orchestrator");
    let args: Vec<&str> = agent["ProgramArguments"].as_array().unwrap().iter().map(|a| a.as_str().unwrap()).collect();
    assert_eq!(&args[1..4], ["serve", "--app-label", "A&B <x>"]);
    assert_eq!(args[4], "--state-dir", "the state directory is pinned");
    assert!(Path::new(args[5]).is_absolute(), "{args:?}");
    assert_eq!(agent["KeepAlive"]["SuccessfulExit"], false);

    // The CDP host agent is a service of its own, its paths pinned as absolute ones.
    let out = install(&[
        "--carrier-agent",
        "--for",
        "systemd",
        "--",
        "--cdp",
        "--credential-file",
        "agent.credential",
        "--channel",
        "chrome",
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let agent_unit = home.path().join(".config/systemd/user/chatgpt-orchestrator-carrier.service");
    let text = std::fs::read_to_string(&agent_unit).unwrap();
    assert!(text.contains("carrier-agent --cdp --credential-file /"), "{text}");
    assert!(text.contains("--bundle /") && text.contains("--state-file /"), "{text}");
    let verify = Command::new("systemd-analyze").arg("verify").arg(&agent_unit).output().unwrap();
    assert!(verify.status.success(), "{}", String::from_utf8_lossy(&verify.stderr));
    let bad = install(&["--carrier-agent", "--for", "systemd", "--", "--cdp"]);
    assert!(!bad.status.success(), "the agent's missing credential is caught at install time");

    let bad = install(&["--for", "systemd", "--", "--no-such-flag"]);
    assert!(!bad.status.success(), "a typo is caught at install time");
    let removed = orchestrator().env("HOME", home.path()).args(["service", "uninstall", "--for", "systemd"]).output();
    assert!(removed.unwrap().status.success());
    assert!(!unit.exists());
}

/// `mcp-stdio` beside a running `serve` relays to it: a worker spawned by
/// a stdio client (the Python SDK, both protocol modes) launches through
/// the executor paired with the daemon, once. With no daemon running,
/// `mcp-stdio` says plainly what it can and cannot do.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stdio_client_beside_a_running_daemon_launches_workers_through_its_executor() {
    use fake_executor::{FakeConfig, FakeExecutor};
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().to_str().unwrap().to_owned();
    let alone = orchestrator().args(["mcp-stdio", "--state-dir", &state]).stdin(Stdio::null()).output().unwrap();
    let said = String::from_utf8_lossy(&alone.stderr);
    assert!(said.contains("no daemon runs on") && said.contains("no executor can connect"), "{said}");

    let daemon = Daemon::start_with(dir.path(), &["--app-label", "My Orch"], &[]);
    let fake = FakeExecutor::start(FakeConfig::new(
        support::ws_url(&daemon),
        support::credential(dir.path(), "ext-1"),
        "ext-1",
    ));
    let bin = env!("CARGO_BIN_EXE_orchestrator");
    let mut workers = Vec::new();
    for mode in ["legacy", "auto"] {
        let script = tokio::task::spawn_blocking({
            let state = state.clone();
            move || support::python("stdio_relay.py", &[bin, &state, mode])
        });
        let out = script.await.unwrap();
        let line = out.lines().find(|l| l.starts_with(&format!("stdio relay ({mode}): ok"))).expect(&out);
        workers.push(line.split_whitespace().nth(4).unwrap().to_owned());
    }
    let created: Vec<String> = fake.stats().conversations.iter().map(|(w, _)| w.to_string()).collect();
    assert_eq!(created, workers, "each stdio-spawned worker got exactly one conversation from the daemon's executor");
}

/// Issue 29 item 11, the `expose` trap: after `expose`, a daemon started
/// without `--allowed-host` still guards `/mcp` with the secret. The
/// banner, `status` and `doctor` now all say so and how a local client
/// connects (before, they said "not exposed: run expose", and a loopback
/// client met a bare 401); the way they name works.
#[test]
fn a_secret_without_an_exposed_host_is_said_as_it_is_everywhere() {
    let dir = tempfile::tempdir().unwrap();
    let printed = expose(dir.path());
    let secret = printed["url"].as_str().unwrap().rsplit("/s/").next().unwrap().trim_end_matches("/mcp").to_owned();
    let said = "an MCP secret is set";
    let text = banner(dir.path(), &[]).join("\n");
    assert!(text.contains(said) && text.contains("/s/<secret>/mcp") && text.contains("--allowed-host"), "{text}");
    assert!(!text.contains(&secret), "never the secret: {text}");

    let daemon = Daemon::start_with(dir.path(), &[], &[]);
    let status =
        orchestrator().args(["status", "--addr", &daemon.addr, "--state-dir"]).arg(dir.path()).output().unwrap();
    let status = String::from_utf8_lossy(&status.stdout);
    assert!(status.contains(said) && status.contains("Bearer"), "{status}");
    let doctor = orchestrator()
        .args(["doctor", "--json", "--mcp-url", &daemon.mcp_url(), "--state-dir"])
        .arg(dir.path())
        .output()
        .unwrap();
    let doctor = String::from_utf8_lossy(&doctor.stdout);
    assert!(doctor.contains(said), "{doctor}");

    // The two ways a local client connects, as said; and the bare one refused.
    let init = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}"#;
    let mut headers = vec![("Content-Type", "application/json"), ("Accept", "application/json, text/event-stream")];
    assert_eq!(http(&daemon.addr, "POST", &format!("/s/{secret}/mcp"), &headers, init).0, 200);
    assert_eq!(http(&daemon.addr, "POST", "/mcp", &headers, init).0, 401);
    let bearer = format!("Bearer {secret}");
    headers.push(("Authorization", &bearer));
    assert_eq!(http(&daemon.addr, "POST", "/mcp", &headers, init).0, 200);
}

/// Issue 29 item 14: `status` with no daemon says what to do (exit 2), and
/// `status --json` prints a document saying so instead of nothing.
#[test]
fn status_without_a_daemon_says_so_in_text_and_json() {
    let dir = tempfile::tempdir().unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let addr = format!("127.0.0.1:{port}");
    let text = orchestrator().args(["status", "--addr", &addr, "--state-dir"]).arg(dir.path()).output().unwrap();
    assert_eq!(text.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&text.stderr).contains("orchestrator serve"), "{text:?}");
    let json =
        orchestrator().args(["status", "--json", "--addr", &addr, "--state-dir"]).arg(dir.path()).output().unwrap();
    assert_eq!(json.status.code(), Some(2));
    let doc: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(doc["running"], false);
    assert!(doc["next"].as_str().unwrap().contains("orchestrator serve"), "{doc}");
}

/// Issue 29 item 8: the agent creates its state directory owner-only (SPEC
/// §9: 0700), refuses a credential file others can read, and dials no URL
/// but a loopback executor endpoint, before anything leaves the process.
#[test]
fn the_agent_keeps_its_state_owner_only_and_its_credential_to_itself() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let credential = dir.path().join("cdp.credential");
    std::fs::write(&credential, "exc1.cdp-laptop.Zm9vYmFyYmF6cXV4\n").unwrap();
    let agent = |extra: &[&str], state: &Path| {
        orchestrator()
            .args(["carrier-agent", "--cdp", "--user-data-dir"])
            .arg(dir.path().join("no-browser"))
            .arg("--credential-file")
            .arg(&credential)
            .arg("--state-dir")
            .arg(state)
            .args(["--bundle", "/nonexistent/pkg"])
            .args(extra)
            .output()
            .unwrap()
    };
    std::fs::set_permissions(&credential, std::fs::Permissions::from_mode(0o644)).unwrap();
    let out = agent(&[], &dir.path().join("s0"));
    assert!(!out.status.success() && String::from_utf8_lossy(&out.stderr).contains("chmod 600"), "{out:?}");
    std::fs::set_permissions(&credential, std::fs::Permissions::from_mode(0o600)).unwrap();
    for url in ["ws://evil.example:7777/executor", "wss://127.0.0.1:7777/executor", "ws://127.0.0.1:7777/"] {
        let out = agent(&["--daemon", url], &dir.path().join("s1"));
        assert!(!out.status.success() && String::from_utf8_lossy(&out.stderr).contains("--daemon"), "{url}: {out:?}");
    }
    // It gets as far as its bundle (absent here), with its state directory made owner-only.
    let state = dir.path().join("fresh/state");
    let out = agent(&[], &state);
    assert!(!out.status.success(), "no bundle: {out:?}");
    let mode = std::fs::metadata(&state).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o700, "{mode:o}");
}

/// Issue 46: `orchestrator setup` stops at its first broken link with what
/// is wrong and the one next step, each through the binary (no browser):
/// no terminal and no `--yes`, no package, a running daemon set up
/// otherwise, a package that does not match the bundle's sums, and no
/// browser asking within the wait. (Every link proven: the Chromium e2e.)
#[test]
fn setup_stops_at_the_first_broken_link_with_its_next_step() {
    use sha2::{Digest, Sha256};
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let _stop = e2e::setup::StopDaemon(state.clone());
    let listen = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().to_string();
    let profile = dir.path().join("profile");
    let setup = |extra: &[&str]| {
        let out = orchestrator()
            .args(["setup", "--yes", "--browser", "chromium", "--wait-s", "10", "--listen", &listen])
            .arg("--state-dir")
            .arg(&state)
            .arg("--chromium-user-data-dir")
            .arg(&profile)
            .args(extra)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        (out.status.code(), String::from_utf8_lossy(&out.stdout).into_owned())
    };
    let broken = |out: &str, link: &str, what: &str, next: &str| {
        let at = out.find(&format!("  FAIL  {link:<12} {what}")).unwrap_or_else(|| panic!("no broken {link}: {out}"));
        let step = out[at..].lines().nth(1).unwrap_or_default();
        assert!(step.starts_with("        next: ") && step.contains(next), "{link}'s next step: {out}");
    };

    let asked = orchestrator().arg("setup").arg("--state-dir").arg(&state).stdin(Stdio::null()).output().unwrap();
    assert!(!asked.status.success());
    assert!(String::from_utf8_lossy(&asked.stderr).contains("run it on a terminal, or pass --yes"));

    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let (code, out) = setup(&["--bundle", empty.to_str().unwrap(), "--app-label", "Orch"]);
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("  ok    daemon       started at"), "{out}");
    broken(&out, "extension", "cannot read", "pass --bundle <the release bundle's directory>");

    let (code, out) = setup(&["--bundle", empty.to_str().unwrap(), "--app-label", "Other"]);
    assert_eq!(code, Some(1), "{out}");
    broken(&out, "daemon", "the running daemon's app label is \"Orch\", not \"Other\"", "stop the daemon");
    let (code, out) = setup(&["--expose-host", "orch.example.test"]);
    assert_eq!(code, Some(1), "{out}");
    broken(&out, "daemon", "the running daemon does not answer for orch.example.test", "stop the daemon");

    let crx = e2e::packed_crx().unwrap();
    let name = crx.file_name().unwrap().to_str().unwrap().to_owned();
    let bundle = dir.path().join("bundle");
    std::fs::create_dir(&bundle).unwrap();
    std::fs::copy(&crx, bundle.join(&name)).unwrap();
    std::fs::write(bundle.join("SHA256SUMS"), format!("{}  {name}\n", "0".repeat(64))).unwrap();
    let (_, out) = setup(&["--bundle", bundle.to_str().unwrap()]);
    broken(
        &out,
        "extension",
        &format!("{name} does not match the bundle's SHA256SUMS"),
        "download the release bundle again",
    );

    let sum: String = Sha256::digest(std::fs::read(&crx).unwrap()).iter().map(|b| format!("{b:02x}")).collect();
    std::fs::write(bundle.join("SHA256SUMS"), format!("{sum}  {name}\n")).unwrap();
    let (code, out) = setup(&["--bundle", bundle.to_str().unwrap()]);
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("matches SHA256SUMS"), "{out}");
    broken(
        &out,
        "paired",
        "no Chromium asked to pair within 10 s",
        &format!("set the endpoint to ws://{listen}/executor"),
    );
    // What it left for Chromium: the package kept in the state directory, named in the profile.
    let named = std::fs::read_dir(profile.join("External Extensions")).unwrap().next().unwrap().unwrap().path();
    let named: serde_json::Value = serde_json::from_slice(&std::fs::read(named).unwrap()).unwrap();
    assert_eq!(named["external_crx"], state.join("extension").join(&name).to_str().unwrap());
    assert_eq!(named["external_version"], env!("CARGO_PKG_VERSION"));
}
