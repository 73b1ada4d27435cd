//! Receipts: one JSON document per gate, each naming the SHA-256 of the
//! previous one's bytes, so a chain cannot be edited, reordered or cut in
//! the middle unnoticed; a `summary.json` names every receipt's hash, the
//! claim reached and why the run stopped. What the chain alone cannot show:
//! a rewrite of the last receipt *and* the summary together, or of the whole
//! chain. The run prints the head hash ([`Chain::head`]) for the operator to
//! keep elsewhere; `canary show` prints it to compare.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::gate::{Gate, Verdict, claim_reached};

/// The receipt format's version (2: every receipt and the summary name
/// their [`Platform`]).
pub const SCHEMA: u32 = 2;

/// Where the gates ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Target {
    /// fakechat: a rehearsal of the gates, never a claim about chatgpt.com.
    Fakechat,
    /// chatgpt.com, on the operator's own account.
    Live,
}

/// Whether the run's workers' calls were proven to come from their own
/// conversations (`required`, the default) or trusted on their capability
/// alone (`capability_only`, where a path cannot carry attribution: its
/// claims say so).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Attribution {
    /// Every worker call attributed to its own conversation.
    #[default]
    Required,
    /// Workers identified by their capability alone.
    CapabilityOnly,
}

/// What the claim of a `capability_only` run is prefixed with.
pub const CAPABILITY_ONLY_PREFIX: &str = "CAPABILITY_ONLY:";

/// The claim a chain's summary states: [`claim_reached`], prefixed
/// [`CAPABILITY_ONLY_PREFIX`] when callers were not proven.
fn summary_claim(target: Target, attribution: Attribution, os: &str, passed: &[Gate]) -> String {
    let claim = claim_reached(target == Target::Live, os, passed);
    match attribution {
        Attribution::Required => claim,
        Attribution::CapabilityOnly => format!("{CAPABILITY_ONLY_PREFIX} {claim}"),
    }
}

/// One executor as it introduced itself.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Executor {
    /// The executor's id.
    pub id: String,
    /// `webext` or `cdp`.
    pub carrier: String,
    /// The browser and its version, as the hello named it.
    pub browser: String,
    /// Its machine's OS, as the hello named it (`""`: it did not).
    #[serde(default)]
    pub os: String,
    /// The browser-control generation (changes when the browser restarts).
    pub generation: Option<String>,
}

/// The OS of a run whose machines disagree, or did not say, or had no
/// executor to say.
pub const UNNAMED: &str = "unnamed";

/// Where a run ran. A claim names [`Platform::os`] ([`crate::os_word`]):
/// the daemon's machine's OS when at least one executor was connected and
/// every executor's machine said the same, else [`UNNAMED`], which no
/// claim names.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Platform {
    /// `macos`, `linux` … or [`UNNAMED`].
    pub os: String,
    /// The daemon's machine's OS and architecture (`std::env::consts`).
    pub daemon: String,
    /// Each executor: its carrier, its browser and its machine's OS.
    pub browsers: Vec<String>,
}

impl Platform {
    /// The platform of a daemon on `os`/`arch` with `executors` connected.
    pub fn of(os: &str, arch: &str, executors: &[Executor]) -> Platform {
        let named = !os.is_empty() && !executors.is_empty() && executors.iter().all(|e| e.os == os);
        Platform {
            os: if named { os.to_owned() } else { UNNAMED.to_owned() },
            daemon: format!("{} {}", or_unsaid(os), or_unsaid(arch)),
            browsers: executors.iter().map(|e| format!("{} {} ({})", e.carrier, e.browser, or_unsaid(&e.os))).collect(),
        }
    }
}

/// `word`, or `?` when nothing was said.
pub fn or_unsaid(word: &str) -> &str {
    if word.is_empty() { "?" } else { word }
}

