//! `orchestrator`: the ChatGPT carrier pool orchestrator daemon.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context, bail};
use carrier_webext::{Bridge, BridgeConfig, Credentials};
use clap::{Parser, Subcommand};
use control::queue::Limits;
use control::store::SqliteStore;
use control::{ControlPlane, SystemClock};
use pool::{Pool, PoolConfig};
use rmcp::ServiceExt;
use server::http::{HttpConfig, app};
use server::service::Service;
use server::state_dir::StateDir;
use server::tools::Tools;
use tokio_util::sync::CancellationToken;

#[derive(Parser)]
#[command(name = "orchestrator", version = server::deployment::VERSION_LINE, about = "ChatGPT carrier pool orchestrator")]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand)]
// Parsed once per process: boxing `serve`'s flags would buy nothing.
#[allow(clippy::large_enum_variant)]
enum Cmd {
    /// Prints a one-time link (good for a minute) into the running daemon's
    /// dashboard: its runs, workers, pool slots, executors and controls.
    Ui {
        /// State directory (default: $XDG_STATE_HOME/chatgpt-orchestrator).
        #[arg(long)]
        state_dir: Option<PathBuf>,
        /// The daemon's address (default: where the daemon running on the
        /// state directory listens, else 127.0.0.1:7777).
        #[arg(long)]
        addr: Option<String>,
        /// End every dashboard session and void every link printed, instead.
        #[arg(long)]
        revoke_all: bool,
    },
    /// The canary: an isolated deployment and the gates G0–G6 with chained
    /// receipts (docs/canary.md).
    Canary {
        #[command(subcommand)]
        action: CanaryAction,
    },
    /// Serve MCP over streamable HTTP at /mcp (and /healthz).
    Serve {
        /// State directory (default: $XDG_STATE_HOME/chatgpt-orchestrator).
        #[arg(long)]
        state_dir: Option<PathBuf>,
        /// Address to listen on. A non-loopback address requires an MCP secret: the one
        /// `orchestrator expose` stored in the state directory, or ORCHESTRATOR_MCP_SECRET.
        #[arg(long, default_value = "127.0.0.1:7777")]
        listen: SocketAddr,
        /// Also accept this Host header (for example a tunnel's hostname). Repeatable.
        #[arg(long = "allowed-host")]
        allowed_hosts: Vec<String>,
        /// Accept requests carrying this Origin (scheme://host[:port]). Repeatable.
        #[arg(long = "allowed-origin")]
        allowed_origins: Vec<String>,
        /// Also offer OAuth 2.1 at the exposed host, for MCP hosts that require
        /// it: the owner approves each client with the owner key (docs/setup.md).
        #[arg(long)]
        oauth: bool,
        /// The origin hosts reach the daemon at, for OAuth (default:
        /// https://<first --allowed-host>).
        #[arg(long, requires = "oauth")]
        public_url: Option<String>,
        /// A client must send a request's headers within this many ms, or is disconnected.
        #[arg(long, default_value_t = 10_000)]
        header_read_timeout_ms: u64,
        /// A request body may pause at most this many ms between chunks.
        #[arg(long, default_value_t = 30_000)]
        body_read_timeout_ms: u64,
        /// Caller attribution: how long a call made as a managed conversation
        /// waits for an executor to see its request id in that conversation's
        /// page before it is refused (UNIDENTIFIED_CALLER), in ms (100 to 120000).
        #[arg(long, default_value_t = server::tools::ATTRIBUTION_WAIT.as_millis() as u64,
              value_parser = clap::value_parser!(u64).range(100..=120_000))]
        attribution_wait_ms: u64,
        /// Worktree ownership: Git worktrees under this directory may be
        /// claimed through the ownership tools (repeatable; none: ownership
        /// is off). No worktree outside these roots is read or written; their
        /// repositories' Git directories (refs, config, locks) may be anywhere.
        #[arg(long = "worktree-root")]
        worktree_roots: Vec<PathBuf>,
        /// Also serve the executor endpoint over TLS on this address, for
        /// host agents on other machines (`pair --remote` pins its
        /// certificate in their credentials). Nothing else is served there.
        #[arg(long)]
        executor_listen: Option<SocketAddr>,
        /// The certificate (PEM) --executor-listen presents (default: one
        /// made in the state directory at its first start).
        #[arg(long, requires_all = ["executor_key", "executor_listen"])]
        executor_cert: Option<PathBuf>,
        /// That certificate's private key (PEM, owner-only).
        #[arg(long, requires = "executor_cert")]
        executor_key: Option<PathBuf>,
        #[command(flatten)]
        executor: ExecutorArgs,
        #[command(flatten)]
        runtime: RuntimeArgs,
        #[command(flatten)]
        host: HostArgs,
        #[command(flatten)]
        local_cdp: LocalCdpArgs,
    },
    /// Ask the running daemon how it is set up — identity, tool catalog, app
    /// label, worker Project, executors, exposure — and say what is still to
    /// do (docs/setup.md). Exit 0: ready; 1: setup to do; 2: no answer.
    Doctor {
        /// The daemon's MCP endpoint (default: where the daemon running on
        /// the state directory serves, else http://127.0.0.1:7777/mcp).
        #[arg(long)]
        mcp_url: Option<String>,
        /// The daemon's state directory (its admin token is read from there).
        #[arg(long)]
        state_dir: Option<PathBuf>,
        /// Optional: what you expect the daemon to run with; a difference fails.
        #[command(flatten)]
        host: HostArgs,
        /// Print one JSON object instead of text.
        #[arg(long)]
        json: bool,
    },
    /// First-time set-up in one command: starts the daemon if none runs on
    /// the state directory, installs the extension into a browser it finds
    /// (or prints the one step a browser needs a person for), pairs it
    /// without pasting (you compare a code), then proves each link live.
    /// Exit 0: every link proven; 1: the first broken one and the next step.
    Setup(SetupArgs),
    /// Pair an executor: issue a credential bound to one executor id and
    /// print it with the set-up steps. Each executor (each browser, each
    /// CDP agent) gets its own; `--list`, `--revoke`, `--rotate` manage them.
    Pair(PairArgs),
    /// Expose the tools to ChatGPT through a tunnel: create the MCP secret
    /// in the state directory (owner-only; `--rotate` for a new one) and
    /// print the URL to paste into ChatGPT and the `serve` command to run.
    Expose {
        /// State directory (default: $XDG_STATE_HOME/chatgpt-orchestrator).
        #[arg(long)]
        state_dir: Option<PathBuf>,
        /// The tunnel's public hostname (e.g. from `cloudflared tunnel`).
        #[arg(long)]
        host: String,
        /// Replace the secret: the old URL stops working once `serve` restarts.
        #[arg(long)]
        rotate: bool,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Remove the runs that ended (completed, failed or cancelled) more than
    /// `--older-than` days ago, whole: their events, messages and
    /// idempotency records; then reclaim the space and save a snapshot. The
    /// daemon must be stopped (the state directory's lock says so).
    Prune {
        /// State directory (default: $XDG_STATE_HOME/chatgpt-orchestrator).
        #[arg(long)]
        state_dir: Option<PathBuf>,
        /// Keep every run that changed within this many days (0 to 36500).
        #[arg(long, default_value_t = 30, value_parser = clap::value_parser!(u64).range(0..=36_500))]
        older_than: u64,
        /// Only list what would be removed.
        #[arg(long)]
        dry_run: bool,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// What the running daemon is doing: setup, executors, the newest runs
    /// and their workers (what each waits for). Asks its admin read.
    Status(AskArgs),
    /// The pool by machine: each host (named by its executors' `hello`),
    /// whether it is connected, its executors and room, and the workers
    /// whose conversations it holds. Asks the running daemon's admin read.
    Hosts(AskArgs),
    /// Who holds, held, submitted or landed a worktree, branch or commit:
    /// the worker, its execution session and its ChatGPT conversation, from
    /// the running daemon's ownership records (SPEC §5d). Exit 0: found;
    /// 1: no record; 2: no daemon answered.
    Who {
        /// A worktree path (one that is gone too), a branch, a commit (any
        /// revision Git resolves in --repo), or an ownership id.
        target: String,
        #[command(flatten)]
        ask: OwnersArgs,
    },
    /// Every worktree ownership record (of --repo's repository, if given),
    /// oldest claim first, one line each.
    Owners {
        #[command(flatten)]
        ask: OwnersArgs,
    },
    /// Run the daemon as your user's service, restarted on failure: a
    /// systemd user unit (Linux) or a launchd agent (macOS).
    Service {
        #[command(subcommand)]
        action: ServiceAction,
    },
    /// Serve the same MCP tools over stdio: relayed to the daemon running on
    /// the state directory (same tools, executors and store), or, with none
    /// running, served alone (no executor can connect then; it says so).
    McpStdio {
        /// State directory (default: $XDG_STATE_HOME/chatgpt-orchestrator).
        #[arg(long)]
        state_dir: Option<PathBuf>,
    },
    /// Run the CDP host agent: an executor that drives worker conversations in
    /// a browser session you authorized for remote debugging (chrome://inspect/
    /// #remote-debugging), in targets of its own only. It dials the daemon's
    /// executor endpoint like the extension (docs/cdp-carrier.md).
    CarrierAgent {
        /// Use the Chrome DevTools Protocol (the only carrier this command runs).
        #[arg(long, required = true)]
        cdp: bool,
        /// The daemon's executor endpoint.
        #[arg(long, default_value = "ws://127.0.0.1:7777/executor")]
        daemon: String,
        /// The credential file `orchestrator pair --executor-id ID --credential-file FILE`
        /// wrote (owner-only; `pair`'s printed or `--json` output works too).
        #[arg(long)]
        credential_file: PathBuf,
        /// The browser's user-data directory, where it writes DevToolsActivePort.
        #[arg(long, conflicts_with_all = ["channel", "cdp_endpoint", "launch_browser"])]
        user_data_dir: Option<PathBuf>,
        /// Find the user-data directory of this browser channel in its default
        /// place on this OS: chrome, chrome-beta or chromium.
        #[arg(long, conflicts_with_all = ["cdp_endpoint", "launch_browser"])]
        channel: Option<String>,
        /// The browser's DevTools WebSocket, ws://127.0.0.1:PORT/devtools/browser/ID.
        #[arg(long, conflicts_with = "launch_browser")]
        cdp_endpoint: Option<String>,
        /// The fallback where no session can be authorized: the agent launches
        /// this browser itself on a dedicated profile (--launch-profile), never
        /// the user's own, and stops it when it stops.
        #[arg(long, requires = "launch_profile")]
        launch_browser: Option<PathBuf>,
        /// The dedicated profile directory for --launch-browser (refused if it
        /// is a browser's default profile on this machine).
        #[arg(long, requires = "launch_browser")]
        launch_profile: Option<PathBuf>,
        /// An extra flag for the launched browser (e.g. --headless=new). Repeatable.
        #[arg(long, requires = "launch_browser", allow_hyphen_values = true)]
        launch_arg: Vec<String>,
        /// How many managed conversations this host takes; the daemon places
        /// no more on it (1-256).
        #[arg(long, default_value_t = carrier_cdp::agent::DEFAULT_CAPACITY,
              value_parser = clap::value_parser!(u32).range(1..=256))]
        capacity: u32,
        /// The page adapter: dist/chromium/pkg of `cargo xtask dist`.
        #[arg(long, default_value = "dist/chromium/pkg")]
        bundle: PathBuf,
        /// State directory, for the journal's default place (default:
        /// $XDG_STATE_HOME/chatgpt-orchestrator, the daemon's on this host).
        #[arg(long, conflicts_with = "state_file")]
        state_dir: Option<PathBuf>,
        /// Where the agent keeps its journal (default: <state dir>/cdp-agent.json).
        #[arg(long)]
        state_file: Option<PathBuf>,
        /// Give up reaching the browser after this many ms (a pending "Allow"
        /// prompt is BROWSER_AUTHORIZATION_REQUIRED then).
        #[arg(long, default_value_t = 10_000)]
        connect_timeout_ms: u64,
    },
    /// Show how this build reads a chatgpt.com page you saved (Ctrl-S): what
    /// each locator finds (visible or hidden), the classification, what a
    /// submit would click, the app pills. Read-only; attach `--json` output
    /// to a bug report.
    InspectPage {
        /// The saved HTML page.
        file: PathBuf,
        /// JSON instead of text.
        #[arg(long)]
        json: bool,
    },
}

