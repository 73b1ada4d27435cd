//! A person's attachments in the composer: files, images and pasted blocks
//! waiting to go out with their next message. They are the person's draft
//! as much as typed text is: a prompt typed beside one would be sent with
//! it. Read by structure; the remove control's words are a second signal
//! only.
//!
//! Evidence (see `fixtures/README.md`):
//! - generation B (2026-09, REAL-HTML quoted from a live page after an
//!   upload, Trochez/ai-control-plane @ 2c1e168, and a user-recorded card,
//!   m413w4r3/bridge `tests/fixtures/chatgpt-dom.js` @ 3f4ec056): the form
//!   holds `[data-composer-attachments][data-visible-attachments]`, a tray
//!   that renders **even when empty**, whose cards are
//!   `span.group/composer-attachment > span.composer-attachment-surface`
//!   (a `span.truncate` file name, a `button` labelled with it) beside a
//!   `button` labelled "Remove <name>" (zh-CN "移除 <name>"). An image card
//!   shows `img[src^="blob:https://chatgpt.com/…"]`, a finished upload
//!   `img[data-attachment-thumbnail-state]` (CODE, panyw5/opencode tests).
//! - generation A (a 2026-01 rendered page, `../shared/CHATGPT-DOM.md`): an
//!   image shows as a plain `div.group.relative.inline-block` in the
//!   composer's header with a "Remove file" button, an "Edit image" button
//!   and a `blob:https://chatgpt.com/…` background image; no test id and no
//!   tray. Public code driving the live site (steipete/oracle @ 083bba7,
//!   2025-12 to 2026-05, CODE) looks for "Remove file" / "Remove file N:
//!   <name>" / "Remove attachment" labels and `data-testid`s naming an
//!   attachment.
//! - No capture shows a pasted-text block or a file chip of generation A:
//!   a blob preview, a card class or an attachment test id anywhere in the
//!   form counts, and so does a remove-file label outside the editor.

use crate::Dom;

/// Attachment cards and previews, by structure: generation B's card and its
/// surface, a thumbnail's state, an attachment test id, any `blob:`
/// preview (an `img`, or a background in a `style`), and generation A's
/// file tile, "a role-group aria label" naming the file (oracle's comment
/// on the live page, CODE) — outside any menu the form may hold.
const CARDS: &str = r#"[class~="group/composer-attachment"], .composer-attachment-surface, [data-attachment-thumbnail-state], [data-testid*="attachment"], img[src^="blob:"], [style*="blob:"], [role="group"][aria-label]"#;

/// Menus and lists, whose groups are options, not attachments.
const MENUS: &str = r#"[role="menu"], [role="listbox"], [data-radix-menu-content], [data-mention-list-scroll-area]"#;

/// Remove controls whose label alone names a file (a second signal, for
/// a chip whose structure is unknown): "Remove file", "Remove file 1:
/// <name>", "Remove attachment" (en; no other locale's words are known —
/// other chips' labels name the file itself, and only their structure
/// tells them from an app's chip).
const REMOVE_FILE: &[&str] = &["Remove file", "Remove attachment"];

/// Whether the composer `form` holds an attachment, outside its editor
/// (an app mention inside the editor is the binding, not an attachment).
/// Visibility is not asked: a card's remove button is transparent until
/// hovered, and a card that is there is the person's whether or not the
/// carrier can tell it is painted.
pub fn shown<D: Dom>(dom: &D, form: &D::Node) -> bool {
    let outside_editor = |n: &D::Node| !dom.within(n, r#"[contenteditable="true"]"#);
    dom.query_all(Some(form), CARDS).iter().any(|n| outside_editor(n) && !dom.within(n, MENUS))
        || dom.query_all(Some(form), "button[aria-label]").iter().filter(|b| outside_editor(b)).any(|b| {
            dom.attr(b, "aria-label").is_some_and(|label| REMOVE_FILE.iter().any(|w| label.trim().starts_with(w)))
        })
}
