//! The canary, rehearsed on fakechat through every carrier with the
//! product's own runner (`orchestrator canary run`, a separate process):
//! docs/canary.md followed as written through the CDP carrier and through
//! the extension in Chromium to the final claim (`e2e::canary_docs`),
//! G1D–G6 without G0 through the CDP carrier (G6's own claim, never the
//! final one), G1D–G3 through the extension in Firefox; the planted-fault
//! table, each fault stopping the runner at its gate with its reason; and a
//! receipt edited after the run refused by `canary show`. Each chain stays
//! under the target directory (`canary-receipts/<test>`) as a CI artifact.

use std::path::{Path, PathBuf};

use e2e::canary::{Carrier, Options, Planted, Rehearsal};
use fakechat::hub::RequestIds;
use serde_json::Value;

fn orchestrator() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_orchestrator"))
}

/// One browser rig at a time: two on two cores starve each other's timing.
static ONE_BROWSER: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// `<target dir>/canary-receipts/<name>`, emptied.
fn receipts(name: &str) -> PathBuf {
    let dir = receipts_dir(name);
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

async fn rehearse(name: &str, carrier: Carrier, gates: Option<&str>, planted: Option<Planted>) -> Rehearsal {
    rehearse_with(name, carrier, gates, planted, &[]).await
}

async fn rehearse_with(
    name: &str,
    carrier: Carrier,
    gates: Option<&str>,
    planted: Option<Planted>,
    run_args: &[&str],
) -> Rehearsal {
    let _one = ONE_BROWSER.lock().await;
    let options = Options {
        orchestrator: orchestrator().to_owned(),
        receipts: receipts(name),
        carrier,
        gates: gates.map(str::to_owned),
        planted,
        run_args: run_args.iter().map(|a| (*a).to_owned()).collect(),
        // Admitting pool workers on their capability alone needs a host
        // that keeps one MCP session per conversation.
        sessions: run_args.contains(&"capability_only"),
    };
    let out = e2e::canary::rehearse(options).await.unwrap_or_else(|e| panic!("{name}: {e:#}"));
    eprintln!("{name}: {:.1} s\n{:#}", out.elapsed.as_secs_f64(), out.show);
    for gate in out.show["gates"].as_array().into_iter().flatten() {
        eprintln!("{name}: {} {} in {} ms", gate["gate"], gate["stop_reason"], gate["elapsed_ms"]);
    }
    out
}

fn gate<'a>(show: &'a Value, name: &str) -> &'a Value {
    show["gates"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["gate"] == name)
        .unwrap_or_else(|| panic!("no {name}: {show:#}"))
}

/// Every gate asked for passed, with zero manual interactions, duplicates
/// and cross-attributions anywhere in the chain, on this machine's OS.
fn assert_all_passed(out: &Rehearsal, gates: &[&str]) {
    assert_eq!(out.code, 0, "{:#}", out.show);
    assert_eq!(out.show["stopped"], Value::Null);
    assert_eq!(out.show["platform"]["os"], std::env::consts::OS, "{:#}", out.show["platform"]);
    let seen: Vec<&str> = out.show["gates"].as_array().unwrap().iter().filter_map(|g| g["gate"].as_str()).collect();
    assert_eq!(seen, gates);
    for g in out.show["gates"].as_array().unwrap() {
        assert_eq!(g["verdict"], "pass", "{g:#}");
        for count in ["manual_interactions", "duplicates", "cross_attributions"] {
            assert_eq!(g["counts"][count], 0, "{count} in {g:#}");
        }
    }
    // G2: three distinct conversations, a repeat created nothing; G3 (if run) sent one prompt per worker.
    assert_eq!(gate(&out.show, "G2")["counts"]["conversations"], 3);
    assert_eq!(gate(&out.show, "G2")["counts"]["prompts_sent"], 3, "three bootstraps");
    if gates.contains(&"G3") {
        assert_eq!(gate(&out.show, "G3")["counts"]["prompts_sent"], 3, "one task each");
    }
}