/// Where a command asks the running daemon's admin read, and how it prints.
#[derive(clap::Args)]
struct AskArgs {
    /// State directory (default: $XDG_STATE_HOME/chatgpt-orchestrator).
    #[arg(long)]
    state_dir: Option<PathBuf>,
    /// The daemon's address (default: where the daemon running on the
    /// state directory listens, else 127.0.0.1:7777).
    #[arg(long)]
    addr: Option<String>,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

/// `orchestrator setup`'s arguments.
#[derive(clap::Args)]
struct SetupArgs {
    /// State directory (default: $XDG_STATE_HOME/chatgpt-orchestrator).
    #[arg(long)]
    state_dir: Option<PathBuf>,
    /// Where the daemon listens, if setup starts it (the extension's
    /// pairing page asks at 127.0.0.1:7777 by itself).
    #[arg(long, default_value = "127.0.0.1:7777")]
    listen: SocketAddr,
    /// The browser to install into (default: Chromium, else Firefox, as found on PATH).
    #[arg(long, value_parser = ["chromium", "firefox"])]
    browser: Option<String>,
    /// Chromium's user-data directory (default: $XDG_CONFIG_HOME/chromium).
    #[arg(long)]
    chromium_user_data_dir: Option<PathBuf>,
    /// The release bundle's directory (default: beside this binary).
    #[arg(long)]
    bundle: Option<PathBuf>,
    /// The app's name in ChatGPT (asked on a terminal when not given).
    #[arg(long)]
    app_label: Option<String>,
    /// A tunnel's public hostname: the daemon answers for it behind an MCP
    /// secret (as `orchestrator expose`), and setup proves it does.
    #[arg(long)]
    expose_host: Option<String>,
    /// Ask nothing: take the flags as given, and accept the first pairing
    /// request from the extension installed (on a computer other people
    /// use, answer the prompt instead: it shows the code to compare).
    #[arg(long)]
    yes: bool,
    /// How long to wait for the browser to ask to pair, in seconds (10-600).
    #[arg(long, default_value_t = 600, value_parser = clap::value_parser!(u64).range(10..=600))]
    wait_s: u64,
}

/// `orchestrator pair`'s arguments.
#[derive(clap::Args)]
struct PairArgs {
    /// State directory (default: $XDG_STATE_HOME/chatgpt-orchestrator).
    #[arg(long)]
    state_dir: Option<PathBuf>,
    /// The executor id to issue for (default: a fresh `exec-<hex>`);
    /// issuing again for an id revokes its earlier credential.
    #[arg(long)]
    executor_id: Option<String>,
    /// List the paired executors (ids and dates; never a secret).
    #[arg(long, conflicts_with_all = ["revoke", "rotate", "executor_id"])]
    list: bool,
    /// Revoke one executor's credential; its live session closes within a second.
    #[arg(long, conflicts_with_all = ["rotate", "executor_id"])]
    revoke: Option<String>,
    /// Revoke every credential: every executor must be paired again.
    #[arg(long, conflicts_with = "executor_id")]
    rotate: bool,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
    /// Also write the credential alone to this file, owner-only (0600), as
    /// `carrier-agent --credential-file` reads it; the printed text then
    /// leaves the credential out.
    #[arg(long, conflicts_with_all = ["list", "revoke"])]
    credential_file: Option<PathBuf>,
    /// The daemon's address, for the printed endpoint.
    #[arg(long, default_value = "127.0.0.1:7777")]
    listen: SocketAddr,
    /// Pair a host agent on another machine: its endpoint is
    /// wss://HOST:PORT/executor (`serve --executor-listen`), and what is
    /// printed and written (as JSON) pins that endpoint's certificate (made
    /// in the state directory now, if `serve` has not made it yet).
    #[arg(long, value_name = "HOST:PORT", requires = "credential_file", conflicts_with_all = ["list", "revoke", "operator"])]
    remote: Option<String>,
    /// The certificate `serve --executor-cert` presents, for --remote.
    #[arg(long, requires = "remote")]
    executor_cert: Option<PathBuf>,
    /// Grant this executor a person's controls over the whole pool (the
    /// extension's popup and overlay: see every run, pause, stop, answer).
    /// Only for an executor a person uses; a host agent needs none.
    #[arg(long, conflicts_with_all = ["list", "revoke"])]
    operator: bool,
}

#[derive(Subcommand)]
enum CanaryAction {
    /// Start an isolated daemon for the canary: its own state directory,
    /// address and app label, never your everyday state. Prints what to
    /// pair next.
    Deploy {
        /// The canary's own state directory (not the default one).
        #[arg(long)]
        state_dir: PathBuf,
        /// Where the canary daemon listens (default: where it listened when
        /// last deployed on this state directory, else a free loopback port).
        #[arg(long)]
        listen: Option<SocketAddr>,
        /// The canary app's name in ChatGPT (a separate app from your everyday one).
        #[arg(long)]
        app_label: String,
        /// A ChatGPT Project for the canary's conversations.
        #[arg(long)]
        worker_project_url: Option<String>,
        /// More `orchestrator serve` flags, after `--`.
        #[arg(last = true)]
        serve_args: Vec<String>,
    },
    /// Run the gates in order against the canary daemon, one receipt each;
    /// stops at the first failure or uncertainty. Exits 0 only when every
    /// gate asked for passed.
    Run {
        /// The canary daemon's state directory.
        #[arg(long)]
        state_dir: PathBuf,
        /// A new directory for the receipts.
        #[arg(long)]
        receipts: PathBuf,
        /// Gates, comma-separated, in order (default: G1D,G0,G2,G3,G4,G5,G6).
        #[arg(long)]
        gates: Option<String>,
        /// The carrier every executor must be.
        #[arg(long, value_parser = ["webext", "cdp"])]
        carrier: Option<String>,
        /// fakechat (a rehearsal) or live (chatgpt.com, your account: opt-in).
        #[arg(long, default_value = "fakechat", value_parser = ["fakechat", "live"])]
        target: String,
        /// Workers for G0 and G2–G4 (G5 scales to this + 2, then 2).
        #[arg(long, default_value_t = 3)]
        workers: u32,
        /// Where faults come from: `prompt` (you, at this terminal), a
        /// loopback hook `http://127.0.0.1:PORT/path`, or `none`.
        #[arg(long, default_value = "prompt")]
        faults: String,
        /// The longest any one wait inside a gate may take, in seconds.
        #[arg(long, default_value_t = 300)]
        gate_timeout_s: u64,
        /// The most prompts the whole run may send into conversations.
        #[arg(long, default_value_t = 30)]
        prompt_budget: u32,
        /// The least time between two prompts the runner causes, in ms.
        #[arg(long, default_value_t = 5_000)]
        pacing_ms: u64,
        /// `required`: every worker call proven to come from its own
        /// conversation (a path that cannot carry that stops the run
        /// `SETUP_REQUIRED: ATTRIBUTION_UNAVAILABLE`); `capability_only`:
        /// workers trusted on their capability alone, and every claim says so.
        #[arg(long, default_value = "required", value_parser = ["required", "capability_only"])]
        attribution: String,
    },
    /// Verify a receipt chain against the head its run printed (kept
    /// elsewhere): a chain rewritten whole is refused (exit 2); prints the
    /// claim and the platform it names.
    Verify {
        /// The receipt directory.
        receipts: PathBuf,
        /// The chain head the run printed (64 hex digits).
        #[arg(long)]
        head: String,
    },
    /// Stop the canary: end the `canary run` on this state directory, if one
    /// runs (its gate's receipt says it was stopped), and retire every run
    /// the canary started there (each pool stopped, each run cancelled).
    Stop {
        /// The canary daemon's state directory.
        #[arg(long)]
        state_dir: PathBuf,
    },
    /// Take the canary down: `stop`, then revoke every carrier paired with
    /// it, rotate its MCP secret and stop its daemon; prints what only you
    /// can undo (the app in ChatGPT, the tunnel).
    Teardown {
        /// The canary daemon's state directory.
        #[arg(long)]
        state_dir: PathBuf,
    },
    /// Verify a receipt chain and print what each gate saw; an edited
    /// receipt is refused (exit 2, naming it).
    Show {
        /// The receipt directory.
        receipts: PathBuf,
        /// One JSON document instead of text.
        #[arg(long, conflicts_with = "html")]
        json: bool,
        /// One self-contained HTML page instead of text (to publish).
        #[arg(long)]
        html: bool,
    },
}

#[derive(Subcommand)]
enum ServiceAction {
    /// Write the service file that runs `orchestrator serve` (or, with
    /// `--carrier-agent`, `orchestrator carrier-agent`) with the arguments
    /// after `--` (checked now), then say how to enable it.
    Install {
        /// Run the CDP host agent instead of the daemon (a service of its own).
        #[arg(long)]
        carrier_agent: bool,
        /// Print the file instead of writing it.
        #[arg(long)]
        print: bool,
        /// The service manager (default: this OS's).
        #[arg(long = "for", value_enum)]
        manager: Option<ManagerArg>,
        /// Print what was written, and how to enable it, as JSON.
        #[arg(long, conflicts_with = "print")]
        json: bool,
        /// `serve`'s (or `carrier-agent`'s) arguments, after `--`.
        #[arg(last = true)]
        serve_args: Vec<String>,
    },
    /// Remove the service file (disable it first; the command is printed).
    Uninstall {
        /// The CDP host agent's service, not the daemon's.
        #[arg(long)]
        carrier_agent: bool,
        /// The service manager (default: this OS's).
        #[arg(long = "for", value_enum)]
        manager: Option<ManagerArg>,
        /// Print what was removed as JSON.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum ManagerArg {
    Systemd,
    Launchd,
}

impl ManagerArg {
    fn or_here(arg: Option<ManagerArg>) -> server::service::Manager {
        match arg {
            Some(ManagerArg::Systemd) => server::service::Manager::Systemd,
            Some(ManagerArg::Launchd) => server::service::Manager::Launchd,
            None => server::service::Manager::here(),
        }
    }
}

/// The operator's ChatGPT setup.
#[derive(clap::Args)]
struct HostArgs {
    /// The exact name you gave the orchestrator's app (connector) in ChatGPT;
    /// every new worker conversation is bound to it before its bootstrap.
    #[arg(long)]
    app_label: Option<String>,
    /// A ChatGPT Project (https://chatgpt.com/g/g-p-…/project) to create
    /// worker conversations in; they inherit the Project's app.
    #[arg(long)]
    worker_project_url: Option<String>,
}

impl HostArgs {
    fn setup(&self) -> anyhow::Result<control::ChatgptSetup> {
        server::doctor::host_setup(self.app_label.as_deref(), self.worker_project_url.as_deref())
            .map_err(anyhow::Error::msg)
    }
}

/// Runtime pool settings.
#[derive(clap::Args)]
struct RuntimeArgs {
    /// The one maximum of pool workers (runtime_ensure's bound).
    #[arg(long, default_value_t = 16)]
    max_pool_workers: u32,
    /// Spacing between pool conversation creations, in ms.
    #[arg(long, default_value_t = 3_000)]
    pool_pacing_ms: u64,
    /// How long a provisioning record may stay unadmitted, in ms.
    #[arg(long, default_value_t = 600_000)]
    pool_provisioning_ttl_ms: u64,
}

impl RuntimeArgs {
    fn config(&self) -> anyhow::Result<PoolConfig> {
        if self.max_pool_workers > protocol::limits::WORKERS_PER_RUN_MAX as u32 - 1 {
            bail!("--max-pool-workers is at most {}", protocol::limits::WORKERS_PER_RUN_MAX - 1);
        }
        Ok(PoolConfig {
            max_workers: self.max_pool_workers,
            pacing_ms: self.pool_pacing_ms,
            provisioning_ttl_ms: self.pool_provisioning_ttl_ms,
        })
    }
}

/// How `who` and `owners` ask the running daemon, and print.
#[derive(clap::Args)]
struct OwnersArgs {
    /// A directory of the repository (for `who`: where branches and
    /// revisions are resolved; default: the current directory's, if any).
    #[arg(long)]
    repo: Option<PathBuf>,
    /// Mask conversation UUIDs and URLs (a diagnostic to share).
    #[arg(long)]
    redact: bool,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
    /// State directory (default: $XDG_STATE_HOME/chatgpt-orchestrator).
    #[arg(long)]
    state_dir: Option<PathBuf>,
    /// The daemon's address (default: where the daemon running on the
    /// state directory listens, else 127.0.0.1:7777).
    #[arg(long)]
    addr: Option<String>,
}

/// The CDP host agent run inside the daemon, for a browser session on this
/// machine (docs/cdp-carrier.md). Off unless a browser is named.
#[derive(clap::Args)]
struct LocalCdpArgs {
    /// Run the CDP agent in this process for the browser whose user-data
    /// directory this is (it writes DevToolsActivePort there).
    #[arg(long, conflicts_with_all = ["cdp_channel", "cdp_endpoint"])]
    cdp_user_data_dir: Option<PathBuf>,
    /// ... or for this browser channel's default directory: chrome, chrome-beta, chromium.
    #[arg(long, conflicts_with = "cdp_endpoint")]
    cdp_channel: Option<String>,
    /// ... or for this DevTools browser socket (ws://127.0.0.1:PORT/devtools/browser/ID).
    #[arg(long)]
    cdp_endpoint: Option<String>,
    /// The page adapter for it (dist/chromium/pkg of `cargo xtask dist`).
    #[arg(long, default_value = "dist/chromium/pkg")]
    cdp_bundle: PathBuf,
}

impl LocalCdpArgs {
    /// The agent's configuration when a browser is named: its own
    /// credential (issued anew at every start), the daemon's own executor
    /// endpoint, its journal in the state directory.
    fn config(
        self,
        credentials: &Credentials,
        executor_endpoint: String,
        state_dir: &std::path::Path,
    ) -> anyhow::Result<Option<carrier_cdp::Config>> {
        if self.cdp_user_data_dir.is_none() && self.cdp_channel.is_none() && self.cdp_endpoint.is_none() {
            return Ok(None);
        }
        let browser =
            carrier_cdp::Endpoint::choose(self.cdp_user_data_dir, self.cdp_channel.as_deref(), self.cdp_endpoint)?;
        let bundle = carrier_cdp::page::Bundle::load(&self.cdp_bundle)?;
        let executor_id = "cdp-local".to_owned();
        Ok(Some(carrier_cdp::Config {
            daemon: executor_endpoint,
            daemon_pin: None,
            token: credentials.issue(&executor_id)?,
            executor_id,
            browser,
            bundle,
            state_file: state_dir.join("cdp-agent.json"),
            connect_timeout: std::time::Duration::from_secs(10),
            approval_wait: carrier_cdp::connect::APPROVAL_WAIT,
            reconnect_delay: std::time::Duration::from_secs(1),
            capacity: Some(carrier_cdp::agent::DEFAULT_CAPACITY),
            dedicated: None,
        }))
    }
}

/// Executor bridge settings.
#[derive(clap::Args)]
struct ExecutorArgs {
    /// Conversation creations in flight at once.
    #[arg(long, default_value_t = 2)]
    max_launches: usize,
    /// Managed worker conversations at once.
    #[arg(long, default_value_t = 4)]
    max_active_workers: usize,
    /// Managed tabs open at once per executor (2 to 1000; default: no cap):
    /// idle workers' tabs are closed above it and reopened on their exact
    /// conversation before their next prompt.
    #[arg(long)]
    max_open_tabs: Option<usize>,
    /// How long a worker stays idle before its tab may be closed for
    /// capacity, in ms (1000 to 86400000).
    #[arg(long, default_value_t = control::tabs::TabPolicy::DEFAULT_GRACE_MS)]
    tab_idle_grace_ms: u64,
    /// Extension id allowed to connect (repeatable; default: any extension origin).
    #[arg(long = "extension-id")]
    extension_ids: Vec<String>,
    /// Heartbeat interval asked of executors, in ms.
    #[arg(long, default_value_t = 20_000)]
    executor_heartbeat_ms: u64,
    /// Lease: an executor silent this long is disconnected, in ms.
    #[arg(long, default_value_t = 60_000)]
    executor_lease_ms: u64,
    /// Per-attempt deadline of a conversation create, in ms.
    #[arg(long, default_value_t = 120_000)]
    executor_create_timeout_ms: u64,
    /// Per-attempt deadline of a prompt send, in ms.
    #[arg(long, default_value_t = 60_000)]
    executor_send_timeout_ms: u64,
    /// A send waiting on a `generating` or `loading` conversation makes the
    /// daemon inspect it again after this long without news, in ms.
    #[arg(long, default_value_t = 30_000)]
    executor_recheck_after_ms: u64,
    /// Execution Continuity's account-wide pacing: the least time between
    /// two automatic resumes across all workers, in ms (1000 to 600000).
    #[arg(long, default_value_t = 5_000)]
    continuation_pacing_ms: u64,
    /// How long every automatic continuation waits after ChatGPT said "Too
    /// many requests" on a managed tab, in ms (1000 to 86400000).
    #[arg(long, default_value_t = 900_000)]
    rate_limit_wait_ms: u64,
    /// A worker's turn that runs this long with no durable progress from it,
    /// or a submitted prompt whose turn never starts, is reported stalled
    /// (`continuation.turn_stalled`); nothing reloads it. In ms (60000 to 86400000).
    #[arg(long, default_value_t = 1_200_000)]
    stalled_turn_after_ms: u64,
    /// The context meter's threshold: a worker whose conversation carried
    /// this many more bytes than when it first attached (prompts, attach,
    /// reports, messages: what the orchestrator sees) is asked to checkpoint
    /// and roll over to a fresh conversation; 0 turns the meter off (a full
    /// conversation still rolls over). 10000 to 100000000.
    #[arg(long, default_value_t = control::rollover::RolloverPolicy::DEFAULT_AT_BYTES)]
    rollover_at_bytes: u64,
    /// How long a requested rollover waits for the worker's checkpoint, in
    /// ms (1000 to 3600000).
    #[arg(long, default_value_t = control::rollover::RolloverPolicy::DEFAULT_CHECKPOINT_WAIT_MS)]
    rollover_checkpoint_wait_ms: u64,
}

impl ExecutorArgs {
    fn config(self) -> anyhow::Result<BridgeConfig> {
        if self.max_launches == 0 || self.max_active_workers == 0 {
            bail!("--max-launches and --max-active-workers must be at least 1");
        }
        if self.executor_heartbeat_ms == 0 || self.executor_lease_ms <= self.executor_heartbeat_ms {
            bail!("--executor-lease-ms must exceed --executor-heartbeat-ms (> 0)");
        }
        if self.executor_recheck_after_ms < 100 {
            bail!("--executor-recheck-after-ms must be at least 100");
        }
        if !(1_000..=600_000).contains(&self.continuation_pacing_ms) {
            bail!("--continuation-pacing-ms must be between 1000 and 600000");
        }
        if !(60_000..=86_400_000).contains(&self.stalled_turn_after_ms) {
            bail!("--stalled-turn-after-ms must be between 60000 and 86400000");
        }
        if !(1_000..=86_400_000).contains(&self.rate_limit_wait_ms) {
            bail!("--rate-limit-wait-ms must be between 1000 and 86400000");
        }
        // One tab alone could be held by a managed root for good.
        if self.max_open_tabs.is_some_and(|n| !(2..=1_000).contains(&n)) {
            bail!("--max-open-tabs must be between 2 and 1000");
        }
        if !(1_000..=86_400_000).contains(&self.tab_idle_grace_ms) {
            bail!("--tab-idle-grace-ms must be between 1000 and 86400000");
        }
        if self.rollover_at_bytes != 0 && !(10_000..=100_000_000).contains(&self.rollover_at_bytes) {
            bail!("--rollover-at-bytes must be 0 (off) or between 10000 and 100000000");
        }
        if !(1_000..=3_600_000).contains(&self.rollover_checkpoint_wait_ms) {
            bail!("--rollover-checkpoint-wait-ms must be between 1000 and 3600000");
        }
        let rollover = control::rollover::RolloverPolicy {
            at_bytes: (self.rollover_at_bytes > 0).then_some(self.rollover_at_bytes),
            checkpoint_wait_ms: self.rollover_checkpoint_wait_ms,
        };
        // Uncapped, nothing is parked; a worker whose tab was lost is still
        // opened again before its next prompt.
        let max_open = self.max_open_tabs.unwrap_or(usize::MAX);
        let tabs = Some(control::tabs::TabPolicy { max_open, idle_grace_ms: self.tab_idle_grace_ms });
        Ok(BridgeConfig {
            heartbeat_ms: self.executor_heartbeat_ms,
            lease_ms: self.executor_lease_ms,
            create_timeout_ms: self.executor_create_timeout_ms,
            send_timeout_ms: self.executor_send_timeout_ms,
            limits: Limits {
                max_launches: self.max_launches,
                max_active: self.max_active_workers,
                max_open_tabs: self.max_open_tabs,
            },
            recheck: control::schedule::Policy {
                recheck_after_ms: self.executor_recheck_after_ms,
                pacing: control::continuity::Pacing {
                    min_gap_ms: self.continuation_pacing_ms,
                    rate_limit_wait_ms: self.rate_limit_wait_ms,
                    stalled_turn_after_ms: self.stalled_turn_after_ms,
                },
                tabs,
                rollover,
            },
            extension_ids: self.extension_ids,
            ..BridgeConfig::default()
        })
    }
}

/// `orchestrator pair` and its management flags.
fn pair(args: PairArgs) -> anyhow::Result<()> {
    let PairArgs {
        state_dir,
        executor_id,
        list,
        revoke,
        rotate,
        json,
        credential_file,
        listen,
        operator,
        remote,
        executor_cert,
    } = args;
    let path = state_path(state_dir)?;
    std::fs::create_dir_all(&path)?;
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o700))?;
    }
    let credentials = Credentials::open_or_create(&path.join("executors"))?;
    if list {
        let issued = credentials.list()?;
        if json {
            let rows: Vec<_> = issued
                .iter()
                .map(|i| serde_json::json!({"executorId": i.executor_id, "issuedMs": i.issued_ms, "operator": i.operator}))
                .collect();
            println!("{}", serde_json::Value::Array(rows));
        } else if issued.is_empty() {
            println!("no executor is paired; run `orchestrator pair`");
        } else {
            for i in issued {
                let operator = if i.operator { "  operator" } else { "" };
                println!("{}  issued {} ms{operator}", i.executor_id, i.issued_ms);
            }
        }
        return Ok(());
    }
    if let Some(id) = revoke {
        if !credentials.revoke(&id)? {
            bail!("no executor {id} is paired (see `orchestrator pair --list`)");
        }
        match json {
            true => println!("{}", serde_json::json!({"revoked": [id]})),
            false => println!("revoked {id}: its session closes within a second"),
        }
        return Ok(());
    }
    if rotate {
        let n = credentials.revoke_all()?;
        if executor_id.is_none() {
            match json {
                true => println!("{}", serde_json::json!({"revokedCount": n})),
                false => println!("revoked {n} credential(s): every executor must be paired again"),
            }
            return Ok(());
        }
        if !json {
            println!("revoked {n} credential(s): every executor must be paired again");
        }
    }
    let id = executor_id.unwrap_or_else(|| {
        let mut bytes = [0u8; 4];
        getrandom::fill(&mut bytes).expect("the OS random source is available");
        format!("exec-{}", bytes.iter().map(|b| format!("{b:02x}")).collect::<String>())
    });
    if let Some(remote) = remote {
        // Checked before anything is issued: the agent dials exactly this.
        let endpoint = format!("wss://{remote}/executor");
        carrier_cdp::pairing::check_remote_url(&endpoint).map_err(|_| {
            anyhow::anyhow!(
                "--remote is HOST:PORT, an address the agent's machine dials to reach `serve --executor-listen` \
                 (not a wildcard such as 0.0.0.0)"
            )
        })?;
        let pin = match &executor_cert {
            Some(cert) => {
                let pem = std::fs::read(cert).with_context(|| format!("reading {}", cert.display()))?;
                executor_tls::pin_of_pem(&pem).with_context(|| format!("{} holds no certificate", cert.display()))?
            }
            None => executor_tls::Identity::load_or_create(&path)?.pin(),
        };
        let credential = credentials.issue_with(&id, false)?;
        let document = serde_json::json!({"endpoint": endpoint, "executorId": id, "credential": credential,
            "fingerprint": pin.to_string()});
        if let Some(file) = &credential_file {
            server::exposure::write_private(file, &format!("{document}\n"))
                .with_context(|| format!("writing {}", file.display()))?;
        }
        match (json, &credential_file) {
            (true, _) => println!("{document}"),
            (false, file) => {
                let file = file.as_ref().expect("--remote requires --credential-file").display();
                println!("endpoint:    {endpoint}\nexecutor:    {id}\nfingerprint: {pin}");
                println!("credential:  written to {file} with the endpoint and fingerprint (owner-only)");
                println!(
                    "\nOn the agent's machine, with that file (owner-only):\n  orchestrator carrier-agent --cdp \
                     --daemon {endpoint} --credential-file {file} --channel chrome\nThe agent trusts only the \
                     certificate with this fingerprint; `orchestrator pair --revoke {id}` withdraws it."
                );
            }
        }
        return Ok(());
    }
    let credential = credentials.issue_with(&id, operator)?;
    if let Some(file) = &credential_file {
        server::exposure::write_private(file, &format!("{credential}\n"))
            .with_context(|| format!("writing {}", file.display()))?;
    }
    if json {
        let out = serde_json::json!({"endpoint": format!("ws://{listen}/executor"), "executorId": id, "credential": credential});
        println!("{out}");
    } else {
        println!("endpoint:   ws://{listen}/executor");
        println!("executor:   {id}{}", if operator { " (with a person's controls over the pool)" } else { "" });
        match &credential_file {
            Some(file) => println!("credential: written to {} (owner-only)", file.display()),
            None => println!("credential: {credential}"),
        }
        println!("\n{PAIRING_STEPS}");
    }
    Ok(())
}

