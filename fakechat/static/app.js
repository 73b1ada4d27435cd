// fakechat's page script: plays chatgpt.com's frontend for the fake site.
// It is fakechat's own code, never the product's: the product's adapter only
// reads the DOM this script maintains and uses the page's own controls.
(() => {
  "use strict";
  const body = document.body;
  let conversation = body.dataset.fakechatConversation || null;
  const project = body.dataset.fakechatProject || null;
  const layout = body.dataset.fakechatLayout;
  let version = Number(body.dataset.fakechatVersion || 0);
  let tab = sessionStorage.getItem("fakechat-tab");
  if (!tab) {
    tab = crypto.randomUUID();
    sessionStorage.setItem("fakechat-tab", tab);
  }

  const post = (path, data) =>
    fetch(path, { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(data) });
  // The visible composer only: generation B keeps hidden legacy editors elsewhere.
  const editor = () => document.querySelector("#composer-region form [contenteditable='true']");
  const actions = () => document.getElementById("composer-actions");
  // What the send slot shows: "empty" (the voice button), "draft" (send) or "stop".
  const slotState = () => (actions() ? actions().dataset.slot : null);
  const textOf = (ed) => (ed ? ed.innerText.trim() : "");

  // Hydration: the server's first paint has the fallback textarea and no
  // editor; the frontend hides the one and inserts the other.
  function hydrate() {
    const markup = body.dataset.fakechatEditor;
    const fallback = document.querySelector("#composer-region form textarea");
    if (!markup || !fallback || editor()) return;
    fallback.style.display = "none";
    fallback.insertAdjacentHTML("afterend", markup);
  }
  hydrate();
  // The app chosen in the composer and how ({app, route}); sent with the next turn.
  let selection = null;
  const popover = () => document.getElementById("composer-popover");
  const plusButton = () =>
    document.querySelector("[data-testid='composer-plus-btn'], [data-composer-navigation-target='add-context']");

  async function composer(params) {
    const q = new URLSearchParams({ conversation: conversation || "", project: project || "", ...params });
    const r = await fetch(`/_fakechat/api/composer?${q}`);
    return r.ok ? r.json() : null;
  }

  // Popover requests in flight: only the newest may render.
  let menuSeq = 0;

  async function openMenu(menu, query) {
    const seq = ++menuSeq;
    const c = await composer({ menu, query: query || "" });
    if (!c || !popover() || seq !== menuSeq) return;
    popover().innerHTML = c.popover;
    const plus = plusButton();
    if (plus) plus.setAttribute("aria-expanded", String(menu !== "mention"));
  }

  function closeMenu() {
    menuSeq++;
    if (popover()) popover().innerHTML = "";
    const plus = plusButton();
    if (plus) plus.setAttribute("aria-expanded", "false");
  }

  // The model picker. The page's choice lives in this page only: a reload
  // shows the account's default again (render::model_trigger, hub.rs).
  let chosenModel = null;
  // The thinking effort, chosen the same way (generation B's pill shows it).
  let chosenEffort = null;
  const modelPopover = () => document.getElementById("model-popover");
  const modelTrigger = () => document.querySelector("[data-fakechat-model-trigger]");
  let pickerSeq = 0;

  async function openPicker(level) {
    const seq = ++pickerSeq;
    const c = await composer({ picker: level, model: chosenModel || "", effort: chosenEffort || "" });
    if (!c || !modelPopover() || seq !== pickerSeq) return;
    modelPopover().innerHTML = c.picker;
    const t = modelTrigger();
    if (t) {
      t.setAttribute("aria-expanded", "true");
      t.dataset.state = "open";
    }
  }

  function closePicker() {
    pickerSeq++;
    if (modelPopover()) modelPopover().innerHTML = "";
    const t = modelTrigger();
    if (t) {
      t.setAttribute("aria-expanded", "false");
      t.dataset.state = "closed";
    }
  }

  // Choosing closes the menu (Radix does); generation A's trigger names the
  // model, B's pill keeps showing the effort.
  function chooseModel(label) {
    chosenModel = label;
    const t = modelTrigger();
    if (t && body.dataset.fakechatGeneration === "a") {
      t.setAttribute("aria-label", `Model selector, current model is ${label}`);
      const span = t.querySelector("span");
      if (span) span.textContent = label;
    }
    closePicker();
  }

  function chooseEffort(label) {
    chosenEffort = label;
    const t = modelTrigger();
    if (t && body.dataset.fakechatGeneration === "b") t.textContent = label;
    closePicker();
  }

  // Generation B's `@` route puts the app inside the editor (render::mention):
  // the mention, not a chip in the strip, is the selection.
  const inEditor = (route) => route === "mention" && body.dataset.fakechatGeneration === "b";
  const MENTION = "[app-mention-display-name]";

  async function choose(row, route) {
    const app = row.dataset.fakechatApp;
    const c = await composer({ pill: app });
    if (!c) return;
    selection = { app, route };
    const strip = document.getElementById("composer-apps");
    if (strip && !inEditor(route)) strip.outerHTML = c.apps;
    closeMenu();
    if (route === "mention") {
      // Picking a mention replaces the editor (as the real one can): locate it again.
      const ed = editor();
      const fresh = ed.cloneNode(false);
      fresh.innerHTML = inEditor(route) ? c.mention : "<p></p>";
      ed.replaceWith(fresh);
      updateSlot();
    }
  }

  // A person's attachments: files chosen through the composer's file input
  // (a driver sets its files, as a person's file dialog would). Each shows
  // as the real page renders it (render::attachments_tray): generation A a
  // plain chip with a blob: preview, "Edit image" and "Remove file";
  // generation B a group/composer-attachment card with "Remove <name>".
  let attachments = [];
  const tray = () => document.getElementById("composer-attachments");
  const fileInput = () => document.querySelector("#composer-region form input[type='file']");
  function renderAttachments() {
    const t = tray();
    if (!t) return;
    const b = body.dataset.fakechatGeneration === "b";
    const box = b ? t.firstElementChild : t;
    box.replaceChildren();
    for (const a of attachments) {
      const card = document.createElement(b ? "span" : "div");
      if (b) {
        card.className = "group/composer-attachment relative block";
        card.innerHTML = '<span class="composer-attachment-surface"><span class="truncate"></span></span>' +
          '<button type="button" class="composer-attachment-surface absolute inset-0"></button><button type="button"></button>';
        card.querySelector(".truncate").textContent = a.name;
        card.children[1].setAttribute("aria-label", a.name);
        card.children[2].setAttribute("aria-label", `Remove ${a.name}`);
      } else {
        card.className = "group relative inline-block text-sm";
        card.innerHTML = '<div class="relative overflow-hidden rounded-2xl"><div class="h-14 w-14 bg-cover"></div></div>' +
          '<button type="button" aria-label="Edit image"></button><button type="button" aria-label="Remove file"></button>';
        card.querySelector(".bg-cover").style.backgroundImage = `url("${a.url}")`;
      }
      card.lastElementChild.addEventListener("click", (e) => {
        e.preventDefault();
        e.stopPropagation();
        URL.revokeObjectURL(a.url);
        attachments = attachments.filter((x) => x !== a);
        renderAttachments();
      });
      box.appendChild(card);
    }
    if (b) t.dataset.visibleAttachments = String(attachments.length > 0);
    updateSlot();
  }
  document.addEventListener("change", (e) => {
    if (e.target !== fileInput()) return;
    for (const file of e.target.files) attachments.push({ name: file.name, url: URL.createObjectURL(file) });
    e.target.value = "";
    renderAttachments();
  });

  // What the person typed: the editor's text without an app mention in it.
  function typed(ed) {
    if (!ed) return "";
    // innerText keeps the paragraphs' line breaks (a detached copy would not).
    let text = ed.innerText;
    for (const m of ed.querySelectorAll(MENTION)) text = text.replace(m.textContent, "");
    return text.trim();
  }

  function mentionQuery() {
    const m = /(?:^|\s)@([^\s@]*)$/.exec(textOf(editor()));
    return m ? m[1] : null;
  }

  // The real composer renders the send button only while the editor holds
  // text, and the voice button while it is empty; never over the stop button.
  function updateSlot() {
    const a = actions();
    if (!a || a.dataset.slot === "stop") return;
    // A file alone may be sent, as on chatgpt.com.
    const want = typed(editor()) || attachments.length ? "draft" : "empty";
    if (a.dataset.slot === want) return;
    a.innerHTML = want === "draft" ? body.dataset.fakechatSlotDraft : body.dataset.fakechatSlotEmpty;
    a.dataset.slot = want;
  }

  async function submit() {
    const ed = editor();
    const text = typed(ed);
    // A mention deleted from the editor is a selection dropped, as a removed chip is.
    if (selection && inEditor(selection.route) && !ed.querySelector(MENTION)) selection = null;
    if (!text && !attachments.length) return;
    const response = await post("/_fakechat/api/submit", {
      conversation,
      project,
      text,
      tab,
      app: selection,
      model: chosenModel,
      effort: body.dataset.fakechatGeneration === "b" && modelTrigger() ? modelTrigger().textContent.trim() : null,
      attachments: attachments.map((a) => a.name),
    });
    if (!response.ok) return;
    selection = null;
    ed.innerHTML = "<p></p>";
    attachments = [];
    renderAttachments();
    updateSlot();
    const r = await response.json();
    if (!conversation) {
      conversation = r.conversation;
      body.dataset.fakechatConversation = conversation;
      history.pushState({}, "", r.url);
      reportVisibility();
      poll();
    }
  }

  async function poll() {
    while (conversation) {
      let v;
      try {
        const r = await fetch(`/_fakechat/api/view?conversation=${conversation}&after=${version}`);
        if (!r.ok) throw new Error(String(r.status));
        v = await r.json();
      } catch (_) {
        await new Promise((res) => setTimeout(res, 500));
        continue;
      }
      if (v.layout !== layout) {
        location.reload();
        return;
      }
      if (v.version === version) continue;
      version = v.version;
      const region = document.getElementById("thread-region");
      if (region) region.outerHTML = v.thread;
      hangPageData(v.pageData);
      if (actions()) actions().outerHTML = v.actions;
      const apps = document.getElementById("composer-apps");
      if (apps && !selection) apps.outerHTML = v.apps;
      updateSlot();
    }
  }

  // React keeps each turn's messages on the turn element's fiber
  // (`__reactFiber$<random>`, its `return` chain reaching props with the
  // turn's `messages`): the page's data, which the visible thread does not
  // show. fakechat hangs the server's page data there the same way. Source:
  // public code reading the live page (totec448-spec/chat-on-steroids
  // extension/fiber.js at 0cce1eecfc290627d3ec829b8ae7a6dac4dbee91), not a
  // rendered page; see render::turn_messages. React double-buffers fibers:
  // a DOM node keeps the fiber it was created with, and each commit makes
  // that fiber or its `alternate` the current one, so the node's own
  // pointer holds the previous render's props every other commit (fiber.js:
  // "The DOM's original Fiber pointer may be the previous render"). fakechat
  // does the same: one pair per turn, the newest data on the other one of
  // the pair at each change of that turn. NOT from a rendered page (fibers
  // are never in saved HTML): from that code's reading of the live page. A
  // human reads none of it. The real fiber carries far more (tags, a
  // committed root); only what the product reads is reproduced, and where
  // the real page differs the page script finds no id: the call is refused.
  const fiberKey = "__reactFiber$" + Math.random().toString(36).slice(2, 12);
  const pairs = new Map();
  function fiberWith(messages) {
    const turn = { tag: 0, memoizedProps: { turn: { messages }, conversationId: conversation }, return: null };
    return { tag: 5, memoizedProps: {}, return: { tag: 0, memoizedProps: {}, return: turn } };
  }
  function hangPageData(data) {
    if (!data) return;
    for (const el of document.querySelectorAll('section[data-testid^="conversation-turn"], [data-turn-key]')) {
      const key = el.dataset.testid || el.dataset.turnKey;
      const messages = data[key];
      if (!Array.isArray(messages)) continue;
      const text = JSON.stringify(messages);
      let pair = pairs.get(key);
      if (!pair) {
        pair = { node: fiberWith(messages), other: fiberWith(messages), current: 0, text };
        pair.node.alternate = pair.other;
        pair.other.alternate = pair.node;
        pairs.set(key, pair);
      } else if (pair.text !== text) {
        // A commit of this turn only: an unchanged turn keeps its fibers, so
        // a stale node pointer stays stale until the turn renders again.
        pair.text = text;
        pair.current = 1 - pair.current;
        const current = pair.current === 0 ? pair.node : pair.other;
        current.return.return.memoizedProps = { turn: { messages }, conversationId: conversation };
      }
      pair.node.memoizedProps = { className: el.className };
      el[fiberKey] = pair.node;
    }
  }
  try {
    hangPageData(JSON.parse(body.dataset.fakechatPageData || "{}"));
  } catch (_) {}

  // `keepalive`: a report made just before the tab closes still arrives.
  function reportVisibility() {
    const report = { tab, conversation, visible: !document.hidden, path: location.pathname, interactions };
    fetch("/_fakechat/api/tab", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify(report),
      keepalive: true,
    });
  }
  // ---- fakechat's interaction recorder (begin). fakechat's own test
  // instrument, never the product's code: every click, key and focus the
  // page sees, whoever made it (a person, this script, the adapter's
  // synthetic events), counted in the capture phase before any handler
  // and reported with the tab at once. A read-only page inspection must
  // leave all three at 0.
  const interactions = { clicks: 0, keys: 0, focus: 0 };
  const counted = (kind) => () => {
    interactions[kind] += 1;
    reportVisibility();
  };
  for (const [event, kind] of [
    ["pointerdown", "clicks"],
    ["click", "clicks"],
    ["keydown", "keys"],
    ["input", "keys"],
    ["focus", "focus"],
  ]) {
    window.addEventListener(event, counted(kind), true);
  }
  // A background tab's element may take focus without a `focus` event
  // (the window has none to give): a caret placed in it still moves the
  // document's selection.
  document.addEventListener("selectionchange", counted("focus"));
  // ---- fakechat's interaction recorder (end).

  document.addEventListener("input", () => {
    // After the input event, never within the typist's own call. The slot's
    // two structures (voice while empty, send once there is text) are real
    // evidence (chatgpt-dom/fixtures/README.md); WHEN the real frontend swaps
    // them is not: rendered pages are snapshots, no public evidence shows the
    // timing. Marked as an assumption; the adapter does not rely on it: it
    // waits, bounded, for the send button the page renders (compose::press_send
    // answers Ok(None) until then) and abandons at the deadline (fails closed).
    queueMicrotask(updateSlot);
    const query = mentionQuery();
    if (query !== null) openMenu("mention", query);
    else if (!(plusButton() && plusButton().getAttribute("aria-expanded") === "true")) closeMenu();
  });
  document.addEventListener("keydown", (e) => {
    if (e.key === "Enter" && !e.shiftKey && e.target.closest && e.target.closest("[contenteditable='true']")) {
      e.preventDefault();
      submit();
    }
  });
  document.addEventListener("submit", (e) => {
    e.preventDefault();
    if (slotState() === "draft") submit();
  });
  document.addEventListener("click", (e) => {
    const pick = e.target.closest && e.target.closest("[data-fakechat-model], [data-fakechat-model-nav], [data-fakechat-effort]");
    if (pick) {
      e.preventDefault();
      if (pick.getAttribute("aria-disabled") === "true") return;
      if (pick.dataset.fakechatModelNav) openPicker(pick.dataset.fakechatModelNav);
      else if (pick.dataset.fakechatEffort) chooseEffort(pick.dataset.fakechatEffort);
      else chooseModel(pick.dataset.fakechatModel);
      return;
    }
    const trigger = e.target.closest && e.target.closest("[data-fakechat-model-trigger]");
    if (trigger) {
      e.preventDefault();
      // Radix's trigger of 2026-09 opens on pointerdown (below), never on a click alone.
      if (trigger.dataset.fakechatPointerOnly) return;
      if (trigger.getAttribute("aria-expanded") === "true") closePicker();
      else openPicker("open");
      return;
    }
    const row = e.target.closest && e.target.closest("[data-fakechat-app], [data-fakechat-nav]");
    if (row) {
      e.preventDefault();
      if (row.getAttribute("aria-disabled") === "true") return;
      if (row.dataset.fakechatNav === "more") openMenu("more");
      else if (row.dataset.fakechatNav === "developer_mode") openMenu("apps");
      else if (row.dataset.fakechatApp) {
        const mention = !!row.closest("#composer-popover [role='listbox']");
        choose(row, mention ? "mention" : "plus_menu");
      } else closeMenu();
      return;
    }
    const b = e.target.closest && e.target.closest("button");
    if (!b) return;
    if (b === plusButton()) {
      e.preventDefault();
      if (b.getAttribute("aria-expanded") === "true") closeMenu();
      else openMenu("root");
      return;
    }
    if (b.dataset.testid === "regenerate-thread-error-button" || b.dataset.fakechatRetry) {
      post("/_fakechat/api/retry", { conversation });
    } else if (b.dataset.fakechatDismiss) {
      b.closest("[role='dialog']").remove();
    } else if (b.closest("#composer-actions")) {
      e.preventDefault();
      if (slotState() === "stop") post("/_fakechat/api/stop", { conversation });
      else if (slotState() === "draft") submit();
    }
  });
  // ---- fakechat's approval-card recorder (begin). fakechat's own test
  // instrument, never the product's code: a click on one of the
  // tool-approval card's buttons answers the card, as on the live page,
  // and is recorded for the oracle (`approval_clicked`), whoever made it.
  // The product must never click the card; tests assert it never did.
  document.addEventListener("click", (e) => {
    const b = e.target.closest && e.target.closest("[data-codex-approval-surface] button");
    if (b) post("/_fakechat/api/approval", { conversation, button: b.textContent.trim() });
  });
  // ---- fakechat's approval-card recorder (end).
  // The picker trigger of 2026-09 (render::model_trigger): a primary
  // button's pointerdown toggles it, as Radix's DropdownMenu trigger does.
  document.addEventListener("pointerdown", (e) => {
    const trigger = e.target.closest && e.target.closest("[data-fakechat-model-trigger][data-fakechat-pointer-only]");
    if (!trigger || e.button !== 0 || e.ctrlKey) return;
    if (trigger.getAttribute("aria-expanded") === "true") closePicker();
    else openPicker("open");
  });
  document.addEventListener("visibilitychange", reportVisibility);
  reportVisibility();
  updateSlot();
  if (conversation) poll();
})();
