//! `fake-executor`: connects to a daemon's `/executor` endpoint and serves
//! commands with simulated conversations, printing a line per effect.

use std::time::Duration;

use clap::Parser;
use fake_executor::{FakeConfig, FakeExecutor};

#[derive(Parser)]
#[command(name = "fake-executor", about = "A scripted executor for tests and demos")]
struct Cli {
    /// The daemon's executor endpoint, for example ws://127.0.0.1:7777/executor.
    #[arg(long)]
    url: String,
    /// File holding this executor's credential (`orchestrator pair
    /// --executor-id ID --json` prints one); the executor id is the
    /// credential's.
    #[arg(long)]
    credential_file: std::path::PathBuf,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let credential = std::fs::read_to_string(&cli.credential_file)?.trim().to_owned();
    let executor_id = credential.split('.').nth(1).unwrap_or_default().to_owned();
    let fake = FakeExecutor::start(FakeConfig::new(cli.url, credential, executor_id));
    let mut seen = 0;
    loop {
        tokio::select! {
            _ = tokio::signal::ctrl_c() => break,
            _ = tokio::time::sleep(Duration::from_millis(200)) => {
                let stats = fake.stats();
                for (conversation, prompt) in &stats.submissions[seen..] {
                    println!("submitted into {conversation}: {} bytes", prompt.len());
                }
                seen = stats.submissions.len();
            }
        }
    }
    let stats = fake.stats();
    println!(
        "connections {} conversations {} submissions {}",
        stats.connections,
        stats.conversations.len(),
        stats.submissions.len()
    );
    fake.stop().await;
    Ok(())
}