/// G1D: exactly which deployment the gates ran against.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Deployment {
    /// Source commit the binary was built from (`unknown` outside git).
    pub commit: String,
    /// The source tree's hash at build time (dirty trees say so).
    pub tree: String,
    /// The build's id (the binary's own SHA-256).
    pub build_id: String,
    /// The daemon's instance id (new at every start).
    pub instance_id: String,
    /// The daemon's state root.
    pub state_root: String,
    /// SHA-256 of the served `tools/list` (names, descriptions, schemas).
    pub tools_sha256: String,
    /// The executors connected, from their hellos.
    pub executors: Vec<Executor>,
    /// The app label the workers are bound to.
    pub app_label: Option<String>,
    /// The worker Project, if any.
    pub project_url: Option<String>,
}

/// What a gate counted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counts {
    /// Logical workers in the pool at the end of the gate.
    pub workers: u32,
    /// Distinct conversations they hold.
    pub conversations: u32,
    /// Distinct browser targets (tabs) they hold.
    pub targets: u32,
    /// External effects (commands to executors) the gate caused.
    pub effects: u32,
    /// Prompts sent into conversations.
    pub prompts_sent: u32,
    /// Tasks executed more than once.
    pub duplicates: u32,
    /// Results collected from another worker than the one tasked.
    pub cross_attributions: u32,
    /// Setup states a person had to resolve (signed out, challenge,
    /// approval prompt, app not ready, authorization prompt).
    pub manual_interactions: u32,
}

/// Where in the durable log the gate's evidence lies.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Evidence {
    /// The run the gate worked in.
    pub run_id: Option<String>,
    /// The run's event cursor before the gate.
    pub cursor_before: Option<u64>,
    /// And after it.
    pub cursor_after: Option<u64>,
    /// Ids of the events that decided the gate.
    pub event_ids: Vec<String>,
}

/// One gate's receipt.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Receipt {
    /// [`SCHEMA`].
    pub schema: u32,
    /// 1 for the first receipt of a chain.
    pub sequence: u32,
    /// The gate.
    pub gate: Gate,
    /// How it ended.
    #[serde(flatten)]
    pub verdict: Verdict,
    /// The typed stop reason, when it did not pass.
    pub stop_reason: Option<String>,
    /// The claim this receipt supports (its gate's, when it passed).
    pub claim: Option<String>,
    /// Where it ran.
    pub target: Target,
    /// Through which carrier (`webext`, `cdp`, `fake`).
    pub carrier: String,
    /// Whether workers' calls were proven to come from their conversations.
    #[serde(default)]
    pub attribution: Attribution,
    /// Where it ran.
    pub platform: Platform,
    /// The deployment.
    pub deployment: Deployment,
    /// The gate's inputs (worker counts, budgets, pacing).
    pub inputs: Value,
    /// What the gate saw, in order, for a person.
    pub observations: Vec<String>,
    /// The durable log's evidence.
    pub evidence: Evidence,
    /// Counts.
    pub counts: Counts,
    /// When the gate started (ms since the Unix epoch).
    pub started_at_ms: u64,
    /// How long it took.
    pub elapsed_ms: u64,
    /// SHA-256 (hex) of the previous receipt's bytes; `None` for the first.
    pub previous_sha256: Option<String>,
}

/// The chain's last word: written after every receipt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Summary {
    /// [`SCHEMA`].
    pub schema: u32,
    /// Where the run ran.
    pub target: Target,
    /// On what: every receipt's platform (one per chain; `verify` checks).
    pub platform: Platform,
    /// Whether callers were proven (every receipt's; `verify` checks).
    #[serde(default)]
    pub attribution: Attribution,
    /// The receipts, in order.
    pub receipts: Vec<Link>,
    /// The claim reached.
    pub claim: String,
    /// Why the run stopped early, if it did.
    pub stopped: Option<String>,
}

/// One receipt as the summary names it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Link {
    /// The receipt's file name.
    pub file: String,
    /// Its gate.
    pub gate: Gate,
    /// Whether it passed.
    pub passed: bool,
    /// SHA-256 (hex) of its bytes.
    pub sha256: String,
}

/// A chain that cannot be trusted, naming the receipt.
#[derive(Debug, thiserror::Error)]
#[error("{}: {why}", file.display())]
pub struct ChainError {
    /// The receipt (or summary) at fault.
    pub file: PathBuf,
    /// What is wrong with it.
    pub why: String,
}