/// The running daemon's status, or (exit 2) what to do when none answers:
/// scripts get a document too, a person the next step.
async fn status_or_exit(
    state_dir: Option<PathBuf>,
    addr: Option<String>,
    json: bool,
) -> anyhow::Result<server::admin::Status> {
    let state = state_path(state_dir)?;
    let addr = addr.unwrap_or_else(|| server::admin::authority_of(&mcp_url_of(&state)));
    match server::admin::fetch(&addr, &state).await {
        Ok(status) => Ok(status),
        Err(e) => {
            let hint = format!(
                "no daemon answered at {addr} (state directory {}): start it with `orchestrator serve`, or point at \
                 it with --addr HOST:PORT / --state-dir DIR",
                state.display()
            );
            match json {
                true => println!(
                    "{}",
                    serde_json::json!({"running": false, "addr": addr, "error": e.to_string(), "next": hint})
                ),
                false => eprintln!("{e}\n{hint}"),
            }
            std::process::exit(2);
        }
    }
}

/// `orchestrator setup`: asks on a terminal, or nothing with `--yes`.
async fn setup(args: SetupArgs) -> anyhow::Result<()> {
    use std::io::IsTerminal;
    let terminal = std::io::stdin().is_terminal();
    if !args.yes && !terminal {
        bail!("setup asks you to compare a pairing code: run it on a terminal, or pass --yes");
    }
    let options = server::setup::Options {
        state_dir: state_path(args.state_dir)?,
        listen: args.listen,
        browser: args.browser.map(|b| match b.as_str() {
            "firefox" => server::setup::Browser::Firefox,
            _ => server::setup::Browser::Chromium,
        }),
        chromium_user_data_dir: args.chromium_user_data_dir,
        bundle: args.bundle,
        app_label: args.app_label,
        expose_host: args.expose_host,
        wait: std::time::Duration::from_secs(args.wait_s),
    };
    let code = match args.yes {
        true => server::setup::run(options, &mut server::setup::Nobody).await,
        false => server::setup::run(options, &mut server::setup::Terminal).await,
    };
    std::process::exit(code)
}

