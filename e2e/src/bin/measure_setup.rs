//! Measures `orchestrator setup --yes` from an unpacked release bundle
//! (issue 46): `measure_setup <bundle dir> <orchestrator binary>` runs the
//! bundle's own binary on a fresh state directory and Chromium profile,
//! with fakechat as chatgpt.com, starts Chromium at setup's word, and
//! prints the wall time from setup's start to every link proven.

use std::path::PathBuf;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let (Some(bundle), Some(binary)) = (args.next(), args.next()) else {
        anyhow::bail!("usage: measure_setup <bundle dir> <orchestrator binary from that bundle>");
    };
    let dir = tempfile::tempdir()?;
    let fake = fakechat::start("127.0.0.1:0".parse()?, None, fakechat::server::Csp::RealLike, None).await?;
    let _stop = e2e::setup::StopDaemon(dir.path().join("state"));
    let run =
        e2e::setup::setup_yes(&PathBuf::from(binary), &PathBuf::from(bundle), dir.path(), fake.addr.port(), true, &[])
            .await?;
    anyhow::ensure!(run.code == Some(0), "setup did not prove every link:\n{}", run.lines.join("\n"));
    println!("measured: setup --yes from the unpacked bundle to every link proven: {:.1} s", run.took.as_secs_f64());
    Ok(())
}
