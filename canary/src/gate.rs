//! The gates, their claims and the verdicts a gate can end with, as the
//! seed states them (`shared/seeds/runtime-pool-ISSUE.md`, "Revised gate
//! sequence"): the run goes in order and stops at the first failure or
//! uncertainty, and the claim reached is the last gate that passed.

use serde::{Deserialize, Serialize};

/// One canary gate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Gate {
    /// Target-isolation witness: managed conversations in distinct targets;
    /// a person's own chat and a navigation in one leave the others untouched.
    G0,
    /// The exact deployment: source, build, instance, state root, schema,
    /// browsers and carriers, app label and Project.
    G1D,
    /// Zero-touch create and bind: `runtime_ensure(3)`, and a repeat does nothing.
    G2,
    /// One bounded targeted task per worker, collected exactly once.
    G3,
    /// One worker's target lost: only it is reopened, the same conversation.
    G4,
    /// Elastic scale 3 → 5 → 2, never evicting a protected worker.
    G5,
    /// Browser control or generation lost: one `ensure` reconstructs the pool.
    G6,
}

impl Gate {
    /// Every gate, in the order a run takes them.
    pub const ALL: [Gate; 7] = [Gate::G0, Gate::G1D, Gate::G2, Gate::G3, Gate::G4, Gate::G5, Gate::G6];

    /// The claim a pass of this gate supports on `os` (the run's
    /// [`crate::Platform::os`]). G0's and the final claim are the seed's own
    /// names, which name macOS: elsewhere they name the OS they ran on
    /// ([`os_word`]). The others name what their gate proves.
    pub fn claim(self, os: &str) -> String {
        match self {
            Gate::G0 => format!("{}_CONVERSATION_TARGET_ISOLATION_WITNESS_PASS", os_word(os)),
            Gate::G1D => "EXACT_CANARY_DEPLOYMENT_BOUND".into(),
            Gate::G2 => "ZERO_TOUCH_CREATE_BIND_PASS".into(),
            Gate::G3 => "EXACT_TARGETED_EXECUTION_PASS".into(),
            Gate::G4 => "SINGLE_CARRIER_RECOVERY_PASS".into(),
            Gate::G5 => "ELASTIC_SCALE_PASS".into(),
            Gate::G6 => "COLD_BROWSER_RECONSTRUCTION_PASS".into(),
        }
    }

    /// Parses `G0`, `G1D`, `G2` … (any case).
    pub fn parse(text: &str) -> Option<Gate> {
        Gate::ALL.into_iter().find(|g| g.name().eq_ignore_ascii_case(text.trim()))
    }

    /// `G0`, `G1D`, `G2` …
    pub fn name(self) -> &'static str {
        match self {
            Gate::G0 => "G0",
            Gate::G1D => "G1D",
            Gate::G2 => "G2",
            Gate::G3 => "G3",
            Gate::G4 => "G4",
            Gate::G5 => "G5",
            Gate::G6 => "G6",
        }
    }
}

impl std::fmt::Display for Gate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The seed's claim once G0 and G1D–G6 all pass on exact evidence, on `os`.
pub fn final_claim(os: &str) -> String {
    format!("{}_ZERO_TOUCH_CHATGPT_WORKER_RUNTIME_CANARY_PASS", os_word(os))
}

/// The seed's ceiling before any gate has passed live, on `os`.
pub fn no_claim(os: &str) -> String {
    format!("{}_ZERO_TOUCH_WORKER_RUNTIME_NOT_YET_LIVE_PROVEN", os_word(os))
}

/// How a claim names `os` (`std::env::consts::OS`'s words): `MACOS` only
/// for `macos`, `LINUX` for `linux`, `WINDOWS` for `windows`; anything
/// else (another OS, a run across machines that disagree) `UNNAMED_OS`.
pub fn os_word(os: &str) -> &'static str {
    match os {
        "macos" => "MACOS",
        "linux" => "LINUX",
        "windows" => "WINDOWS",
        _ => "UNNAMED_OS",
    }
}

/// How a gate ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "verdict", content = "reason", rename_all = "snake_case")]
pub enum Verdict {
    /// Every requirement held.
    Pass,
    /// A requirement did not hold (`CROSS_ATTRIBUTION`, `DUPLICATE_EXECUTION`…).
    Fail(String),
    /// The gate cannot tell (an effect whose outcome is unknown,
    /// `RECONCILE_REQUIRED`, a wait that ran out): never read as a pass.
    Uncertain(String),
    /// A setup state a person must resolve (`CHATGPT_SIGNED_OUT`,
    /// `HOST_APP_STALE`, a rate limit): a boundary, never worked around.
    SetupRequired(String),
}

impl Verdict {
    /// Whether the run may go on to the next gate.
    pub fn passed(&self) -> bool {
        matches!(self, Verdict::Pass)
    }

    /// The typed stop reason: `G3_FAIL: CROSS_ATTRIBUTION`,
    /// `G4_UNCERTAIN: RECONCILE_REQUIRED`, `SETUP_REQUIRED: CHATGPT_SIGNED_OUT`;
    /// `None` for a pass.
    pub fn stop_reason(&self, gate: Gate) -> Option<String> {
        match self {
            Verdict::Pass => None,
            Verdict::Fail(why) => Some(format!("{gate}_FAIL: {why}")),
            Verdict::Uncertain(why) => Some(format!("{gate}_UNCERTAIN: {why}")),
            Verdict::SetupRequired(code) => Some(format!("SETUP_REQUIRED: {code}")),
        }
    }
}

