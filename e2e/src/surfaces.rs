//! The operator surfaces as a person meets them in Chromium: the overlay's
//! closed shadow root read and clicked the way the browser shows it (the
//! DevTools protocol pierces shadow roots; no page script can), axe-core
//! over a page or over a copy of the overlay, and screenshots into
//! `docs/screenshots/`.

use std::path::PathBuf;

use anyhow::{Context, bail};
use chromiumoxide::Page;
use chromiumoxide::cdp::browser_protocol::dom::{BackendNodeId, GetBoxModelParams, GetDocumentParams, Node};
use chromiumoxide::layout::Point;
use serde_json::Value;

/// The overlay's host element in `root`'s tree, if the page has one.
fn overlay_host(root: &Node) -> Option<&Node> {
    if root.attributes.as_ref().is_some_and(|a| a.iter().any(|x| x == "data-orchestrator-overlay")) {
        return Some(root);
    }
    let children = root.children.iter().flatten();
    let shadows = root.shadow_roots.iter().flatten();
    children.chain(shadows).find_map(overlay_host)
}

fn texts(node: &Node, out: &mut Vec<String>) {
    if node.node_type == 3 && !node.node_value.trim().is_empty() {
        out.push(node.node_value.clone());
    }
    for child in node.children.iter().flatten().chain(node.shadow_roots.iter().flatten()) {
        texts(child, out);
    }
}

/// A button under `node` whose text starts with `label`.
fn labelled<'a>(node: &'a Node, label: &str) -> Option<&'a Node> {
    let mut own = Vec::new();
    texts(node, &mut own);
    if node.node_type == 1 && node.local_name == "button" && own.concat().starts_with(label) {
        return Some(node);
    }
    node.children.iter().flatten().chain(node.shadow_roots.iter().flatten()).find_map(|c| labelled(c, label))
}

async fn document(page: &Page) -> anyhow::Result<Node> {
    Ok(page.execute(GetDocumentParams::builder().depth(-1).pierce(true).build()).await?.result.root)
}

/// The overlay's text (its shadow tree's text nodes, joined by " | "), or
/// `None` when the page has no overlay or it is hidden.
pub async fn overlay_text(page: &Page) -> anyhow::Result<Option<String>> {
    let root = document(page).await?;
    let Some(host) = overlay_host(&root) else { return Ok(None) };
    if host.attributes.as_ref().is_some_and(|a| a.iter().any(|x| x == "hidden")) {
        return Ok(None);
    }
    let mut out = Vec::new();
    texts(host, &mut out);
    Ok(Some(out.join(" | ")))
}

/// Clicks the overlay's button whose text starts with `label` with the mouse, at its centre.
pub async fn click_overlay(page: &Page, label: &str) -> anyhow::Result<()> {
    let root = document(page).await?;
    let host = overlay_host(&root).context("no overlay in the page")?;
    let button = labelled(host, label).with_context(|| format!("no overlay button {label:?}"))?;
    let model = page
        .execute(
            GetBoxModelParams::builder().backend_node_id(BackendNodeId::new(*button.backend_node_id.inner())).build(),
        )
        .await?
        .result
        .model;
    let q = model.content.inner();
    let centre = Point { x: (q[0] + q[2] + q[4] + q[6]) / 4.0, y: (q[1] + q[3] + q[5] + q[7]) / 4.0 };
    page.click(centre).await?;
    Ok(())
}

/// The overlay's shadow tree as HTML (its style included), to check a copy.
pub async fn overlay_html(page: &Page) -> anyhow::Result<String> {
    use chromiumoxide::cdp::browser_protocol::dom::GetOuterHtmlParams;
    let root = document(page).await?;
    let host = overlay_host(&root).context("no overlay in the page")?;
    let shadow = host.shadow_roots.iter().flatten().next().context("the overlay has no shadow root")?;
    let mut html = String::new();
    for child in shadow.children.iter().flatten() {
        let outer = page
            .execute(
                GetOuterHtmlParams::builder()
                    .backend_node_id(BackendNodeId::new(*child.backend_node_id.inner()))
                    .build(),
            )
            .await?;
        html.push_str(&outer.result.outer_html);
    }
    Ok(html)
}

/// axe-core's serious and critical violations on `page`.
pub async fn axe(page: &Page) -> anyhow::Result<Vec<Value>> {
    let axe = std::fs::read_to_string(crate::workspace().join("extension/node_modules/axe-core/axe.min.js"))
        .context("axe-core (cargo xtask install)")?;
    page.evaluate(axe).await?;
    let found: Vec<Value> = page
        .evaluate(
            "axe.run(document, { resultTypes: ['violations'] }).then(r => r.violations.map(v => \
             ({id: v.id, impact: v.impact, nodes: v.nodes.map(n => n.target.join(' '))})))",
        )
        .await?
        .into_value()?;
    Ok(found.into_iter().filter(|v| v["impact"] == "serious" || v["impact"] == "critical").collect())
}

/// axe-core over a copy of the overlay's shadow tree in a page of its own
/// (an open shadow root, which axe reads; the closed one it cannot).
pub async fn axe_overlay(browser: &chromiumoxide::Browser, html: &str) -> anyhow::Result<Vec<Value>> {
    let page = browser.new_page("about:blank").await?;
    let build = format!(
        "(() => {{ document.documentElement.lang = 'en'; document.title = 'overlay'; \
         const main = document.createElement('main'); document.body.appendChild(main); \
         const host = document.createElement('div'); main.appendChild(host); \
         host.attachShadow({{mode: 'open'}}).innerHTML = {}; return true; }})()",
        serde_json::to_string(html)?
    );
    let built: bool = page.evaluate(build).await?.into_value()?;
    if !built {
        bail!("the overlay copy was not built");
    }
    let found = axe(&page).await;
    let _ = page.close().await;
    found
}

/// Saves a PNG of `page` as `docs/screenshots/<name>.png` (regenerated by
/// the tests that show each surface).
pub async fn screenshot(page: &Page, name: &str) -> anyhow::Result<PathBuf> {
    let shot = crate::workspace().join(format!("docs/screenshots/{name}.png"));
    let params = chromiumoxide::page::ScreenshotParams::builder().full_page(true).build();
    page.save_screenshot(params, &shot).await?;
    Ok(shot)
}