/// Hex SHA-256 of `bytes`.
pub fn sha256(bytes: &[u8]) -> String {
    Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

fn file_name(sequence: u32, gate: Gate) -> String {
    format!("{sequence:02}-{gate}.json")
}

/// Appends receipts to a directory, chaining each to the one before.
pub struct Writer {
    dir: PathBuf,
    target: Target,
    links: Vec<Link>,
    passed: Vec<Gate>,
    /// The first receipt's platform: every other must be the same.
    platform: Option<Platform>,
    attribution: Attribution,
}

impl Writer {
    /// A new chain in `dir` (created; it must hold no receipts yet).
    pub fn create(dir: &Path, target: Target) -> Result<Writer, ChainError> {
        let fail = |why: String| ChainError { file: dir.to_owned(), why };
        std::fs::create_dir_all(dir).map_err(|e| fail(e.to_string()))?;
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)).map_err(|e| fail(e.to_string()))?;
        }
        let taken = std::fs::read_dir(dir)
            .map_err(|e| fail(e.to_string()))?
            .filter_map(Result::ok)
            .any(|e| e.file_name().to_string_lossy().ends_with(".json"));
        if taken {
            return Err(fail("already holds receipts; give each run its own directory".into()));
        }
        Ok(Writer {
            dir: dir.to_owned(),
            target,
            links: Vec::new(),
            passed: Vec::new(),
            platform: None,
            attribution: Attribution::Required,
        })
    }

    /// The chain of a run whose callers are proven as `attribution` says:
    /// every receipt says so, and so does the claim.
    pub fn with_attribution(mut self, attribution: Attribution) -> Writer {
        self.attribution = attribution;
        self
    }

    /// Writes `receipt` as the chain's next link (its sequence and previous
    /// hash are set here), then the summary. Returns the receipt's hash.
    pub fn append(&mut self, mut receipt: Receipt) -> Result<String, ChainError> {
        if let Some(first) = &self.platform
            && *first != receipt.platform
        {
            return Err(ChainError { file: self.dir.clone(), why: "one chain runs on one platform".into() });
        }
        self.platform = Some(receipt.platform.clone());
        receipt.schema = SCHEMA;
        receipt.attribution = self.attribution;
        receipt.sequence = self.links.len() as u32 + 1;
        receipt.previous_sha256 = self.links.last().map(|l| l.sha256.clone());
        receipt.stop_reason = receipt.verdict.stop_reason(receipt.gate);
        receipt.claim = receipt.verdict.passed().then(|| receipt.gate.claim(&receipt.platform.os));
        let file = file_name(receipt.sequence, receipt.gate);
        let bytes = serde_json::to_vec_pretty(&receipt).expect("a receipt serializes");
        let path = self.dir.join(&file);
        write_new(&path, &bytes).map_err(|e| ChainError { file: path.clone(), why: e.to_string() })?;
        let hash = sha256(&bytes);
        if receipt.verdict.passed() {
            self.passed.push(receipt.gate);
        }
        self.links.push(Link { file, gate: receipt.gate, passed: receipt.verdict.passed(), sha256: hash.clone() });
        let summary = Summary {
            schema: SCHEMA,
            target: self.target,
            platform: receipt.platform.clone(),
            attribution: self.attribution,
            receipts: self.links.clone(),
            claim: summary_claim(self.target, self.attribution, &receipt.platform.os, &self.passed),
            stopped: receipt.stop_reason.clone(),
        };
        let path = self.dir.join("summary.json");
        let bytes = serde_json::to_vec_pretty(&summary).expect("a summary serializes");
        write_new(&path, &bytes).map_err(|e| ChainError { file: path, why: e.to_string() })?;
        Ok(hash)
    }
}

/// A verified chain: its summary and receipts, each with its hash.
#[derive(Debug, Clone)]
pub struct Chain {
    /// The summary.
    pub summary: Summary,
    /// The receipts, in order, with their hashes.
    pub receipts: Vec<(Receipt, String)>,
}