/// The seed's order of the gates a claim climbs through: a claim needs
/// the deployment bound (G1D) first, then each gate in turn.
pub const CLAIM_ORDER: [Gate; 6] = [Gate::G1D, Gate::G2, Gate::G3, Gate::G4, Gate::G5, Gate::G6];

/// What a claim on fakechat is called: a rehearsal says nothing about chatgpt.com.
pub const REHEARSAL_PREFIX: &str = "REHEARSAL_ONLY:";

/// The claim a run on `live` (or not), on `os`, supports after `passed`
/// (the gates that passed): the claim of the last gate of the longest run
/// of [`CLAIM_ORDER`] from G1D that passed; the seed's final claim once
/// all six did *and* G0 did (its closure needs the isolation witness);
/// G0's witness when only it passed; else the ceiling [`no_claim`]. On
/// fakechat the claim is prefixed [`REHEARSAL_PREFIX`].
pub fn claim_reached(live: bool, os: &str, passed: &[Gate]) -> String {
    let climbed = CLAIM_ORDER.iter().take_while(|g| passed.contains(g)).count();
    let claim = match climbed {
        6 if passed.contains(&Gate::G0) => final_claim(os),
        0 if passed.contains(&Gate::G0) => Gate::G0.claim(os),
        0 => no_claim(os),
        n => CLAIM_ORDER[n - 1].claim(os),
    };
    match live {
        true => claim,
        false => format!("{REHEARSAL_PREFIX} {claim}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stop_reasons_name_the_gate_and_the_kind() {
        assert_eq!(
            Verdict::Fail("CROSS_ATTRIBUTION".into()).stop_reason(Gate::G3).unwrap(),
            "G3_FAIL: CROSS_ATTRIBUTION"
        );
        assert_eq!(
            Verdict::Uncertain("RECONCILE_REQUIRED".into()).stop_reason(Gate::G4).unwrap(),
            "G4_UNCERTAIN: RECONCILE_REQUIRED"
        );
        assert_eq!(
            Verdict::SetupRequired("CHATGPT_SIGNED_OUT".into()).stop_reason(Gate::G2).unwrap(),
            "SETUP_REQUIRED: CHATGPT_SIGNED_OUT"
        );
        assert_eq!(Verdict::Pass.stop_reason(Gate::G2), None);
    }

    #[test]
    fn the_final_claim_needs_g0_and_every_gate_from_g1d_to_g6() {
        let mac = "macos";
        assert_eq!(claim_reached(true, mac, &[]), no_claim(mac));
        assert_eq!(claim_reached(true, mac, &[Gate::G0, Gate::G1D, Gate::G2]), Gate::G2.claim(mac));
        assert_eq!(claim_reached(true, mac, &Gate::ALL), "MACOS_ZERO_TOUCH_CHATGPT_WORKER_RUNTIME_CANARY_PASS");
        // Without G0 a run climbs to G6's own claim, never the final one
        // (the old overclaim: G1D–G6 alone reached it).
        assert_eq!(claim_reached(true, mac, &CLAIM_ORDER), Gate::G6.claim(mac));
        // Without the deployment bound first, or out of order, nothing is claimed past it.
        assert_eq!(claim_reached(true, mac, &[Gate::G2, Gate::G3]), no_claim(mac));
        assert_eq!(claim_reached(true, mac, &[Gate::G1D, Gate::G3]), Gate::G1D.claim(mac));
        assert_eq!(claim_reached(true, mac, &[Gate::G0]), "MACOS_CONVERSATION_TARGET_ISOLATION_WITNESS_PASS");
        // A rehearsal never makes a live claim.
        assert_eq!(claim_reached(false, mac, &Gate::ALL), format!("{REHEARSAL_PREFIX} {}", final_claim(mac)));
        assert_eq!(Gate::parse("g1d"), Some(Gate::G1D));
        assert_eq!(Gate::parse("G7"), None);
    }

    /// A claim names macOS only on macOS: the same gates on Linux make the
    /// claim naming Linux, and a platform nobody named makes none of either.
    #[test]
    fn a_claim_names_the_os_it_ran_on() {
        assert_eq!(claim_reached(true, "linux", &Gate::ALL), "LINUX_ZERO_TOUCH_CHATGPT_WORKER_RUNTIME_CANARY_PASS");
        assert_eq!(claim_reached(true, "linux", &[Gate::G0]), "LINUX_CONVERSATION_TARGET_ISOLATION_WITNESS_PASS");
        assert_eq!(claim_reached(true, "linux", &[]), "LINUX_ZERO_TOUCH_WORKER_RUNTIME_NOT_YET_LIVE_PROVEN");
        assert_eq!(final_claim(""), "UNNAMED_OS_ZERO_TOUCH_CHATGPT_WORKER_RUNTIME_CANARY_PASS");
        assert_eq!(os_word(crate::receipt::UNNAMED), "UNNAMED_OS");
        for os in ["linux", "windows", "", "mixed", "macosx", "MACOS", "freebsd"] {
            assert!(!claim_reached(true, os, &Gate::ALL).starts_with("MACOS"), "{os}");
        }
    }
}