/// docs/canary.md followed as written (issue 45): its commands from
/// `expose` to `verify`, the daemon exposed behind a secret, the carrier
/// paired as the page and `deploy` say, the person at the runner's
/// terminal; the full gate set reaches the final claim, `canary stop`
/// retires what the run left, teardown leaves nothing listening.
async fn follow_the_page(name: &str, carrier: Carrier) -> e2e::canary_docs::Followed {
    let _one = ONE_BROWSER.lock().await;
    let out = e2e::canary_docs::follow(orchestrator(), carrier).await.unwrap_or_else(|e| panic!("{name}: {e:#}"));
    eprintln!("{name}: {:.1} s\n{}\n{:#}", out.elapsed.as_secs_f64(), out.ran, out.show);
    assert_eq!(out.code, 0, "{}\n{:#}", out.ran, out.show);
    let faults: Vec<&str> = out.faults.iter().filter_map(|f| f["fault"].as_str()).collect();
    assert_eq!(faults, ["person_chat", "navigate", "lose_target", "restart_browser"], "G0, G4 and G6 at the terminal");
    let as_rehearsal = Rehearsal {
        code: out.code,
        show: out.show.clone(),
        elapsed: out.elapsed,
        status_after: Value::Null,
        stop_said: Vec::new(),
    };
    assert_all_passed(&as_rehearsal, &["G1D", "G0", "G2", "G3", "G4", "G5", "G6"]);
    let last = canary::final_claim(std::env::consts::OS);
    assert_eq!(out.show["claim"], format!("{} {last}", canary::REHEARSAL_PREFIX));
    assert_eq!(out.show["rehearsal"], true, "fakechat is never a live claim");
    assert_eq!(gate(&out.show, "G6")["counts"]["prompts_sent"], 0, "no blind replay");
    assert!(out.shown.contains(&format!("Claim reached: {} {last}", canary::REHEARSAL_PREFIX)), "{}", out.shown);
    assert!(out.verified.starts_with("verified: 7 receipts"), "{}", out.verified);
    // The pre-flight read the new chat through the carrier before any prompt.
    let inspected = out.shown.lines().find(|l| l.contains("https://chatgpt.com/ inspected by "));
    assert!(inspected.is_some_and(|l| l.contains(": ready (chatgpt-dom ")), "{}", out.shown);
    // What the run left parked, `canary stop` retired: nothing working, parked or queued.
    assert_all_retired(&out.status_after_stop);
    assert!(out.torn_down.contains("carriers revoked: 1"), "{}", out.torn_down);
    assert!(!out.listening_after_teardown, "the canary daemon is down after teardown");
    let head = out.show["head"].as_str().unwrap();
    assert!(
        out.report_html.contains(head) && out.report_html.contains(last.as_str()),
        "the report names head and claim"
    );
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn docs_canary_md_followed_through_the_cdp_carrier_reaches_the_final_claim() {
    let out = follow_the_page("docs-cdp", Carrier::Cdp).await;
    the_report_as_a_person_sees_it(&out.report_html, &out.show).await;
}

/// The HTML report in a real browser: every gate's row and the head
/// shown, no serious or critical axe-core finding, and its picture in
/// docs/screenshots/canary-report.png (regenerated here).
async fn the_report_as_a_person_sees_it(html: &str, show: &Value) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("canary-report.html");
    std::fs::write(&file, html).unwrap();
    let config = e2e::browser::config(1, &dir.path().join("chromium")).unwrap().build().unwrap();
    let (mut browser, mut handler) = chromiumoxide::Browser::launch(config).await.unwrap();
    let events = tokio::spawn(async move { while futures_util::StreamExt::next(&mut handler).await.is_some() {} });
    let page = browser.new_page(format!("file://{}", file.display())).await.unwrap();
    let rows: usize = e2e::browser::eval(&page, "document.querySelectorAll('tbody tr').length").await.unwrap();
    assert_eq!(rows, show["gates"].as_array().unwrap().len());
    let text: String = e2e::browser::eval(&page, "document.body.innerText").await.unwrap();
    assert!(text.contains(show["head"].as_str().unwrap()), "{text}");
    let found = e2e::surfaces::axe(&page).await.unwrap();
    assert!(found.is_empty(), "axe-core: {found:#?}");
    e2e::surfaces::screenshot(&page, "canary-report").await.unwrap();
    let _ = browser.close().await;
    let _ = browser.wait().await;
    events.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn docs_canary_md_followed_through_the_extension_in_chromium_reaches_the_final_claim() {
    let out = follow_the_page("docs-webext", Carrier::Webext).await;
    assert_eq!(out.show["deployment"]["executors"][0]["carrier"], "webext");
    assert_eq!(out.show["deployment"]["executors"][0]["os"], std::env::consts::OS, "the extension names its OS");
}

/// The seed's closure needs the isolation witness: G1D–G6 without G0
/// climb to G6's own claim, never the final one (issue 45; before, they
/// reached the final claim).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn g1d_to_g6_without_g0_reach_g6s_own_claim() {
    let out = rehearse("cdp-without-g0", Carrier::Cdp, Some("G1D,G2,G3,G4,G5,G6"), None).await;
    assert_all_passed(&out, &["G1D", "G2", "G3", "G4", "G5", "G6"]);
    let g6 = canary::Gate::G6.claim(std::env::consts::OS);
    assert_eq!(out.show["claim"], format!("{} {g6}", canary::REHEARSAL_PREFIX));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_full_gate_set_through_the_extension_in_chromium_reaches_the_final_claim() {
    let out = rehearse("webext-chromium", Carrier::Webext, None, None).await;
    assert_all_passed(&out, &["G1D", "G0", "G2", "G3", "G4", "G5", "G6"]);
    let last = canary::final_claim(std::env::consts::OS);
    assert_eq!(out.show["claim"], format!("{} {last}", canary::REHEARSAL_PREFIX));
    assert_eq!(out.show["deployment"]["executors"][0]["carrier"], "webext");
    assert_eq!(out.show["deployment"]["executors"][0]["os"], std::env::consts::OS, "the extension names its OS");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn g2_and_g3_through_the_extension_in_firefox() {
    let out = rehearse("webext-firefox", Carrier::Firefox, Some("G1D,G2,G3"), None).await;
    assert_all_passed(&out, &["G1D", "G2", "G3"]);
    let g3 = canary::Gate::G3.claim(std::env::consts::OS);
    assert_eq!(out.show["claim"], format!("{} {g3}", canary::REHEARSAL_PREFIX));
}

/// The planted-fault table: fault → the gate it stops → the typed reason.
async fn stops_at(planted: Planted, name: &str, at: &str, reason: &str) {
    let out = rehearse(name, Carrier::Cdp, Some("G1D,G2,G3"), Some(planted)).await;
    assert_eq!(out.code, 1, "the runner exits non-zero: {:#}", out.show);
    let last = out.show["gates"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["gate"], at, "{:#}", out.show);
    assert_eq!(out.show["stopped"], reason, "{:#}", out.show);
    assert_eq!(last["stop_reason"], reason);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_app_stops_g2_as_a_setup_state() {
    stops_at(Planted::StaleApp, "plant-stale-app", "G2", "SETUP_REQUIRED: HOST_APP_STALE").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rate_limit_dialog_during_g3_stops_it_as_a_setup_state() {
    stops_at(Planted::RateLimitInG3, "plant-rate-limit", "G3", "SETUP_REQUIRED: RATE_LIMITED").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_target_lost_during_g3_stops_it_as_uncertain() {
    let out = rehearse("plant-lost-target", Carrier::Cdp, Some("G1D,G2,G3"), Some(Planted::LostTargetInG3)).await;
    assert_eq!(out.code, 1);
    let stopped = out.show["stopped"].as_str().unwrap();
    assert!(stopped.starts_with("G3_UNCERTAIN: TARGET_LOST: slot "), "{stopped}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_executor_killed_mid_send_stops_g3_as_uncertain() {
    stops_at(Planted::ExecutorKilledMidSend, "plant-killed-mid-send", "G3", "G3_UNCERTAIN: AMBIGUOUS_SUBMISSION").await;
}

/// Issue 45, hazard 1: `orchestrator canary stop` from another terminal
/// while G3's tasks run ends the runner (SIGTERM, as Ctrl-C would): G3's
/// receipt says it was stopped by the operator, and every run the canary
/// started is retired, its pool stopped and its workers ended, so nothing
/// is left queued or parked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn canary_stop_mid_g3_ends_the_run_with_a_receipt_and_retires_its_pools() {
    let out = rehearse("stopped-mid-g3", Carrier::Cdp, Some("G1D,G2,G3"), Some(Planted::StoppedMidG3)).await;
    assert_eq!(out.code, 1, "{:#}", out.show);
    let stopped = out.show["stopped"].as_str().unwrap();
    assert!(stopped.starts_with("G3_UNCERTAIN: STOPPED_BY_OPERATOR"), "{stopped}");
    assert!(out.stop_said.iter().any(|l| l.starts_with("the canary run (pid ")), "{:?}", out.stop_said);
    assert_all_retired(&out.status_after);
}

/// Every run in `status` (`orchestrator status --json`) retired: cancelled,
/// no worker left working or parked.
fn assert_all_retired(status: &Value) {
    let runs = status["runs"].as_array().expect("the daemon's status");
    assert!(!runs.is_empty(), "{status:#}");
    for run in runs {
        assert_eq!(run["state"], "cancelled", "every run the canary started is retired: {run:#}");
        for worker in run["workers"].as_array().unwrap() {
            assert!(
                ["cancelled", "completed", "failed"].contains(&worker["state"].as_str().unwrap()),
                "no worker left working or parked: {worker:#}"
            );
        }
    }
}

/// Ctrl-C in the runner's terminal mid-G3 (issue 45): the gate stops
/// with a receipt that says so, and every run it started is retired, so
/// nothing is left queued or parked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_mid_g3_ends_the_run_with_a_receipt_and_retires_its_pools() {
    let out = rehearse("interrupted-mid-g3", Carrier::Cdp, Some("G1D,G2,G3"), Some(Planted::InterruptedMidG3)).await;
    assert_eq!(out.code, 1, "{:#}", out.show);
    let stopped = out.show["stopped"].as_str().unwrap();
    assert!(stopped.starts_with("G3_UNCERTAIN: STOPPED_BY_OPERATOR"), "{stopped}");
    assert!(out.stop_said.iter().any(|l| l.starts_with("SIGINT to the runner (pid ")), "{:?}", out.stop_said);
    assert_all_retired(&out.status_after);
}

/// Attribution first (issue 45): a path that breaks request ids stops
/// the first gate whose workers call, `SETUP_REQUIRED:
/// ATTRIBUTION_UNAVAILABLE`, with the cause the daemon can tell.
async fn attribution_stops(broken: RequestIds, name: &str, cause: &str) {
    let out = rehearse(name, Carrier::Cdp, Some("G1D,G2"), Some(Planted::RequestIds(broken))).await;
    assert_eq!(out.code, 1, "{:#}", out.show);
    let last = out.show["gates"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["gate"], "G2", "{:#}", out.show);
    let stopped = out.show["stopped"].as_str().unwrap();
    assert!(stopped.starts_with(&format!("SETUP_REQUIRED: ATTRIBUTION_UNAVAILABLE: {cause}: ")), "{stopped}");
    assert!(stopped.contains("capability_only"), "the way on is named: {stopped}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_proxy_stripping_the_request_id_header_stops_g2_naming_it() {
    attribution_stops(RequestIds::Stripped, "attribution-no-header", "no_header").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pages_that_show_no_request_id_stop_g2_naming_it() {
    attribution_stops(RequestIds::Unstamped, "attribution-not-shown", "not_shown").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pages_that_show_ids_in_another_form_stop_g2_naming_it() {
    attribution_stops(RequestIds::OtherForm, "attribution-other-form", "other_form").await;
}

/// The way on: a `capability_only` run passes where no header arrives
/// (its host keeping one MCP session per conversation, which admitting a
/// pool worker then needs), and its every receipt and its claim say
/// callers were not proven.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_capability_only_run_passes_without_request_ids_and_says_so() {
    let planted = Some(Planted::RequestIds(RequestIds::Stripped));
    let run_args = ["--attribution", "capability_only"];
    let out = rehearse_with("capability-only", Carrier::Cdp, Some("G1D,G2"), planted, &run_args).await;
    assert_all_passed(&out, &["G1D", "G2"]);
    let g2 = canary::Gate::G2.claim(std::env::consts::OS);
    let claim = format!("{} {} {g2}", canary::CAPABILITY_ONLY_PREFIX, canary::REHEARSAL_PREFIX);
    assert_eq!(out.show["claim"], claim, "{:#}", out.show);
    assert_eq!(out.show["attribution"], "capability_only", "{:#}", out.show);
    for file in ["01-G1D.json", "02-G2.json"] {
        let receipt: Value =
            serde_json::from_slice(&std::fs::read(receipts_dir("capability-only").join(file)).unwrap()).unwrap();
        assert_eq!(receipt["attribution"], "capability_only", "{file}");
    }
}

/// `canary verify --head` accepts the chain against the head its run
/// printed and refuses another; `canary show` verifies before it prints:
/// one edited byte in any receipt and it refuses, naming that receipt, exit 2.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_edited_receipt_is_refused_by_canary_show() {
    let out = rehearse("edited", Carrier::Cdp, Some("G1D,G2"), None).await;
    assert_eq!(out.code, 0, "{:#}", out.show);
    let dir = receipts_dir("edited");
    let show = |json: bool| {
        let mut cmd = std::process::Command::new(orchestrator());
        cmd.args(["canary", "show"]).arg(&dir);
        if json {
            cmd.arg("--json");
        }
        cmd.output().unwrap()
    };
    // Against the head the run printed, and one it did not.
    let verify = |head: &str| {
        std::process::Command::new(orchestrator())
            .args(["canary", "verify"])
            .arg(&dir)
            .args(["--head", head])
            .output()
            .unwrap()
    };
    let head = out.show["head"].as_str().unwrap();
    let verified = verify(head);
    let said = String::from_utf8_lossy(&verified.stdout);
    assert!(verified.status.success() && said.contains(&format!("on {}", std::env::consts::OS)), "{said}");
    let other = verify(&"0".repeat(64));
    assert_eq!(other.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&other.stderr).contains("rewritten"));
    let text = show(false);
    assert!(text.status.success());
    let text = String::from_utf8(text.stdout).unwrap();
    assert!(
        text.contains("G2 PASS") && text.contains("Claim reached: REHEARSAL_ONLY: ZERO_TOUCH_CREATE_BIND_PASS"),
        "{text}"
    );
    let g2 = dir.join("02-G2.json");
    let edited = std::fs::read_to_string(&g2).unwrap().replacen("\"workers\": 3", "\"workers\": 4", 1);
    std::fs::write(&g2, edited).unwrap();
    let refused = show(true);
    assert_eq!(refused.status.code(), Some(2));
    let stderr = String::from_utf8(refused.stderr).unwrap();
    assert!(stderr.contains("02-G2.json") && stderr.contains("edited"), "{stderr}");
    assert!(refused.stdout.is_empty(), "nothing printed from a chain that cannot be trusted");
}

/// `<target dir>/canary-receipts/<name>`.
fn receipts_dir(name: &str) -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../target"), PathBuf::from);
    target.join("canary-receipts").join(name)
}

/// `canary deploy` starts an isolated daemon (its own state, address and
/// app label) and records its identity; it refuses the everyday state
/// directory; `--target live` refuses a daemon it did not deploy.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn canary_deploy_starts_an_isolated_daemon_and_live_runs_need_one() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("canary-state");
    let listen = {
        let probe = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        probe.local_addr().unwrap().to_string()
    };
    let out = std::process::Command::new(orchestrator())
        .args(["canary", "deploy", "--state-dir"])
        .arg(&state)
        .args(["--listen", &listen, "--app-label", "Orchestrator Canary"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
    let record: Value = serde_json::from_slice(&std::fs::read(state.join("canary.json")).unwrap()).unwrap();
    let pid = record["pid"].as_u64().unwrap() as i32;
    assert_eq!(record["app_label"], "Orchestrator Canary");
    assert_eq!(record["mcp_url"], format!("http://{listen}/mcp"));
    let instance = record["deployment"]["instance_id"].as_str().unwrap().to_owned();
    assert!(instance.starts_with("inst_") && stdout.contains(&instance), "{stdout}");
    // Issue 45: every hint names this daemon's address, and the live run says `--target live`.
    assert!(
        stdout.contains(&format!("orchestrator pair --state-dir {} --listen {listen}", state.display())),
        "{stdout}"
    );
    assert!(stdout.contains("--target live"), "{stdout}");
    assert_eq!(record["deployment"]["commit"].as_str().unwrap().len(), 40, "{record:#}");
    assert_eq!(record["deployment"]["build_id"].as_str().unwrap().len(), 64, "{record:#}");
    // The same instance answers runtime_status.
    let mut root = mcp_client::Client::connect(&format!("http://{listen}/mcp")).await.unwrap();
    let run = root.call("run_create", serde_json::json!({"title": "t"})).await.unwrap().unwrap();
    let cap = run["root_capability"].as_str().unwrap();
    let status = root.call("runtime_status", serde_json::json!({"capability": cap})).await.unwrap().unwrap();
    assert_eq!(status["deployment"]["instance_id"], instance.as_str());
    // Issue 45: teardown leaves no daemon, no carrier and no working URL behind.
    let credential = std::process::Command::new(orchestrator())
        .args(["pair", "--json", "--state-dir"])
        .arg(&state)
        .args(["--listen", &listen])
        .output()
        .unwrap();
    assert!(credential.status.success(), "{credential:?}");
    // A secret made for a tunnel (read by the next start): teardown rotates it.
    let exposed = std::process::Command::new(orchestrator())
        .args(["expose", "--host", "canary.example.net", "--state-dir"])
        .arg(&state)
        .env_remove("ORCHESTRATOR_MCP_SECRET")
        .output()
        .unwrap();
    assert!(exposed.status.success(), "{exposed:?}");
    let secret = std::fs::read_to_string(state.join("mcp-secret")).unwrap();
    let down = std::process::Command::new(orchestrator())
        .args(["canary", "teardown", "--state-dir"])
        .arg(&state)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&down.stdout);
    assert!(down.status.success(), "{said}{}", String::from_utf8_lossy(&down.stderr));
    assert!(said.contains("carriers revoked: 1"), "{said}");
    assert!(said.contains(&format!("the canary daemon (pid {pid}) stopped")), "{said}");
    assert!(said.contains("delete the app \"Orchestrator Canary\""), "{said}");
    assert!(std::net::TcpStream::connect(&listen).is_err(), "nothing listens at {listen} any more");
    let listed = carrier_webext::Credentials::open_or_create(&state.join("executors")).unwrap().list().unwrap();
    assert!(listed.is_empty(), "{listed:?}");
    assert_ne!(std::fs::read_to_string(state.join("mcp-secret")).unwrap(), secret, "the pasted URL is dead");

    // The refusal `orchestrator args…` exits with: its stderr.
    let refused = |args: &[&str]| {
        let out = std::process::Command::new(orchestrator()).args(args).output().unwrap();
        assert!(!out.status.success(), "{args:?} was not refused: {out:?}");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let path = |name: &str| dir.path().join(name).to_str().unwrap().to_owned();
    // Room for G5 (eight active workers) is set by deploy, never less.
    let small = path("small");
    let said = refused(&[
        "canary",
        "deploy",
        "--listen",
        &listen,
        "--app-label",
        "X",
        "--state-dir",
        &small,
        "--",
        "--max-active-workers",
        "4",
    ]);
    assert!(said.contains("at least 5"), "{said}");
    // A run whose canary daemon is not running goes to no other daemon.
    let said = refused(&["canary", "run", "--state-dir", &path("never-deployed"), "--receipts", &path("r0")]);
    assert!(said.contains("no daemon runs on"), "{said}");

    // A live run needs a deployed canary daemon.
    let elsewhere = path("everyday");
    std::fs::create_dir_all(&elsewhere).unwrap();
    let said = refused(&["canary", "run", "--target", "live", "--state-dir", &elsewhere, "--receipts", &path("r")]);
    assert!(said.contains("canary deploy"), "{said}");
    // Never the everyday state directory.
    let everyday = std::process::Command::new(orchestrator())
        .args(["canary", "deploy", "--app-label", "X", "--state-dir"])
        .arg(dir.path().join("xdg/chatgpt-orchestrator"))
        .env("XDG_STATE_HOME", dir.path().join("xdg"))
        .output()
        .unwrap();
    assert!(!everyday.status.success());
    assert!(String::from_utf8_lossy(&everyday.stderr).contains("everyday state"), "{everyday:?}");
    // Issue 43, finding 3: nor a path that reaches it through `..` before
    // it exists; nothing is created on the way.
    let around = dir.path().join("fresh/nothere/../../xdg2/chatgpt-orchestrator");
    let everyday = std::process::Command::new(orchestrator())
        .args(["canary", "deploy", "--app-label", "X", "--state-dir"])
        .arg(&around)
        .env("XDG_STATE_HOME", dir.path().join("xdg2"))
        .output()
        .unwrap();
    assert!(!everyday.status.success());
    assert!(String::from_utf8_lossy(&everyday.stderr).contains("everyday state"), "{everyday:?}");
    assert!(!dir.path().join("xdg2").exists() && !dir.path().join("fresh").exists(), "nothing was created");
}
