//! `canary show`: a verified chain, for a person or as one JSON document.

use serde_json::{Value, json};

use crate::receipt::{Chain, Target};

/// One JSON document: the chain's head first (what a stranger compares
/// with the head the run published), then each gate's verdict (`pass`,
/// `fail`, `uncertain`, `setup_required`) with its reason, and the claim
/// reached. Pretty-printed, in this field order.
pub fn json(chain: &Chain) -> String {
    let gates: Vec<Value> = chain
        .receipts
        .iter()
        .map(|(r, hash)| {
            let verdict = serde_json::to_value(&r.verdict).unwrap_or_default();
            json!({
                "gate": r.gate,
                "verdict": verdict["verdict"],
                "reason": verdict["reason"],
                "stop_reason": r.stop_reason,
                "claim": r.claim,
                "carrier": r.carrier,
                "counts": r.counts,
                "elapsed_ms": r.elapsed_ms,
                "sha256": hash,
            })
        })
        .collect();
    // A struct keeps its fields' order where a JSON map would sort them.
    #[derive(serde::Serialize)]
    struct Shown<'a> {
        head: Option<&'a str>,
        target: Target,
        platform: &'a crate::receipt::Platform,
        claim: &'a str,
        stopped: &'a Option<String>,
        rehearsal: bool,
        attribution: crate::receipt::Attribution,
        deployment: Option<&'a crate::receipt::Deployment>,
        gates: Vec<Value>,
    }
    let shown = Shown {
        head: chain.head(),
        target: chain.summary.target,
        platform: &chain.summary.platform,
        claim: &chain.summary.claim,
        stopped: &chain.summary.stopped,
        rehearsal: chain.summary.target == Target::Fakechat,
        attribution: chain.summary.attribution,
        deployment: chain.receipts.first().map(|(r, _)| &r.deployment),
        gates,
    };
    serde_json::to_string_pretty(&shown).expect("a chain serializes")
}

/// What each gate saw, for a person.
pub fn text(chain: &Chain) -> String {
    printable(&text_raw(chain))
}

/// What a terminal may be given: every control character but the line
/// breaks this text makes, and every bidirectional override, shown as
/// U+FFFD (a rewritten chain can hold any string).
pub fn printable(text: &str) -> String {
    text.chars()
        .map(|c| match c {
            '\n' => c,
            c if c.is_control() || ('\u{202a}'..='\u{202e}').contains(&c) || ('\u{2066}'..='\u{2069}').contains(&c) => {
                '\u{fffd}'
            }
            c => c,
        })
        .collect()
}

fn text_raw(chain: &Chain) -> String {
    let mut out = String::new();
    let target = match chain.summary.target {
        Target::Fakechat => "fakechat (a rehearsal: no claim about chatgpt.com)",
        Target::Live => "chatgpt.com",
    };
    out.push_str(&format!("Canary on {target}\n"));
    let p = &chain.summary.platform;
    out.push_str(&format!("Platform: {} (daemon on {})\n", p.os, p.daemon));
    if chain.summary.attribution == crate::receipt::Attribution::CapabilityOnly {
        out.push_str("Callers: trusted on their capability alone (attribution capability_only)\n");
    }
    if let Some((first, _)) = chain.receipts.first() {
        let d = &first.deployment;
        out.push_str(&format!(
            "Deployment: commit {} (tree {}), build {}, instance {}\n  state {}\n  tools/list sha256 {}\n",
            d.commit,
            d.tree,
            short(&d.build_id),
            d.instance_id,
            d.state_root,
            short(&d.tools_sha256)
        ));
        for e in &d.executors {
            out.push_str(&format!(
                "  executor {} via {} on {} ({}) (generation {})\n",
                e.id,
                e.carrier,
                e.browser,
                crate::receipt::or_unsaid(&e.os),
                e.generation.as_deref().unwrap_or("-")
            ));
        }
    }
    for (r, hash) in &chain.receipts {
        let verdict = match &r.stop_reason {
            None => "PASS".to_owned(),
            Some(reason) => reason.clone(),
        };
        let c = &r.counts;
        out.push_str(&format!(
            "\n{} {verdict} via {} in {:.1} s (receipt {})\n  {}\n",
            r.gate,
            r.carrier,
            r.elapsed_ms as f64 / 1000.0,
            short(hash),
            counted(c),
        ));
        for seen in &r.observations {
            out.push_str(&format!("  - {seen}\n"));
        }
    }
    out.push_str(&format!("\nClaim reached: {}\n", chain.summary.claim));
    if let Some(head) = chain.head() {
        out.push_str(&format!("Chain head: {head}\n"));
    }
    if let Some(stopped) = &chain.summary.stopped {
        out.push_str(&format!("Stopped: {stopped}\n"));
    }
    out
}

/// What a gate counted, in words (the text and the page say it alike).
pub(crate) fn counted(c: &crate::receipt::Counts) -> String {
    format!(
        "{} workers, {} conversations, {} targets, {} effects, {} prompts, {} duplicates, {} cross-attributions, {} manual interactions",
        c.workers,
        c.conversations,
        c.targets,
        c.effects,
        c.prompts_sent,
        c.duplicates,
        c.cross_attributions,
        c.manual_interactions
    )
}

/// A hash's first twelve digits, enough to tell receipts apart.
pub(crate) fn short(hash: &str) -> &str {
    hash.get(..12).unwrap_or(hash)
}

#[cfg(test)]
mod tests {
    use crate::gate::{Gate, Verdict};
    use crate::receipt::tests::receipt;
    use crate::receipt::{Target, Writer, verify};

    /// A rewritten chain's strings reach a terminal without its control
    /// characters (escape sequences) or bidirectional overrides.
    #[test]
    fn control_characters_never_reach_the_terminal() {
        assert_eq!(
            super::printable("ok\n\u{1b}[2Jgone\u{202e}txt.exe\u{7}"),
            "ok\n\u{fffd}[2Jgone\u{fffd}txt.exe\u{fffd}"
        );
    }

    #[test]
    fn the_json_names_each_verdict_its_reason_and_the_claim() {
        let dir = tempfile::tempdir().unwrap();
        let mut w = Writer::create(dir.path(), Target::Live).unwrap();
        w.append(receipt(Gate::G1D, Verdict::Pass)).unwrap();
        w.append(receipt(Gate::G2, Verdict::SetupRequired("HOST_APP_STALE".into()))).unwrap();
        let chain = verify(dir.path()).unwrap();
        let printed = super::json(&chain);
        assert!(printed.starts_with("{\n  \"head\": "), "the head comes first: {printed}");
        let doc: serde_json::Value = serde_json::from_str(&printed).unwrap();
        assert_eq!(doc["gates"][0]["verdict"], "pass");
        assert_eq!(doc["gates"][1]["verdict"], "setup_required");
        assert_eq!(doc["gates"][1]["reason"], "HOST_APP_STALE");
        assert_eq!(doc["stopped"], "SETUP_REQUIRED: HOST_APP_STALE");
        assert_eq!(doc["claim"], Gate::G1D.claim("macos"));
        assert_eq!(doc["platform"]["os"], "macos");
        assert_eq!(doc["rehearsal"], false);
        assert_eq!(doc["head"], chain.receipts[1].1.as_str());
        let text = super::text(&chain);
        assert!(text.contains("G2 SETUP_REQUIRED: HOST_APP_STALE") && text.contains("Canary on chatgpt.com"), "{text}");
    }
}