impl Chain {
    /// The last receipt's SHA-256: what an operator keeps to tell this
    /// chain from a rewritten one.
    pub fn head(&self) -> Option<&str> {
        self.receipts.last().map(|(_, hash)| hash.as_str())
    }
}

/// The most bytes a receipt or the summary may have (a real one is a few KB).
pub const FILE_MAX: u64 = 1 << 20;
/// The most receipts a chain may name (a run has eight gates).
pub const RECEIPTS_MAX: usize = 64;

/// Reads `path` only if it is a regular file of at most [`FILE_MAX`] bytes,
/// never following a link and never waiting on a FIFO or a device.
fn read_bounded(path: &Path) -> Result<Vec<u8>, String> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    // A link is refused; a FIFO opens without waiting for a writer.
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| format!("{e} (a link, or not there)"))?;
    let meta = file.metadata().map_err(|e| e.to_string())?;
    if !meta.file_type().is_file() {
        return Err("not a regular file".into());
    }
    if meta.len() > FILE_MAX {
        return Err(format!("{} bytes, over the bound of {FILE_MAX}", meta.len()));
    }
    let mut bytes = Vec::new();
    file.take(FILE_MAX + 1).read_to_end(&mut bytes).map_err(|e| e.to_string())?;
    if bytes.len() as u64 > FILE_MAX {
        return Err(format!("over the bound of {FILE_MAX} bytes"));
    }
    Ok(bytes)
}

/// Writes `bytes` to `path` as a new owner-only file (never through a link).
fn write_new(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let fresh = path.with_extension("json.new");
    let _ = std::fs::remove_file(&fresh);
    let mut file = std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(&fresh)?;
    file.write_all(bytes)?;
    std::fs::rename(&fresh, path)
}

/// Refuses a document of another format version by name, before its
/// fields are read (an older build's chain would fail on a missing field).
fn schema_of(bytes: &[u8]) -> Result<(), String> {
    #[derive(Deserialize)]
    struct Versioned {
        schema: u32,
    }
    match serde_json::from_slice::<Versioned>(bytes).map(|v| v.schema) {
        Ok(SCHEMA) => Ok(()),
        Ok(other) => Err(format!("made by another build (receipt format {other}; this one reads {SCHEMA})")),
        Err(e) => Err(format!("not a canary document: {e}")),
    }
}