/// `service install|uninstall`.
fn service(action: ServiceAction) -> anyhow::Result<()> {
    let home = PathBuf::from(std::env::var_os("HOME").context("HOME is not set")?);
    match action {
        ServiceAction::Install { carrier_agent, print, manager, json, serve_args } => {
            let manager = ManagerArg::or_here(manager);
            let service = if carrier_agent { Service::CarrierAgent } else { Service::Daemon };
            if serve_args.iter().any(|a| a.chars().any(char::is_control)) {
                bail!("an argument holds a control character; the service file cannot carry it");
            }
            let mut args = vec![service.subcommand().to_owned()];
            args.extend(serve_args);
            // Checked now, not at the first restart.
            let argv = std::iter::once("orchestrator".to_owned()).chain(args.iter().cloned());
            let parsed = Cli::try_parse_from(argv)
                .map_err(|e| anyhow::anyhow!("the {} arguments: {e}", service.subcommand()))?
                .command;
            // The service runs elsewhere (cwd, environment): pin every path
            // this shell would resolve, as an absolute one.
            match parsed {
                Cmd::Serve { state_dir, .. } => {
                    if state_dir.is_none() {
                        args.push("--state-dir".into());
                        args.push(std::path::absolute(state_path(None)?)?.display().to_string());
                    }
                    absolutize(&mut args, &["--state-dir"])?;
                }
                Cmd::CarrierAgent { state_file, state_dir, .. } => {
                    if !args.iter().any(|a| a == "--bundle" || a.starts_with("--bundle=")) {
                        args.push("--bundle".into());
                        args.push("dist/chromium/pkg".into());
                    }
                    if state_file.is_none() && state_dir.is_none() {
                        args.push("--state-file".into());
                        args.push(state_path(None)?.join("cdp-agent.json").display().to_string());
                    }
                    absolutize(
                        &mut args,
                        &["--credential-file", "--bundle", "--user-data-dir", "--state-file", "--state-dir"],
                    )?;
                }
                _ => unreachable!("parsed as {}", service.subcommand()),
            }
            let exe = std::env::current_exe()?.canonicalize()?;
            let logs = home.join("Library/Logs").join(server::service::NAME);
            let text = manager.render(service, &exe, &args, &logs);
            if print {
                print!("{text}");
                return Ok(());
            }
            let path = manager.path(service, &home);
            std::fs::create_dir_all(path.parent().expect("a file in a directory"))?;
            if manager == server::service::Manager::Launchd {
                std::fs::create_dir_all(&logs)?;
            }
            std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
            match json {
                true => println!("{}", serde_json::json!({"path": path, "enable": manager.enable_hint(service)})),
                false => println!("wrote {}\nenable it with:\n  {}", path.display(), manager.enable_hint(service)),
            }
        }
        ServiceAction::Uninstall { carrier_agent, manager, json } => {
            let manager = ManagerArg::or_here(manager);
            let service = if carrier_agent { Service::CarrierAgent } else { Service::Daemon };
            let path = manager.path(service, &home);
            let removed = match std::fs::remove_file(&path) {
                Ok(()) => true,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => false,
                Err(e) => return Err(e).with_context(|| format!("removing {}", path.display())),
            };
            match (json, removed) {
                (true, _) => println!("{}", serde_json::json!({"path": path, "removed": removed})),
                (false, true) => {
                    println!("removed {}; if it was running:\n  {}", path.display(), manager.disable_hint(service))
                }
                (false, false) => println!("no service file at {}", path.display()),
            }
        }
    }
    Ok(())
}

