//! `cargo xtask canary`: the canary rehearsed on fakechat through a real
//! carrier (see `e2e::canary`). Prints the verified chain
//! (`orchestrator canary show --json`) and exits with the runner's code.
//! The shipped `orchestrator` links no rig.
//!
//! Usage: `canary_rig --receipts DIR [--carrier cdp|webext|firefox]
//! [--gates G1D,G2,…] [--plant stale_app|rate_limit|lost_target|killed_mid_send|stopped]`.

use anyhow::Context;
use e2e::canary::{Carrier, Options, Planted};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let orchestrator = match std::env::var_os("ORCHESTRATOR_BIN") {
        Some(named) => std::path::PathBuf::from(named),
        None => std::env::current_exe()?.with_file_name("orchestrator"),
    };
    anyhow::ensure!(
        orchestrator.is_file(),
        "no orchestrator binary at {}: run `cargo xtask canary`",
        orchestrator.display()
    );
    let mut options = Options {
        orchestrator,
        receipts: Default::default(),
        carrier: Carrier::Cdp,
        gates: None,
        planted: None,
        run_args: Vec::new(),
        sessions: false,
    };
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let value = args.next().with_context(|| format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--receipts" => options.receipts = value.into(),
            "--carrier" => options.carrier = Carrier::parse(&value)?,
            "--gates" => options.gates = Some(value),
            "--plant" => {
                options.planted = Some(match value.as_str() {
                    "stale_app" => Planted::StaleApp,
                    "rate_limit" => Planted::RateLimitInG3,
                    "lost_target" => Planted::LostTargetInG3,
                    "killed_mid_send" => Planted::ExecutorKilledMidSend,
                    "stopped" => Planted::StoppedMidG3,
                    "interrupted" => Planted::InterruptedMidG3,
                    other => anyhow::bail!("unknown planted fault {other:?}"),
                })
            }
            _ => anyhow::bail!("unknown flag {flag}"),
        }
    }
    anyhow::ensure!(!options.receipts.as_os_str().is_empty(), "--receipts DIR is required");
    if options.carrier == Carrier::Firefox && options.gates.is_none() {
        // The Firefox rig has no hands for faults: the gates that need none.
        options.gates = Some("G1D,G2,G3".into());
    }
    let rehearsal = e2e::canary::rehearse(options).await?;
    println!("{}", serde_json::to_string_pretty(&rehearsal.show)?);
    eprintln!("canary rig: finished in {:.1} s", rehearsal.elapsed.as_secs_f64());
    std::process::exit(rehearsal.code);
}