/// Reads and verifies the chain in `dir`: every receipt parses, is in
/// sequence, names the previous one's hash, and the summary names each
/// receipt's hash and the claim they support. The first fault is the error.
pub fn verify(dir: &Path) -> Result<Chain, ChainError> {
    let summary_path = dir.join("summary.json");
    let at = |file: &Path, why: String| ChainError { file: file.to_owned(), why };
    let bytes = read_bounded(&summary_path).map_err(|e| at(&summary_path, e))?;
    schema_of(&bytes).map_err(|e| at(&summary_path, e))?;
    let summary: Summary =
        serde_json::from_slice(&bytes).map_err(|e| at(&summary_path, format!("not a canary summary: {e}")))?;
    if summary.receipts.len() > RECEIPTS_MAX {
        return Err(at(
            &summary_path,
            format!("names {} receipts, over the bound of {RECEIPTS_MAX}", summary.receipts.len()),
        ));
    }
    let mut receipts = Vec::new();
    let mut previous: Option<String> = None;
    let mut passed = Vec::new();
    for (i, link) in summary.receipts.iter().enumerate() {
        let path = dir.join(&link.file);
        if link.file != file_name(i as u32 + 1, link.gate) {
            return Err(at(&summary_path, format!("names a file that is not the chain's: {}", link.file)));
        }
        let bytes = read_bounded(&path).map_err(|e| at(&path, e))?;
        let hash = sha256(&bytes);
        if hash != link.sha256 {
            return Err(at(&path, format!("edited: its SHA-256 is {hash}, the chain recorded {}", link.sha256)));
        }
        schema_of(&bytes).map_err(|e| at(&path, e))?;
        let receipt: Receipt = serde_json::from_slice(&bytes).map_err(|e| at(&path, format!("not a receipt: {e}")))?;
        if receipt.sequence as usize != i + 1 || receipt.gate != link.gate {
            return Err(at(&path, format!("out of order: sequence {} gate {}", receipt.sequence, receipt.gate)));
        }
        if receipt.previous_sha256 != previous {
            return Err(at(&path, "does not name the previous receipt's hash".into()));
        }
        if receipt.verdict.passed() != link.passed || receipt.target != summary.target || receipt.schema != SCHEMA {
            return Err(at(&path, "disagrees with the summary".into()));
        }
        // One chain, one platform, the summary's: a claim names its OS.
        if receipt.attribution != summary.attribution {
            return Err(at(
                &path,
                format!("callers {:?}, the summary says {:?}", receipt.attribution, summary.attribution),
            ));
        }
        if receipt.platform != summary.platform {
            return Err(at(&path, format!("ran on {:?}, the summary says {:?}", receipt.platform, summary.platform)));
        }
        // A run stops at its first gate that did not pass: only the last may not have.
        let last = i + 1 == summary.receipts.len();
        if !receipt.verdict.passed() && !last {
            return Err(at(&path, "did not pass, yet the chain goes on after it".into()));
        }
        if last && receipt.stop_reason != summary.stopped {
            return Err(at(&summary_path, "its stop reason is not the last receipt's".into()));
        }
        if receipt.verdict.passed() {
            passed.push(receipt.gate);
        }
        previous = Some(hash.clone());
        receipts.push((receipt, hash));
    }
    let reached = summary_claim(summary.target, summary.attribution, &summary.platform.os, &passed);
    if summary.claim != reached {
        return Err(at(&summary_path, format!("claims {} but its receipts support {reached}", summary.claim)));
    }
    Ok(Chain { summary, receipts })
}