/// What the banner says about the ChatGPT side: the app label and the
/// exposure, each with the next step when it is missing. Never a secret.
fn setup_facts(setup: &control::ChatgptSetup, allowed_hosts: &[String], has_secret: bool) -> String {
    let app = match &setup.app_label {
        Some(label) => format!("setup: app label {label:?}"),
        None => "setup: no --app-label: worker conversations cannot be bound to the orchestrator's app and will \
                 not attach; pass --app-label \"<the app's name in ChatGPT>\" (docs/setup.md)"
            .to_owned(),
    };
    let exposure = format!("setup: {}", server::admin::exposure(allowed_hosts, has_secret).1);
    format!("{app}\n{exposure}")
}

/// The MCP URL of the daemon running on `state`, else the default one.
fn mcp_url_of(state: &std::path::Path) -> String {
    server::state_dir::running_endpoint(state).unwrap_or_else(|| "http://127.0.0.1:7777/mcp".into())
}

/// Where a local client reaches a daemon bound to `addr`: loopback of the
/// same family when it listens on every address.
fn loopback_of(addr: SocketAddr) -> SocketAddr {
    match addr.ip() {
        std::net::IpAddr::V4(ip) if ip.is_unspecified() => SocketAddr::from(([127, 0, 0, 1], addr.port())),
        std::net::IpAddr::V6(ip) if ip.is_unspecified() => {
            SocketAddr::from((std::net::Ipv6Addr::LOCALHOST, addr.port()))
        }
        _ => addr,
    }
}

/// Prints start-up lines; a closed stdout must not take the daemon down.
fn announce(text: &str) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{text}").and_then(|()| out.flush());
}

/// Makes the value of each of `flags` in `args` an absolute path, whether
/// it follows the flag or is joined to it (`--flag=value`).
fn absolutize(args: &mut [String], flags: &[&str]) -> anyhow::Result<()> {
    for i in 0..args.len() {
        if flags.contains(&args[i].as_str()) && i + 1 < args.len() {
            args[i + 1] = std::path::absolute(&args[i + 1])?.display().to_string();
        } else if let Some((flag, value)) = args[i].split_once('=')
            && flags.contains(&flag)
        {
            args[i] = format!("{flag}={}", std::path::absolute(value)?.display());
        }
    }
    Ok(())
}

