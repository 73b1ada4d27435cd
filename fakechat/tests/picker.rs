//! The adapter's model and effort pinning against fakechat's picker as its
//! page script moves it (`static/app.js`: each click re-renders the picker
//! from the page's choice), in the picker of 2026-08 (Advanced → Model and
//! Advanced → Effort, Pro as an effort): the model, then the effort, are
//! chosen and verified; an effort the picker lacks is `MODEL_UNAVAILABLE`
//! with nothing else changed; the openers are told apart by structure when
//! their words are in no table; a disabled tier is never clicked.

use std::cell::RefCell;

use chatgpt_dom::bind::Wait;
use chatgpt_dom::html::HtmlPage;
use chatgpt_dom::model::{pin, pin_effort};
use chatgpt_dom::{Act, Dom};
type NodeId = <HtmlPage as Dom>::Node;
use fakechat::render::{Generation, Picker, View};
use protocol::ErrorCode;

/// The page: a view the clicks change as the page script does, rendered.
struct Live {
    view: RefCell<View>,
    html: RefCell<HtmlPage>,
    /// Words put in place of the openers' own ("Model", "Effort").
    words: Option<(&'static str, &'static str)>,
    /// A page that never changes: clicks are only recorded.
    still: bool,
    clicks: RefCell<Vec<String>>,
}

impl Live {
    fn new(words: Option<(&'static str, &'static str)>) -> Live {
        let view = View {
            generation: Generation::B,
            models: fakechat::fixtures::models(),
            model: Some("GPT-5.5".into()),
            ..View::default()
        };
        let html = RefCell::new(HtmlPage::parse(""));
        let live = Live { view: RefCell::new(view), html, words, still: false, clicks: RefCell::default() };
        live.render();
        live
    }

    /// A page of our own markup that never changes.
    fn still(markup: &str) -> Live {
        let html = RefCell::new(HtmlPage::parse(markup));
        Live { view: RefCell::default(), html, words: None, still: true, clicks: RefCell::default() }
    }

    fn render(&self) {
        let mut page = fakechat::render::page(&self.view.borrow());
        if let Some((model, effort)) = self.words {
            page = page.replace("<span>Model</span>", &format!("<span>{model}</span>"));
            page = page.replace("<span>Effort</span>", &format!("<span>{effort}</span>"));
        }
        *self.html.borrow_mut() = HtmlPage::parse(&page);
    }
}

impl Dom for Live {
    type Node = NodeId;
    fn query_all(&self, scope: Option<&NodeId>, selector: &str) -> Vec<NodeId> {
        self.html.borrow().query_all(scope, selector)
    }
    fn attr(&self, node: &NodeId, name: &str) -> Option<String> {
        self.html.borrow().attr(node, name)
    }
    fn text(&self, node: &NodeId) -> String {
        self.html.borrow().text(node)
    }
    fn within(&self, node: &NodeId, selector: &str) -> bool {
        self.html.borrow().within(node, selector)
    }
    fn visible(&self, node: &NodeId) -> bool {
        self.html.borrow().visible(node)
    }
}

impl Act for Live {
    fn insert_text(&self, _: &NodeId, _: &str) -> bool {
        panic!("nothing is typed while pinning")
    }

    fn click(&self, node: &NodeId) {
        let attr = |name: &str| self.attr(node, name);
        self.clicks.borrow_mut().push(self.text(node).trim().to_owned());
        if self.still {
            return;
        }
        {
            let mut view = self.view.borrow_mut();
            if attr("data-fakechat-model-trigger").is_some() {
                view.picker = if view.picker.is_some() { None } else { Some(Picker::Open) };
            } else if let Some(nav) = attr("data-fakechat-model-nav") {
                view.picker = Some(match nav.as_str() {
                    "advanced" => Picker::Advanced,
                    "submenu" => Picker::Submenu,
                    "effort" => Picker::Effort,
                    other => panic!("unknown nav {other}"),
                });
            } else if let Some(effort) = attr("data-fakechat-effort") {
                view.effort = Some(effort);
                view.picker = None;
            } else if let Some(model) = attr("data-fakechat-model") {
                assert_ne!(attr("aria-disabled").as_deref(), Some("true"), "a disabled row is never clicked");
                view.model = Some(model);
                view.picker = None;
            } else {
                panic!("unexpected click on {:?}", self.text(node));
            }
        }
        self.render();
    }

    fn clear(&self, _: &NodeId) {
        panic!("nothing is cleared while pinning")
    }
}

/// Each wait lets no time pass but the page's own (it reacts at once).
struct Now(std::cell::Cell<u64>);

impl Wait for Now {
    fn now_ms(&self) -> u64 {
        self.0.get()
    }
    async fn change(&self, _until_ms: u64) -> bool {
        self.0.set(self.0.get() + 100);
        true
    }
}

fn run<T>(future: impl std::future::Future<Output = T>) -> T {
    tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(future)
}