/// [`verify`], and the chain's head must be `head`, the hash its operator
/// kept elsewhere when the run ended: a chain rewritten whole (receipts and
/// summary together) verifies by itself, never against the kept head.
pub fn verify_head(dir: &Path, head: &str) -> Result<Chain, ChainError> {
    let kept = head.trim().to_ascii_lowercase();
    if kept.len() != 64 || !kept.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(ChainError { file: dir.to_owned(), why: "--head takes the 64 hex digits the run printed".into() });
    }
    let chain = verify(dir)?;
    match chain.head() {
        Some(h) if h == kept => Ok(chain),
        found => Err(ChainError {
            file: dir.join("summary.json"),
            why: format!("rewritten: the chain's head is {}, not the {kept} kept", found.unwrap_or("none")),
        }),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::gate::{final_claim, no_claim};

    pub(crate) fn receipt(gate: Gate, verdict: Verdict) -> Receipt {
        Receipt {
            schema: 0,
            sequence: 0,
            gate,
            verdict,
            stop_reason: None,
            claim: None,
            target: Target::Live,
            carrier: "fake".into(),
            attribution: Attribution::Required,
            platform: Platform { os: "macos".into(), ..Platform::default() },
            deployment: Deployment::default(),
            inputs: serde_json::json!({"workers": 3}),
            observations: vec!["seen".into()],
            evidence: Evidence::default(),
            counts: Counts { workers: 3, ..Counts::default() },
            started_at_ms: 1,
            elapsed_ms: 2,
            previous_sha256: None,
        }
    }

    /// Issue 45: a run whose callers were trusted on their capability
    /// alone says so in every receipt and in its claim, and a summary that
    /// drops the word no longer verifies.
    #[test]
    fn a_capability_only_chain_says_so_in_every_receipt_and_its_claim() {
        let dir = tempfile::tempdir().unwrap();
        let mut w = Writer::create(dir.path(), Target::Live).unwrap().with_attribution(Attribution::CapabilityOnly);
        for g in [Gate::G1D, Gate::G2] {
            w.append(receipt(g, Verdict::Pass)).unwrap();
        }
        let chain = verify(dir.path()).unwrap();
        assert_eq!(chain.summary.claim, format!("{CAPABILITY_ONLY_PREFIX} {}", Gate::G2.claim("macos")));
        assert!(chain.receipts.iter().all(|(r, _)| r.attribution == Attribution::CapabilityOnly));
        let path = dir.path().join("summary.json");
        let text = std::fs::read_to_string(&path).unwrap();
        let dropped =
            text.replace("\"capability_only\"", "\"required\"").replace(&format!("{CAPABILITY_ONLY_PREFIX} "), "");
        std::fs::write(&path, dropped).unwrap();
        assert!(verify(dir.path()).unwrap_err().why.contains("callers"), "the receipts still say capability_only");
    }

    fn chain(dir: &Path, gates: &[Gate]) {
        let mut w = Writer::create(dir, Target::Live).unwrap();
        for g in gates {
            w.append(receipt(*g, Verdict::Pass)).unwrap();
        }
    }

    /// Issue 43, finding 4: a summary or receipt that is a link (to
    /// `/dev/zero`, or anywhere), a FIFO, a file past the bound, or a
    /// summary naming more receipts than a run makes is refused at once,
    /// by name; nothing is read without end and nothing waits. Receipts
    /// and their directory are owner-only.
    #[test]
    fn show_reads_only_bounded_regular_files_of_the_directory() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        chain(dir.path(), &[Gate::G1D, Gate::G2]);
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(dir.path()), 0o700);
        assert_eq!(mode(&dir.path().join("01-G1D.json")), 0o600);
        assert_eq!(mode(&dir.path().join("summary.json")), 0o600);
        // A receipt replaced by a link to /dev/zero, then by a FIFO.
        let receipt = dir.path().join("02-G2.json");
        std::fs::remove_file(&receipt).unwrap();
        std::os::unix::fs::symlink("/dev/zero", &receipt).unwrap();
        let err = verify(dir.path()).unwrap_err();
        assert_eq!(err.file, receipt, "{err}");
        std::fs::remove_file(&receipt).unwrap();
        let made = std::process::Command::new("mkfifo").arg(&receipt).status().unwrap();
        assert!(made.success());
        let started = std::time::Instant::now();
        let err = verify(dir.path()).unwrap_err();
        assert!(err.why.contains("not a regular file"), "{err}");
        assert!(started.elapsed() < std::time::Duration::from_secs(5), "a FIFO never blocks the reader");
        // The summary as a link, then past the bound.
        let summary = dir.path().join("summary.json");
        std::fs::rename(&summary, dir.path().join("kept")).unwrap();
        std::os::unix::fs::symlink("/dev/zero", &summary).unwrap();
        assert_eq!(verify(dir.path()).unwrap_err().file, summary);
        std::fs::remove_file(&summary).unwrap();
        std::fs::write(&summary, vec![b' '; FILE_MAX as usize + 1]).unwrap();
        assert!(verify(dir.path()).unwrap_err().why.contains("bound"));
        // A summary naming more receipts than any run makes.
        let text = std::fs::read_to_string(dir.path().join("kept")).unwrap();
        let mut doc: serde_json::Value = serde_json::from_str(&text).unwrap();
        let one = doc["receipts"][0].clone();
        doc["receipts"] = serde_json::Value::Array(vec![one; RECEIPTS_MAX + 1]);
        std::fs::write(&summary, serde_json::to_vec(&doc).unwrap()).unwrap();
        assert!(verify(dir.path()).unwrap_err().why.contains("over the bound"));
    }

    #[test]
    fn a_full_chain_verifies_and_reaches_the_final_claim() {
        let dir = tempfile::tempdir().unwrap();
        chain(dir.path(), &Gate::ALL);
        let chain = verify(dir.path()).unwrap();
        assert_eq!(chain.summary.claim, final_claim("macos"));
        assert_eq!(chain.summary.platform.os, "macos");
        assert_eq!(chain.receipts.len(), 7);
        assert_eq!(chain.receipts[1].0.previous_sha256.as_deref(), Some(chain.receipts[0].1.as_str()));
    }

    #[test]
    fn a_stop_names_its_reason_and_the_claim_before_it() {
        let dir = tempfile::tempdir().unwrap();
        let mut w = Writer::create(dir.path(), Target::Live).unwrap();
        w.append(receipt(Gate::G1D, Verdict::Pass)).unwrap();
        w.append(receipt(Gate::G2, Verdict::Pass)).unwrap();
        w.append(receipt(Gate::G3, Verdict::Fail("CROSS_ATTRIBUTION".into()))).unwrap();
        let chain = verify(dir.path()).unwrap();
        assert_eq!(chain.summary.claim, Gate::G2.claim("macos"));
        assert_eq!(chain.summary.stopped.as_deref(), Some("G3_FAIL: CROSS_ATTRIBUTION"));
        assert_eq!(chain.receipts[2].0.claim, None);
    }

    #[test]
    fn an_edited_receipt_is_refused_by_name() {
        let dir = tempfile::tempdir().unwrap();
        chain(dir.path(), &[Gate::G1D, Gate::G2, Gate::G3]);
        let path = dir.path().join("02-G2.json");
        let text = std::fs::read_to_string(&path).unwrap().replace("\"workers\": 3", "\"workers\": 4");
        std::fs::write(&path, text).unwrap();
        let err = verify(dir.path()).unwrap_err();
        assert_eq!(err.file, path, "{err}");
        assert!(err.why.contains("edited"), "{err}");
    }

    #[test]
    fn a_rewritten_chain_or_an_inflated_summary_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        chain(dir.path(), &[Gate::G1D, Gate::G2]);
        // A receipt rewritten with the summary updated to match: its
        // successor still names the old hash.
        let first = dir.path().join("01-G1D.json");
        let text = std::fs::read_to_string(&first).unwrap().replace("seen", "seen twice");
        std::fs::write(&first, &text).unwrap();
        let summary_path = dir.path().join("summary.json");
        let mut summary: Summary = serde_json::from_slice(&std::fs::read(&summary_path).unwrap()).unwrap();
        summary.receipts[0].sha256 = sha256(text.as_bytes());
        std::fs::write(&summary_path, serde_json::to_vec_pretty(&summary).unwrap()).unwrap();
        let err = verify(dir.path()).unwrap_err();
        assert!(err.file.ends_with("02-G2.json") && err.why.contains("previous"), "{err}");

        let dir = tempfile::tempdir().unwrap();
        chain(dir.path(), &[Gate::G1D]);
        let summary_path = dir.path().join("summary.json");
        let text =
            std::fs::read_to_string(&summary_path).unwrap().replace(&Gate::G1D.claim("macos"), &final_claim("macos"));
        std::fs::write(&summary_path, text).unwrap();
        let err = verify(dir.path()).unwrap_err();
        assert!(err.file.ends_with("summary.json") && err.why.contains("support"), "{err}");
        assert_ne!(no_claim("macos"), final_claim("macos"));
    }

    #[test]
    fn an_erased_stop_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let mut w = Writer::create(dir.path(), Target::Live).unwrap();
        w.append(receipt(Gate::G1D, Verdict::Pass)).unwrap();
        w.append(receipt(Gate::G2, Verdict::Fail("CONVERSATIONS".into()))).unwrap();
        let summary_path = dir.path().join("summary.json");
        let text = std::fs::read_to_string(&summary_path).unwrap().replace("\"G2_FAIL: CONVERSATIONS\"", "null");
        std::fs::write(&summary_path, text).unwrap();
        let err = verify(dir.path()).unwrap_err();
        assert!(err.why.contains("stop reason"), "{err}");
    }

    fn on(os: &str, gate: Gate) -> Receipt {
        Receipt { platform: Platform { os: os.into(), ..Platform::default() }, ..receipt(gate, Verdict::Pass) }
    }

    /// A summary moved to another OS (to claim macOS for a Linux run) no
    /// longer matches its receipts; a chain never changes platform midway;
    /// and a platform is made from what the machines said: no executor,
    /// one on another OS, or a silent one, and the run's OS is [`UNNAMED`].
    #[test]
    fn a_chain_names_one_platform() {
        let dir = tempfile::tempdir().unwrap();
        let mut w = Writer::create(dir.path(), Target::Live).unwrap();
        w.append(on("linux", Gate::G1D)).unwrap();
        w.append(on("linux", Gate::G2)).unwrap();
        assert!(w.append(on("macos", Gate::G3)).unwrap_err().why.contains("one platform"));
        let summary_path = dir.path().join("summary.json");
        let text = std::fs::read_to_string(&summary_path).unwrap().replace("\"linux\"", "\"macos\"");
        std::fs::write(&summary_path, text).unwrap();
        let err = verify(dir.path()).unwrap_err();
        assert!(err.why.contains("ran on"), "{err}");

        let executor = |os: &str| Executor {
            id: "e".into(),
            carrier: "cdp".into(),
            browser: "Chrome/156".into(),
            generation: None,
            os: os.into(),
        };
        assert_eq!(Platform::of("macos", "aarch64", &[executor("macos")]).os, "macos");
        assert_eq!(Platform::of("macos", "aarch64", &[]).os, UNNAMED, "nobody said where the browser is");
        assert_eq!(Platform::of("", "", &[executor("")]).os, UNNAMED);
        assert_eq!(Platform::of("macos", "aarch64", &[executor("macos"), executor("linux")]).os, UNNAMED);
        let silent = Platform::of("macos", "aarch64", &[executor("")]);
        assert_eq!(silent.os, UNNAMED);
        assert_eq!(silent.browsers, ["cdp Chrome/156 (?)"]);
        assert_eq!(silent.daemon, "macos aarch64");
    }

    /// A chain of an older receipt format is refused by its version, not
    /// by a missing field.
    #[test]
    fn an_older_format_is_named() {
        let dir = tempfile::tempdir().unwrap();
        chain(dir.path(), &[Gate::G1D]);
        let summary_path = dir.path().join("summary.json");
        let text =
            std::fs::read_to_string(&summary_path).unwrap().replace(&format!("\"schema\": {SCHEMA}"), "\"schema\": 1");
        std::fs::write(&summary_path, text).unwrap();
        assert!(verify(dir.path()).unwrap_err().why.contains("receipt format 1"));
    }

    /// A chain rewritten whole (every receipt and the summary made anew,
    /// all hashes consistent) passes `verify` but not `verify_head` with
    /// the head kept from the real run.
    #[test]
    fn a_rewritten_chain_is_refused_against_its_kept_head() {
        let real = tempfile::tempdir().unwrap();
        chain(real.path(), &[Gate::G1D, Gate::G2]);
        let kept = verify(real.path()).unwrap().head().unwrap().to_owned();
        assert!(verify_head(real.path(), &kept.to_ascii_uppercase()).is_ok());
        // The same run made again on paper, on another OS.
        let forged = tempfile::tempdir().unwrap();
        let mut w = Writer::create(forged.path(), Target::Live).unwrap();
        for gate in [Gate::G1D, Gate::G2] {
            w.append(on("linux", gate)).unwrap();
        }
        // Put where the real one was: it verifies by itself.
        let moved = real.path().join("moved");
        std::fs::create_dir(&moved).unwrap();
        for e in std::fs::read_dir(forged.path()).unwrap() {
            let e = e.unwrap();
            std::fs::copy(e.path(), moved.join(e.file_name())).unwrap();
        }
        assert!(verify(&moved).is_ok());
        let err = verify_head(&moved, &kept).unwrap_err();
        assert!(err.why.contains("rewritten") && err.why.contains(&kept), "{err}");
        assert!(verify_head(&moved, "not a hash").unwrap_err().why.contains("64 hex digits"));
    }

    #[test]
    fn a_directory_with_receipts_is_never_written_over() {
        let dir = tempfile::tempdir().unwrap();
        chain(dir.path(), &[Gate::G1D]);
        assert!(Writer::create(dir.path(), Target::Live).is_err());
    }
}