/// `orchestrator canary …`.
async fn canary(action: CanaryAction) -> anyhow::Result<()> {
    match action {
        CanaryAction::Deploy { state_dir, listen, app_label, worker_project_url, serve_args } => {
            let state = std::path::absolute(&state_dir)?;
            if StateDir::is_everyday(&state)? {
                anyhow::bail!("the canary never runs on your everyday state directory; give it one of its own");
            }
            let serve_args = server::canary_deploy::serve_args(serve_args)?;
            std::fs::create_dir_all(&state)?;
            let listen = server::canary_deploy::listen_address(&state, listen)?;
            let addr = loopback_of(listen);
            let mut serve: Vec<String> = ["--state-dir".into(), state.display().to_string()].into();
            serve.extend(["--listen".into(), listen.to_string(), "--app-label".into(), app_label.clone()]);
            if let Some(url) = &worker_project_url {
                serve.extend(["--worker-project-url".into(), url.clone()]);
            }
            serve.extend(serve_args);
            let record = serde_json::json!({"app_label": app_label, "worker_project_url": worker_project_url});
            let server::canary_deploy::Started { pid, status, .. } =
                server::canary_deploy::start(&state, addr, &serve, record).await?;
            let d = status.deployment.as_ref();
            println!(
                "canary daemon {} (pid {}) at http://{addr}/mcp
build: commit {} tree {}
state: {}
{}",
                d.map_or("?", |d| d.identity.instance_id.as_str()),
                pid,
                d.map_or("?", |d| d.identity.commit.as_str()),
                d.map_or("?", |d| d.identity.tree.as_str()),
                state.display(),
                server::canary_deploy::next_steps(&state, loopback_of(listen)),
            );
        }
        CanaryAction::Run {
            state_dir,
            receipts,
            gates,
            carrier,
            target,
            workers,
            faults,
            gate_timeout_s,
            prompt_budget,
            pacing_ms,
            attribution,
        } => {
            let target = match target.as_str() {
                "live" => canary::Target::Live,
                _ => canary::Target::Fakechat,
            };
            if StateDir::is_everyday(&std::path::absolute(&state_dir)?)? {
                anyhow::bail!("the canary never runs on your everyday state directory; deploy one of its own");
            }
            let deployed = std::fs::read(state_dir.join("canary.json")).ok();
            if target == canary::Target::Live && deployed.is_none() {
                anyhow::bail!(
                    "--target live runs only against a daemon `orchestrator canary deploy` started (with its own app label); {} has none",
                    state_dir.display()
                );
            }
            let gates = match gates {
                None => vec![
                    canary::Gate::G1D,
                    canary::Gate::G0,
                    canary::Gate::G2,
                    canary::Gate::G3,
                    canary::Gate::G4,
                    canary::Gate::G5,
                    canary::Gate::G6,
                ],
                Some(list) => list
                    .split(',')
                    .map(|g| {
                        canary::Gate::parse(g).ok_or_else(|| anyhow::anyhow!("unknown gate {g:?} (G0, G1D, G2 … G6)"))
                    })
                    .collect::<anyhow::Result<_>>()?,
            };
            if workers == 0 || workers > 8 {
                anyhow::bail!("--workers must be 1-8");
            }
            // The canary's own daemon or none: never the everyday one.
            let Some(mcp_url) = server::state_dir::running_endpoint(&state_dir) else {
                anyhow::bail!(
                    "no daemon runs on {}: start it with `orchestrator canary deploy --state-dir {}`",
                    state_dir.display(),
                    state_dir.display()
                );
            };
            let cfg = server::canary_runner::Config {
                mcp_url,
                state_dir,
                receipts: receipts.clone(),
                gates,
                carrier,
                target,
                workers,
                faults: server::canary_runner::Faults::parse(&faults)?,
                gate_timeout: std::time::Duration::from_secs(gate_timeout_s),
                prompt_budget,
                pacing: std::time::Duration::from_millis(pacing_ms),
                attribution: match attribution.as_str() {
                    "capability_only" => canary::Attribution::CapabilityOnly,
                    _ => canary::Attribution::Required,
                },
            };
            eprintln!(
                "canary: gates {:?} on {target:?}, {workers} workers, at most {prompt_budget} prompts, {pacing_ms} ms apart; receipts in {}",
                cfg.gates,
                receipts.display()
            );
            let outcome = server::canary_runner::run(cfg).await?;
            // What it leaves in the account: the conversations stay in its history.
            println!("conversations the run created or reopened: {}", outcome.conversations.len());
            for conversation in &outcome.conversations {
                println!("  {conversation}");
            }
            println!("claim reached: {}", outcome.claim);
            if let Some(head) = &outcome.head {
                println!(
                    "chain head: {head} (keep it elsewhere: `orchestrator canary verify {} --head {head}` checks the receipts against it)",
                    receipts.display()
                );
            }
            if let Some(stopped) = outcome.stopped {
                println!("stopped: {stopped}");
                std::process::exit(1);
            }
        }
        CanaryAction::Verify { receipts, head } => match canary::verify_head(&receipts, &head) {
            Ok(chain) => {
                let s = &chain.summary;
                println!("verified: {} receipts, head {}", chain.receipts.len(), chain.head().unwrap_or_default());
                let line = format!("claim: {} (on {}, daemon on {})", s.claim, s.platform.os, s.platform.daemon);
                println!("{}", canary::show::printable(&line));
            }
            Err(e) => {
                eprintln!("refused: {e}");
                std::process::exit(2);
            }
        },
        CanaryAction::Stop { state_dir } => {
            let mcp_url = server::state_dir::running_endpoint(&state_dir);
            let wait = std::time::Duration::from_secs(120);
            for line in server::canary_stop::stop(&state_dir, mcp_url.as_deref(), wait).await? {
                println!("{line}");
            }
        }
        CanaryAction::Teardown { state_dir } => {
            if StateDir::is_everyday(&std::path::absolute(&state_dir)?)? {
                anyhow::bail!("teardown is for a canary's own state directory, never your everyday one");
            }
            for line in server::canary_stop::teardown(&state_dir, std::time::Duration::from_secs(120)).await? {
                println!("{line}");
            }
        }
        CanaryAction::Show { receipts, json, html } => match canary::verify(&receipts) {
            Ok(chain) if json => println!("{}", canary::show::json(&chain)),
            Ok(chain) if html => print!("{}", canary::report::html(&chain)),
            Ok(chain) => print!("{}", canary::show::text(&chain)),
            Err(e) => {
                eprintln!("refused: {e}");
                std::process::exit(2);
            }
        },
    }
    Ok(())
}

/// `orchestrator prune`: the retention policy on a stopped daemon's store.
fn prune(path: &std::path::Path, older_than_days: u64, dry: bool, json: bool) -> anyhow::Result<()> {
    let dir = StateDir::open(path).context("prune works on a stopped daemon's state directory")?;
    let store = SqliteStore::open(&dir.database()).context("opening the store")?;
    let now = control::Clock::now_ms(&SystemClock);
    let report = control::plane::prune(&store, now, older_than_days * 86_400_000, dry)
        .map_err(|e| anyhow::anyhow!("the store cannot be pruned: {e}"))?;
    let (runs, pruned) = (&report.runs, &report.pruned);
    if json {
        let out = serde_json::json!({
            "dry_run": dry,
            "older_than_days": older_than_days,
            "runs": runs,
            "events": pruned.events,
            "idempotency_records": pruned.idempotency_records,
        });
        println!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(());
    }
    let verb = if dry { "would remove" } else { "removed" };
    println!(
        "{verb} {} run(s) that ended more than {older_than_days} day(s) ago: {} event(s), {} idempotency record(s)",
        runs.len(),
        pruned.events,
        pruned.idempotency_records
    );
    for run in runs {
        let state = serde_json::to_value(run.state)?;
        println!("  {}  {:<10} {}", run.run_id, state.as_str().unwrap_or("ended"), run.title);
    }
    Ok(())
}

fn state_path(state_dir: Option<PathBuf>) -> anyhow::Result<PathBuf> {
    match state_dir {
        Some(p) => Ok(p),
        None => StateDir::default_path(),
    }
}

const PAIRING_STEPS: &str = "\
To pair the browser extension (issue its credential with --operator for the popup's and
the overlay's view of the pool and their controls):
  1. Open the extension's options page (about:addons in Firefox, chrome://extensions in Chromium).
  2. Set the endpoint to the URL above and paste the credential into the Credential field.
  3. Save: the status shows \"connected\" once the daemon accepts the hello.
The credential speaks for this one executor only. It is a secret: never paste it
into a chat, a prompt or a URL. `orchestrator pair --revoke <id>` withdraws it.";

/// The running daemon's ownership answer, or the next step and exit 2.
async fn owners_or_exit(
    state_dir: Option<PathBuf>,
    addr: Option<String>,
    query: &server::ownership::Query,
) -> anyhow::Result<server::ownership::Owners> {
    let state = state_path(state_dir)?;
    let addr = addr.unwrap_or_else(|| server::admin::authority_of(&mcp_url_of(&state)));
    match server::admin::fetch_owners(&addr, &state, query).await {
        Ok(owners) => Ok(owners),
        Err(e) => {
            eprintln!(
                "{e}\nno daemon answered at {addr} (state directory {}): start it with `orchestrator serve`, or point at it with --addr HOST:PORT / --state-dir DIR",
                state.display()
            );
            std::process::exit(2);
        }
    }
}

fn now_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

