//! `canary show --html`: a verified chain as one page a stranger can read
//! and publish: the claim and the head first, then where it ran, the
//! deployment, and each gate's verdict, timing, counts and observations.
//! Self-contained (styles inline, no script, nothing fetched); every string
//! from a receipt is escaped, since a chain may have been written by anyone.

use std::fmt::Write;

use crate::receipt::{Attribution, Chain, Target};

/// The page for `chain` (already verified).
pub fn html(chain: &Chain) -> String {
    let s = &chain.summary;
    let mut out = String::new();
    let title = match s.target {
        Target::Fakechat => "Canary rehearsal on fakechat",
        Target::Live => "Canary on chatgpt.com",
    };
    let _ = write!(
        out,
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>{title}: {claim}</title><style>{STYLE}</style></head><body><main>\
         <h1>{title}</h1>",
        claim = escape(&s.claim)
    );
    if s.target == Target::Fakechat {
        out.push_str("<p class=\"note\">A rehearsal: it proves the gates on fakechat, nothing about chatgpt.com.</p>");
    }
    out.push_str("<dl class=\"facts\">");
    fact(&mut out, "Claim reached", &s.claim);
    if let Some(stopped) = &s.stopped {
        fact(&mut out, "Stopped", stopped);
    }
    fact(&mut out, "Chain head (SHA-256)", chain.head().unwrap_or("none"));
    fact(&mut out, "Platform", &format!("{} (daemon on {})", s.platform.os, s.platform.daemon));
    for browser in &s.platform.browsers {
        fact(&mut out, "Executor", browser);
    }
    let callers = match s.attribution {
        Attribution::Required => "each worker call proven to come from its own conversation",
        Attribution::CapabilityOnly => "trusted on their capability alone (attribution capability_only)",
    };
    fact(&mut out, "Callers", callers);
    if let Some((first, _)) = chain.receipts.first() {
        let d = &first.deployment;
        fact(&mut out, "Commit", &format!("{} (tree {})", d.commit, d.tree));
        fact(&mut out, "Build id", &d.build_id);
        fact(&mut out, "Instance", &d.instance_id);
        fact(&mut out, "tools/list SHA-256", &d.tools_sha256);
        if let Some(app) = &d.app_label {
            fact(&mut out, "App", app);
        }
    }
    out.push_str("</dl><h2>Gates</h2><table><thead><tr>");
    for head in ["Gate", "Verdict", "Time", "Prompts", "Manual", "Receipt SHA-256"] {
        let _ = write!(out, "<th scope=\"col\">{head}</th>");
    }
    out.push_str("</tr></thead><tbody>");
    // Each gate's claim qualified as the chain's is, so no row reads bigger than the run.
    let mut qualified = String::new();
    if s.attribution == Attribution::CapabilityOnly {
        qualified.push_str(crate::receipt::CAPABILITY_ONLY_PREFIX);
        qualified.push(' ');
    }
    if s.target == Target::Fakechat {
        qualified.push_str(crate::REHEARSAL_PREFIX);
        qualified.push(' ');
    }
    for (r, hash) in &chain.receipts {
        let (class, verdict) = match (&r.stop_reason, &r.claim) {
            (None, Some(claim)) => ("pass", format!("PASS: {qualified}{claim}")),
            (None, None) => ("pass", "PASS".to_owned()),
            (Some(reason), _) => ("stop", reason.clone()),
        };
        let c = &r.counts;
        let _ = write!(
            out,
            "<tr><th scope=\"row\"><a href=\"#{gate}\">{gate}</a></th><td class=\"{class}\">{verdict}</td>\
             <td>{secs:.1}&nbsp;s</td><td>{}</td><td>{}</td><td><code>{hash}</code></td></tr>",
            c.prompts_sent,
            c.manual_interactions,
            gate = r.gate,
            verdict = escape(&verdict),
            secs = r.elapsed_ms as f64 / 1000.0,
            hash = escape(crate::show::short(hash)),
        );
    }
    out.push_str("</tbody></table>");
    for (r, _) in &chain.receipts {
        let _ = write!(
            out,
            "<section id=\"{gate}\"><h3>{gate} via {}</h3><p>{}</p><ol>",
            escape(&r.carrier),
            crate::show::counted(&r.counts),
            gate = r.gate
        );
        for seen in &r.observations {
            let _ = write!(out, "<li>{}</li>", escape(seen));
        }
        out.push_str("</ol></section>");
    }
    out.push_str(
        "<p class=\"note\">Check it: <code>orchestrator canary verify &lt;receipts&gt; --head &lt;chain head&gt;</code> \
         with the receipts this page was made from.</p></main></body></html>\n",
    );
    out
}

/// The page's styles: system fonts, dark text on light (contrast above
/// WCAG AA), long words wrapped rather than cut off.
const STYLE: &str = "body{font:15px/1.5 system-ui,sans-serif;color:#1a1a1a;background:#fff;margin:0}\
main{max-width:72rem;margin:0 auto;padding:1.5rem}h1{font-size:1.5rem}h2{font-size:1.2rem;margin-top:2rem}\
h3{font-size:1rem;margin:1.5rem 0 .25rem}.note{background:#f3f3f3;padding:.5rem .75rem;border-radius:4px}\
dl.facts{display:grid;grid-template-columns:max-content 1fr;gap:.25rem 1rem}dt{font-weight:600}\
dd{margin:0;overflow-wrap:anywhere}table{border-collapse:collapse;width:100%}\
th,td{border-bottom:1px solid #ccc;padding:.35rem .5rem;text-align:left;vertical-align:top}\
thead th,td{white-space:nowrap}td.pass,td.stop{white-space:normal;overflow-wrap:anywhere}\
td.pass{color:#0b5d1e}td.stop{color:#8a1c1c;font-weight:600}code{font-size:.85rem}a{color:#0645ad}";

fn fact(out: &mut String, term: &str, value: &str) {
    let _ = write!(out, "<dt>{}</dt><dd>{}</dd>", escape(term), escape(value));
}

/// Text as HTML text or attribute content.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gate::{Gate, Verdict};
    use crate::receipt::tests::receipt;
    use crate::receipt::{Writer, verify};

    /// Whatever a receipt says reaches the page as text: a chain written
    /// by anyone cannot put markup, a script or a link into it.
    #[test]
    fn every_string_from_a_receipt_is_text_on_the_page() {
        let dir = tempfile::tempdir().unwrap();
        let mut w = Writer::create(dir.path(), Target::Live).unwrap();
        let mut hostile = receipt(Gate::G1D, Verdict::Pass);
        hostile.observations = vec!["<script>alert(1)</script> & \"quoted\" 'too'".into()];
        hostile.carrier = "<img src=x onerror=alert(1)>".into();
        w.append(hostile).unwrap();
        w.append(receipt(Gate::G2, Verdict::Uncertain("TIMEOUT: <b>".into()))).unwrap();
        let page = html(&verify(dir.path()).unwrap());
        assert!(!page.contains("<script") && !page.contains("<img") && !page.contains("<b>"), "{page}");
        assert!(page.contains("&lt;script&gt;alert(1)&lt;/script&gt; &amp; &quot;quoted&quot; &#39;too&#39;"));
        assert!(page.contains("G2_UNCERTAIN: TIMEOUT: &lt;b&gt;"), "{page}");
        assert!(page.contains(&verify(dir.path()).unwrap().head().unwrap().to_owned()), "the head is on the page");
        assert!(page.starts_with("<!doctype html>") && page.contains("lang=\"en\""));
    }
}