#[test]
fn the_model_then_its_effort_are_chosen_and_verified_pro_among_the_efforts() {
    let page = Live::new(None);
    let wait = Now(Default::default());
    run(pin(&page, "o3", &wait)).unwrap();
    run(pin_effort(&page, "Pro", &wait)).unwrap();
    let view = page.view.borrow();
    assert_eq!((view.model.as_deref(), view.effort.as_deref()), (Some("o3"), Some("Pro")));
    assert!(view.picker.is_none(), "the picker is closed again");
    // A first-level tier is found there, without the Advanced view.
    drop(view);
    page.clicks.borrow_mut().clear();
    run(pin_effort(&page, "Medium", &wait)).unwrap();
    assert_eq!(page.view.borrow().effort.as_deref(), Some("Medium"));
    assert!(!page.clicks.borrow().iter().any(|c| c == "Advanced"), "{:?}", page.clicks.borrow());
}

#[test]
fn an_effort_the_picker_lacks_is_unavailable_and_changes_nothing() {
    let page = Live::new(None);
    let wait = Now(Default::default());
    let refused = run(pin_effort(&page, "Ultra", &wait)).unwrap_err();
    assert_eq!(refused.code, ErrorCode::ModelUnavailable, "{refused:?}");
    let view = page.view.borrow();
    assert_eq!((view.model.as_deref(), view.effort.as_deref(), view.picker), (Some("GPT-5.5"), None, None));
    // "Pro" the effort is never "GPT-5.5 Pro" the model, nor the other way round.
    drop(view);
    assert_eq!(run(pin(&page, "Pro", &wait)).unwrap_err().code, ErrorCode::ModelUnavailable);
    assert_eq!(page.view.borrow().model.as_deref(), Some("GPT-5.5"));
}

/// The openers in the words public code records for other locales (zh-CN,
/// vi, ko with ja's effort word) and in words no table holds (an unknown
/// locale): read by their words where known, and by structure anyway (the
/// effort opener is the one whose value the pill shows, the model opener
/// the other one of the advanced view); both pins hold in every one.
#[test]
fn openers_in_other_languages_and_in_unknown_words_are_told_apart() {
    for words in
        [("选择模型", "强度"), ("Mô hình", "Mức suy luận"), ("모델 선택", "推論レベル"), ("Malli", "Ponnistus")]
    {
        let page = Live::new(Some(words));
        let wait = Now(Default::default());
        run(pin(&page, "o3", &wait)).unwrap_or_else(|e| panic!("{words:?}: {e:?}"));
        run(pin_effort(&page, "Pro", &wait)).unwrap_or_else(|e| panic!("{words:?}: {e:?}"));
        let view = page.view.borrow();
        assert_eq!((view.model.as_deref(), view.effort.as_deref()), (Some("o3"), Some("Pro")), "{words:?}");
    }
}

/// The flat panel of 2026-09 (a live DOM recorded 2026-09-05, search-index
/// id 59148944243; rzn-browser's note of 2026-08-31): the pill (its text the
/// effort), a "Select model" view toggle, the simple view's Power slider
/// and the advanced view's model radios, open. Our own markup of that
/// structure.
const FLAT_PANEL: &str = r#"<html lang="en"><body><form data-chatgpt-composer="">
<div contenteditable="true" role="textbox"><p></p></div>
<button type="button" class="__composer-pill" aria-haspopup="menu" aria-expanded="true" data-state="open">Pro</button></form>
<div role="menu" data-radix-menu-content="" data-state="open"><div data-testid="composer-intelligence-picker-content" role="group">
<div role="menuitem" aria-label="Select model" aria-expanded="true">Pro</div>
<div data-testid="composer-model-picker-slider-simple-view"><div role="menuitem" aria-label="Power"><span role="slider" aria-valuemin="0" aria-valuemax="4" aria-valuenow="4" aria-valuetext="Pro, 5 of 5"></span></div></div>
<div data-testid="composer-model-picker-slider-advanced-view">
<div role="menuitemradio" aria-checked="true" data-state="checked">GPT-5.6 Sol</div>
<div role="menuitemradio" aria-checked="false" data-state="unchecked">GPT-5.5</div>
<div role="menuitemradio" aria-checked="false" data-state="unchecked">o3</div></div></div></div>
</body></html>"#;

/// In the flat panel the model radios of the advanced view are read as
/// models (the one checked needs no click; another one is clicked), and
/// an effort that only the slider sets is not driven: `MODEL_UNAVAILABLE`,
/// nothing clicked inside the panel.
#[test]
fn the_flat_panel_reads_its_model_radios_and_leaves_the_slider_alone() {
    let page = Live::still(FLAT_PANEL);
    let wait = Now(Default::default());
    run(pin(&page, "GPT-5.6 Sol", &wait)).unwrap();
    assert!(!page.clicks.borrow().iter().any(|c| c.starts_with("GPT")), "{:?}", page.clicks.borrow());
    let _ = run(pin(&page, "o3", &wait));
    assert!(page.clicks.borrow().iter().any(|c| c == "o3"), "{:?}", page.clicks.borrow());
    page.clicks.borrow_mut().clear();
    assert_eq!(run(pin_effort(&page, "Medium", &wait)).unwrap_err().code, ErrorCode::ModelUnavailable);
    assert!(page.clicks.borrow().iter().all(|c| c == "Pro"), "only the trigger: {:?}", page.clicks.borrow());
}