fn open_plane(dir: StateDir, host: control::ChatgptSetup) -> anyhow::Result<(StateDir, Arc<ControlPlane>)> {
    let store = SqliteStore::open(&dir.database()).context("opening the store")?;
    let plane = ControlPlane::open(Arc::new(store), Arc::new(SystemClock), dir.keyring()?)
        .map_err(|e| anyhow::anyhow!("{}: {e}", e.code()))?;
    Ok((dir, Arc::new(plane.with_chatgpt_setup(host))))
}

/// Cancels `token` on SIGINT or SIGTERM.
fn cancel_on_signals(token: CancellationToken) -> anyhow::Result<()> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut int = signal(SignalKind::interrupt())?;
    let mut term = signal(SignalKind::terminate())?;
    tokio::spawn(async move {
        tokio::select! {
            _ = int.recv() => {}
            _ = term.recv() => {}
        }
        token.cancel();
    });
    Ok(())
}

/// Library targets whose debug and trace events carry request, response and
/// frame bodies (capabilities, attach identities, executor credentials,
/// prompts): never logged below INFO, whatever `RUST_LOG` says.
const BODY_LOGGING_TARGETS: &[&str] =
    &["rmcp", "tungstenite", "tokio_tungstenite", "hyper", "hyper_util", "h2", "axum", "tower_http", "reqwest"];

