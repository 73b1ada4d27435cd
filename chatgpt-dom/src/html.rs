//! A parsed HTML document as a [`Dom`] (feature `html`): the page an
//! operator saved from the browser, for `orchestrator inspect-page`, and
//! the corpus fixtures in the native tests.
//!
//! Without a layout engine, visibility is read from what the markup says:
//! the `hidden` attribute, inline `display: none` / `visibility: hidden` /
//! a 0×0 box, and the utility classes the site uses for the same (`hidden`
//! unless a responsive class shows it again, `invisible`), on the node or
//! any ancestor. A live carrier asks the browser instead.

use ego_tree::NodeId;
use scraper::{ElementRef, Html, Selector};

use crate::Dom;

/// A parsed page.
pub struct HtmlPage {
    /// The document; tests mutate it to build variants.
    pub html: Html,
}

impl HtmlPage {
    /// Parses a whole document.
    pub fn parse(text: &str) -> HtmlPage {
        HtmlPage { html: Html::parse_document(text) }
    }

    /// The element behind `node`.
    pub fn element(&self, node: NodeId) -> Option<ElementRef<'_>> {
        ElementRef::wrap(self.html.tree.get(node)?)
    }

    /// The start tag of `node`, for reports (`<button id="…" …>`).
    pub fn describe(&self, node: NodeId) -> String {
        let Some(element) = self.element(node) else { return String::new() };
        let value = element.value();
        let attrs: String = value
            .attrs()
            .filter(|(name, _)| !matches!(*name, "class" | "style" | "d"))
            .map(|(name, v)| {
                let v: String = v.chars().take(60).collect();
                format!(" {name}=\"{v}\"")
            })
            .collect();
        format!("<{}{attrs}>", value.name())
    }
}

/// Whether the markup itself hides `element` (not its ancestors).
fn hides_itself(element: &ElementRef<'_>) -> bool {
    let value = element.value();
    if value.attr("hidden").is_some() {
        return true;
    }
    // Inline declarations, as `property: value` pairs (never substrings:
    // `min-width: 0` is not `width: 0`).
    let style = value.attr("style").unwrap_or_default().to_ascii_lowercase();
    let declared = |property: &str, values: &[&str]| {
        style.split(';').filter_map(|d| d.split_once(':')).any(|(p, v)| {
            let v = v.trim().trim_end_matches("!important").trim();
            p.trim() == property && values.contains(&v)
        })
    };
    let zero = ["0", "0px"];
    if declared("display", &["none"])
        || declared("visibility", &["hidden"])
        || (declared("width", &zero) && declared("height", &zero))
    {
        return true;
    }
    let classes: Vec<&str> = value.classes().collect();
    let shown_again = classes.iter().any(|c| {
        c.rsplit_once(':')
            .is_some_and(|(_, d)| matches!(d, "flex" | "block" | "inline" | "inline-flex" | "grid" | "contents"))
    });
    (classes.contains(&"hidden") && !shown_again) || classes.contains(&"invisible")
}

fn selector(text: &str) -> Option<Selector> {
    Selector::parse(text).ok()
}

impl Dom for HtmlPage {
    type Node = NodeId;

    fn query_all(&self, scope: Option<&NodeId>, selector_text: &str) -> Vec<NodeId> {
        let Some(selector) = selector(selector_text) else { return Vec::new() };
        match scope {
            None => self.html.select(&selector).map(|e| e.id()).collect(),
            Some(id) => self.element(*id).map(|e| e.select(&selector).map(|e| e.id()).collect()).unwrap_or_default(),
        }
    }

    fn attr(&self, node: &NodeId, name: &str) -> Option<String> {
        self.element(*node)?.value().attr(name).map(str::to_owned)
    }

    fn text(&self, node: &NodeId) -> String {
        self.element(*node).map(|e| e.text().collect()).unwrap_or_default()
    }

    fn within(&self, node: &NodeId, selector_text: &str) -> bool {
        let Some(selector) = selector(selector_text) else { return false };
        let mut current = self.html.tree.get(*node).and_then(|n| n.parent());
        while let Some(n) = current {
            if ElementRef::wrap(n).is_some_and(|e| selector.matches(&e)) {
                return true;
            }
            current = n.parent();
        }
        false
    }

    fn visible(&self, node: &NodeId) -> bool {
        visible(&self.html, *node)
    }
}

/// Whether the markup leaves `node` visible: neither it nor an ancestor
/// hides itself (see the module's rules).
pub fn visible(html: &Html, node: NodeId) -> bool {
    let mut current = html.tree.get(node);
    while let Some(n) = current {
        if ElementRef::wrap(n).is_some_and(|e| hides_itself(&e)) {
            return false;
        }
        current = n.parent();
    }
    true
}