/// Logs to stderr, filtered by `RUST_LOG` (default `info`), with
/// [`BODY_LOGGING_TARGETS`] capped at INFO so no secret reaches a log.
fn init_logging() {
    use tracing_subscriber::Layer;
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    // By default the domain speaks at INFO and the MCP transport only warns
    // (at INFO it writes about three lines per call).
    let env = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info,rmcp=warn".into());
    let no_bodies = tracing_subscriber::filter::filter_fn(|meta| {
        *meta.level() <= tracing::Level::INFO
            || !BODY_LOGGING_TARGETS.iter().any(|t| {
                meta.target() == *t || meta.target().strip_prefix(t).is_some_and(|rest| rest.starts_with("::"))
            })
    });
    // Colours only for a person at a terminal, never into files, pipes or an MCP client's log.
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let layer = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(ansi)
        .with_filter(env)
        .with_filter(no_bodies);
    tracing_subscriber::registry().with(layer).init();
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    init_logging();
    let shutdown = CancellationToken::new();
    cancel_on_signals(shutdown.clone())?;
    match Cli::parse().command {
        Cmd::Serve {
            state_dir,
            listen,
            allowed_hosts,
            allowed_origins,
            oauth,
            public_url,
            header_read_timeout_ms,
            body_read_timeout_ms,
            attribution_wait_ms,
            worktree_roots,
            executor_listen,
            executor_cert,
            executor_key,
            executor,
            runtime,
            host,
            local_cdp,
        } => {
            if header_read_timeout_ms == 0 || body_read_timeout_ms == 0 {
                bail!("--header-read-timeout-ms and --body-read-timeout-ms must be at least 1");
            }
            let bridge_config = executor.config()?;
            let pool_config = runtime.config()?;
            let host = host.setup()?;
            let state_dir = state_path(state_dir)?;
            let mcp_secret = server::exposure::load_secret(&state_dir)?;
            if !listen.ip().is_loopback() && mcp_secret.is_none() {
                bail!(
                    "refusing to listen on {listen} without an MCP secret: the tools would be open to the network \
                     (run `orchestrator expose --host <hostname>` first, or set ORCHESTRATOR_MCP_SECRET)"
                );
            }
            if let (Some(exposed), None) = (allowed_hosts.first(), &mcp_secret) {
                bail!(
                    "refusing --allowed-host {exposed} without an MCP secret: whoever reaches that host would hold \
                     every tool. Run `orchestrator expose --host {exposed}` and paste the URL it prints into ChatGPT"
                );
            }
            let oauth_url = match (oauth, allowed_hosts.first(), &mcp_secret) {
                (false, ..) => None,
                (true, Some(exposed), Some(_)) => {
                    Some(server::oauth::check_public_url(&public_url.unwrap_or_else(|| format!("https://{exposed}")))?)
                }
                (true, ..) => bail!(
                    "--oauth needs an exposed host and its owner key: run `orchestrator expose --host <hostname>` and \
                     pass --allowed-host <hostname>"
                ),
            };
            let setup = setup_facts(&host, &allowed_hosts, mcp_secret.is_some());
            let worktrees = match worktree_roots.as_slice() {
                [] => None,
                roots => Some(Arc::new(
                    worktrees::Git::new(roots).context("--worktree-root must name existing directories")?,
                )),
            };
            let (dir, plane) = open_plane(StateDir::open(&state_dir)?, host)?;
            if let Some(git) = &worktrees {
                // A change recorded just before a crash may lack its projection.
                for (id, error) in server::ownership::repair(git, &plane) {
                    tracing::warn!(ownership = %id, %error, "worktree projection not repaired");
                }
            }
            let credentials = Credentials::open_or_create(&dir.path().join("executors"))?;
            let admin_token = Some(server::admin::issue_token(dir.path())?);
            let oauth = match (oauth_url, &mcp_secret) {
                (Some(public_url), Some(owner_key)) => {
                    let setup = server::oauth::OAuthSetup {
                        public_url,
                        owner_key: owner_key.clone(),
                        state_dir: dir.path().to_owned(),
                    };
                    Some(server::oauth::OAuth::start(setup).await?)
                }
                _ => None,
            };
            let oauth_facts = oauth
                .as_ref()
                .map(|o| format!("\nsetup: OAuth 2.1 offered; hosts discover it at {}", o.resource_metadata_url()));
            let setup = setup + &oauth_facts.unwrap_or_default();
            let attribution_wait = std::time::Duration::from_millis(attribution_wait_ms);
            let config = HttpConfig {
                allowed_hosts,
                allowed_origins,
                mcp_secret,
                admin_token,
                oauth,
                attribution_wait,
                state_root: Some(dir.path().to_owned()),
                worktrees,
            };
            let listener = tokio::net::TcpListener::bind(listen).await.with_context(|| format!("binding {listen}"))?;
            let addr = listener.local_addr()?;
            dir.record_endpoint(&format!("http://{}/mcp", loopback_of(addr)))?;
            // The build id hashes the image now, before anything can replace the file.
            tokio::task::spawn_blocking(server::deployment::build_id);
            let paired = credentials.list().map(|l| l.len()).unwrap_or(0);
            announce(&format!(
                "orchestrator listening on http://{addr} (state: {})\nMCP endpoint: http://{addr}/mcp\nexecutor endpoint: ws://{addr}/executor\n{setup}\n{}",
                dir.path().display(),
                if paired == 0 {
                    "setup: no executor is paired, so no worker conversation can be opened: run `orchestrator pair` and \
                     paste the credential into the extension's options page"
                        .to_owned()
                } else {
                    format!("setup: {paired} executor(s) paired")
                }
            ));
            let executor_endpoint = format!("ws://{}/executor", loopback_of(addr));
            let local_agent = local_cdp.config(&credentials, executor_endpoint, dir.path())?;
            let bridge = Bridge::start(plane.clone(), bridge_config, credentials, shutdown.child_token());
            let pool = Arc::new(Pool::new(plane.clone(), pool_config));
            let remote_router = carrier_webext::remote_router(bridge.clone());
            let router = app(plane, pool, bridge, &config, shutdown.child_token());
            let timeouts = server::http::Timeouts {
                header_read: std::time::Duration::from_millis(header_read_timeout_ms),
                body_read: std::time::Duration::from_millis(body_read_timeout_ms),
            };
            let remote = match executor_listen {
                None => None,
                Some(addr) => {
                    let identity = match (&executor_cert, &executor_key) {
                        (Some(cert), Some(key)) => executor_tls::Identity::load(cert, key)?,
                        _ => executor_tls::Identity::load_or_create(dir.path())?,
                    };
                    let remote =
                        tokio::net::TcpListener::bind(addr).await.with_context(|| format!("binding {addr}"))?;
                    println!(
                        "remote executor endpoint: wss://{}/executor (TLS, certificate {}; pair host agents with \
                         `orchestrator pair --executor-id ID --remote HOST:PORT --credential-file FILE`)",
                        remote.local_addr()?,
                        identity.pin()
                    );
                    let serving = server::http::serve_tls(
                        remote,
                        remote_router,
                        timeouts,
                        shutdown.clone(),
                        identity.acceptor()?,
                    );
                    Some(tokio::spawn(serving))
                }
            };
            // The local CDP agent dials this daemon's executor endpoint like any
            // other executor (it only starts once the listener is accepting).
            let local_agent = local_agent.map(carrier_cdp::Agent::start).transpose()?;
            server::http::serve(listener, router, timeouts, shutdown.clone()).await?;
            if let Some(remote) = remote {
                remote.await??;
            }
            if let Some(agent) = local_agent {
                agent.stop().await;
            }
            dir.forget_endpoint();
            tracing::info!("stopped");
        }
        Cmd::Pair(args) => pair(args)?,
        Cmd::Setup(args) => setup(args).await?,
        Cmd::Prune { state_dir, older_than, dry_run, json } => {
            prune(&state_path(state_dir)?, older_than, dry_run, json)?
        }
        Cmd::Expose { state_dir, host, rotate, json } => {
            let hostname = |h: &str| {
                !h.is_empty()
                    && h.len() <= 253
                    && h.split('.').all(|l| {
                        !l.is_empty() && l.len() <= 63 && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
                    })
            };
            if !hostname(&host) {
                bail!("--host is a bare hostname, such as my-tunnel.example.com");
            }
            let secret = server::exposure::create_secret(&state_path(state_dir)?, rotate)?;
            // A loopback "host" is a tunnel that forwards to loopback (OpenAI's
            // tunnel-client): serve needs no extra Host, and the URL is local.
            let loopback = host == "localhost" || host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback());
            let (url, serve) = match loopback {
                true => (format!("http://127.0.0.1:7777/s/{secret}/mcp"), "orchestrator serve".to_owned()),
                false => {
                    (server::exposure::paste_url(&host, &secret), format!("orchestrator serve --allowed-host {host}"))
                }
            };
            if json {
                let oauth = serde_json::json!({
                    "serve": format!("{serve} --oauth"),
                    "url": format!("https://{host}/mcp"),
                    "ownerKey": secret,
                });
                println!("{}", serde_json::json!({ "url": url, "host": host, "serve": serve, "oauth": oauth }));
            } else {
                println!(
                    "Paste this URL into ChatGPT (Settings → Apps → Create, authentication: none):\n  {url}\n\n\
                     Run the daemon as:\n  {serve}\nand point your tunnel at it, for example:\n  \
                     cloudflared tunnel --url http://127.0.0.1:7777\n\n\
                     The URL is the credential: anyone holding it can use every tool. `--rotate` replaces it \
                     (restart serve afterwards).\n\n\
                     For a host that requires OAuth: run `{serve} --oauth`, give the host https://{host}/mcp, and \
                     approve its request by typing this owner key on the page it opens:\n  {secret}"
                );
            }
        }
        Cmd::Service { action } => service(action)?,
        Cmd::Canary { action } => canary(action).await?,
        Cmd::Ui { state_dir, addr, revoke_all } => {
            let state = state_path(state_dir)?;
            let addr = addr.unwrap_or_else(|| server::admin::authority_of(&mcp_url_of(&state)));
            if revoke_all {
                let ended = server::admin::ui_revoke_all(&addr, &state).await?;
                println!("{ended} dashboard session(s) ended; every link printed before is void");
                return Ok(());
            }
            match server::admin::ui_link(&addr, &state).await {
                Ok(link) => println!(
                    "{link}
(open it within a minute; it works once, in a browser on this machine)"
                ),
                Err(e) => {
                    eprintln!(
                        "{e}
no daemon answered at {addr}: start it with `orchestrator serve`, or point at it with --addr / --state-dir"
                    );
                    std::process::exit(2);
                }
            }
        }
        Cmd::Who { target, ask: OwnersArgs { repo, redact, json, state_dir, addr } } => {
            let queries = server::ownership::resolve(&target, repo.as_deref()).map_err(|e| anyhow::anyhow!(e))?;
            let mut owners = server::ownership::Owners { records: Vec::new() };
            for query in queries {
                let query = server::ownership::Query { redact, ..query };
                owners = owners_or_exit(state_dir.clone(), addr.clone(), &query).await?;
                if !owners.records.is_empty() {
                    break;
                }
            }
            if json {
                println!("{}", serde_json::to_string(&owners)?);
            } else if let Some((current, earlier)) = owners.records.split_last() {
                print!("{}", server::ownership::render(current, now_ms()));
                if !earlier.is_empty() {
                    println!(
                        "history       {} earlier record(s) of this worktree: orchestrator who <ownership id>",
                        earlier.len()
                    );
                    for record in earlier {
                        print!("  {}", server::ownership::render_line(record));
                    }
                }
            } else {
                eprintln!("no ownership record names {target}");
            }
            if owners.records.is_empty() {
                std::process::exit(1);
            }
        }
        Cmd::Owners { ask: OwnersArgs { repo, redact, json, state_dir, addr } } => {
            let git = worktrees::Git::new(&[PathBuf::from("/")])?;
            let repo = repo.map(|dir| git.repository_of(&dir)).transpose()?;
            let query = server::ownership::Query { repo, redact, ..Default::default() };
            let owners = owners_or_exit(state_dir, addr, &query).await?;
            if json {
                println!("{}", serde_json::to_string(&owners)?);
            } else if owners.records.is_empty() {
                println!("no worktree ownership recorded");
            } else {
                for record in &owners.records {
                    print!("{}", server::ownership::render_line(record));
                }
            }
        }
        Cmd::Status(AskArgs { state_dir, addr, json }) => {
            let status = status_or_exit(state_dir, addr, json).await?;
            if json {
                println!("{}", serde_json::to_string(&status)?);
            } else {
                print!("{}", server::admin::render(&status));
            }
        }
        Cmd::Hosts(AskArgs { state_dir, addr, json }) => {
            let hosts = server::hosts::of(&status_or_exit(state_dir, addr, json).await?);
            match json {
                true => println!("{}", serde_json::to_string(&hosts)?),
                false => print!("{}", server::hosts::render(&hosts)),
            }
        }
        Cmd::InspectPage { file, json } => print!("{}", server::inspect_page::run(&file, json)?),
        Cmd::CarrierAgent {
            cdp: _,
            daemon,
            credential_file,
            user_data_dir,
            channel,
            cdp_endpoint,
            launch_browser,
            launch_profile,
            launch_arg,
            capacity,
            bundle,
            state_dir,
            state_file,
            connect_timeout_ms,
        } => {
            let carrier_cdp::pairing::Credential { token, executor_id, pin } =
                carrier_cdp::pairing::read_credential(&credential_file)?;
            carrier_cdp::pairing::check_daemon_url(&daemon, pin)?;
            let dedicated = match (launch_browser, launch_profile) {
                (Some(browser), Some(profile)) => {
                    let dedicated = carrier_cdp::Dedicated { browser, profile, args: launch_arg };
                    let home = std::env::var_os("HOME").map(PathBuf::from);
                    let config_home = std::env::var_os("XDG_CONFIG_HOME").map(PathBuf::from);
                    dedicated.check(home.as_deref(), config_home.as_deref())?;
                    Some(dedicated)
                }
                _ => None,
            };
            let browser = match &dedicated {
                Some(d) => carrier_cdp::Endpoint::UserDataDir(d.profile.clone()),
                None => carrier_cdp::Endpoint::choose(user_data_dir, channel.as_deref(), cdp_endpoint)?,
            };
            let state_file = match state_file {
                Some(file) => file,
                None => state_path(state_dir)?.join("cdp-agent.json"),
            };
            if let Some(parent) = state_file.parent().filter(|p| !p.as_os_str().is_empty() && !p.exists()) {
                // Owner-only, as every state directory (SPEC §9): the journal
                // names the worker conversations this host holds.
                use std::os::unix::fs::DirBuilderExt;
                std::fs::DirBuilder::new().recursive(true).mode(0o700).create(parent)?;
            }
            let config = carrier_cdp::Config {
                daemon,
                daemon_pin: pin,
                token,
                executor_id,
                browser,
                bundle: carrier_cdp::page::Bundle::load(&bundle)?,
                state_file,
                connect_timeout: std::time::Duration::from_millis(connect_timeout_ms.clamp(100, 120_000)),
                approval_wait: carrier_cdp::connect::APPROVAL_WAIT,
                reconnect_delay: std::time::Duration::from_secs(1),
                capacity: Some(capacity),
                dedicated,
            };
            let agent = carrier_cdp::Agent::start(config)?;
            shutdown.cancelled().await;
            agent.stop().await;
        }
        Cmd::Doctor { mcp_url, state_dir, host, json } => {
            let expected = server::doctor::Expected {
                app_label: host.app_label.as_deref(),
                project_url: host.worker_project_url.as_deref(),
            };
            let state = state_path(state_dir)?;
            let mcp_url = mcp_url.unwrap_or_else(|| mcp_url_of(&state));
            let verdict = server::doctor::run(&mcp_url, &state, expected, json).await;
            std::process::exit(verdict.exit_code());
        }
        Cmd::McpStdio { state_dir } => {
            let path = state_path(state_dir)?;
            let dir = match StateDir::open(&path) {
                Ok(dir) => dir,
                Err(busy) => {
                    let Some(url) = server::state_dir::running_endpoint(&path) else { return Err(busy) };
                    let upstream = server::stdio_proxy::Upstream::new(&url, server::exposure::load_secret(&path)?)?;
                    let stdin = tokio::io::BufReader::new(tokio::io::stdin());
                    tokio::select! {
                        relayed = server::stdio_proxy::relay(upstream, stdin, tokio::io::stdout()) => relayed?,
                        _ = shutdown.cancelled() => {}
                    }
                    return Ok(());
                }
            };
            eprintln!(
                "mcp-stdio: no daemon runs on {}, so these tools are served alone: no executor can connect to this \
                 process, and a spawned worker waits for one (waiting_for: executor). Start `orchestrator serve` on \
                 this state directory instead and run mcp-stdio beside it: it then relays to the daemon.",
                path.display()
            );
            let (_dir, plane) = open_plane(dir, control::ChatgptSetup::default())?;
            let pool = Arc::new(Pool::new(plane.clone(), PoolConfig::default()));
            let service =
                Tools::new(plane, pool, None, server::peers::Peers::default()).serve(rmcp::transport::stdio()).await?;
            tokio::select! {
                _ = service.waiting() => {}
                _ = shutdown.cancelled() => {}
            }
        }
    }
    Ok(())
}
