// The orchestrator's one script in chatgpt.com's own JavaScript world
// (MAIN), for caller attribution. It reads, in the page's data, the
// request ids of the conversation on screen, and hands the content script
// (the isolated world) exactly that: the conversation id, the ids not
// reported before, and which id is the newest. Never a transcript, never a
// tool argument: no message content is read at all.
//
// Where the data is (public evidence, CHATGPT-DOM.md "Tool calls in the
// conversation"; totec448-spec/chat-on-steroids extension/fiber.js at
// 0cce1eecfc290627d3ec829b8ae7a6dac4dbee91, `requestIdsOf` and
// `turnMessagesOf`): each turn anchor
// (`section[data-testid^="conversation-turn"]`, or `[data-turn-key]` in
// the 2026 layout) carries React's `__reactFiber$…` property; climbing its
// `return` chain reaches props holding the turn's message list
// (`turn.messages`, or `allMessages`). ChatGPT stamps the turn's request
// id as `metadata.request_id` on a plain message the moment the turn
// starts a connector request, and on the `api_tool` request message only
// once that clears a safety check (live, forty seconds later): so the id
// is read from any message of the turn, whatever its recipient. One id
// covers every connector call of a turn (src/main/session/correlation.ts:
// "Live ChatGPT gives every connector request in one turn the same
// request_id").
//
// Trust: this runs where the page can reach it, so it captures what it
// uses at load, touches nothing of the page's, and fails closed (an
// unrecognised shape yields nothing). Its only channel is a MessagePort the
// content script hands it through one window message, which it takes
// before the page can see it; the content script and the executor check
// everything it says (shape, bounds, and that the conversation is the one
// the tab is bound to). See docs/permissions.md.
(() => {
  "use strict";
  // The top document only (as the manifest's entry), once per document (a
  // DevTools client may install it again).
  if (window !== window.top) return;
  if (Object.prototype.hasOwnProperty.call(window, "__chatgptOrchestratorCallers")) return;
  Object.defineProperty(window, "__chatgptOrchestratorCallers", { value: true });
  const TAG = "chatgpt-orchestrator/callers/1";
  const TURNS = 'section[data-testid^="conversation-turn"], [data-turn-key]';
  const REQUEST_ID = /^[A-Za-z0-9_-]{1,100}$/;
  const CONVERSATION = /\/c\/([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})(?:[/?#]|$)/;
  const MAX_CLIMB = 80;
  const MAX_TURNS = 12;
  const MAX_IDS = 64;
  const MAX_MESSAGES = 2000;
  // Request ids already reported: the oldest are forgotten past this (a
  // forgotten one still in reach is reported once more; the daemon keeps
  // the first report).
  const MAX_SENT = 4096;

  // Captured before the page can replace them.
  const postOnPort = MessagePort.prototype.postMessage;
  const stopImmediate = Event.prototype.stopImmediatePropagation;
  const isArray = Array.isArray;
  const keysOf = Object.keys;
  const exec = RegExp.prototype.exec;
  const query = Document.prototype.querySelectorAll;
  const getter = (proto, name) => Object.getOwnPropertyDescriptor(proto, name).get;
  const eventData = getter(MessageEvent.prototype, "data");
  const eventSource = getter(MessageEvent.prototype, "source");
  const eventPorts = getter(MessageEvent.prototype, "ports");
  const pathname = () => location.pathname;
  // A navigation can leave the previous chat's turns mounted for a moment:
  // nothing is read until the thread has settled on the new URL.
  let path = pathname();
  let pathSince = 0;

  let port = null;
  const sent = new Set();

  const str = (v, max) => (typeof v === "string" && v.length > 0 && v.length <= max ? v : null);

  function fiberOf(node) {
    for (const key of keysOf(node)) {
      if (key.startsWith("__reactFiber$")) return node[key];
    }
    return null;
  }

  // The turn's messages, and the conversation its props name (if any).
  function turnOf(fiber) {
    let named = null;
    for (let at = fiber, up = 0; at && up < MAX_CLIMB; at = at.return, up++) {
      const props = at.memoizedProps;
      if (!props || typeof props !== "object") continue;
      const turn = props.turn && typeof props.turn === "object" ? props.turn : null;
      const ids = [props.conversationId, props.clientThreadId, turn && turn.conversationId, turn && turn.clientThreadId];
      for (const value of ids) {
        const id = str(value, 64);
        if (!id || id.startsWith("WEB:")) continue;
        if (named && named !== id) return null; // two conversations on one branch: fail closed
        named = id;
      }
      if (turn && isArray(turn.messages)) return { messages: turn.messages, named };
      if (isArray(props.allMessages)) return { messages: props.allMessages, named };
    }
    return null;
  }

  // React double-buffers fibers: the node's own fiber holds the previous
  // render's props every other commit, its `alternate` the other (fiber.js:
  // "The DOM's original Fiber pointer may be the previous render"). Within
  // a turn, ids are only ever added (a message lands, or is stamped in
  // place): the side with more ids, then more messages, is the newer.
  function currentTurnOf(fiber) {
    if (!fiber) return null;
    const own = turnOf(fiber);
    const other = fiber.alternate && typeof fiber.alternate === "object" ? turnOf(fiber.alternate) : null;
    if (!own || !other) return own || other;
    if (own.named && other.named && own.named !== other.named) return null; // two conversations: fail closed
    const ids = (turn) => {
      let n = 0;
      for (let k = 0; k < turn.messages.length && k < MAX_MESSAGES; k++) if (requestIdOf(turn.messages[k])) n++;
      return n;
    };
    const [mine, theirs] = [ids(own), ids(other)];
    if (mine !== theirs) return theirs > mine ? other : own;
    return other.messages.length > own.messages.length ? other : own;
  }

  // The request id a message carries, if well formed.
  function requestIdOf(message) {
    if (!message || typeof message !== "object") return null;
    const meta = message.metadata && typeof message.metadata === "object" ? message.metadata : null;
    const id = meta ? str(meta.request_id, 100) : null;
    return id && exec.call(REQUEST_ID, id) ? id : null;
  }

  // `wanted`: a request id the content script asked for (a call waits on
  // it, and the report of it may have been missed): sent again if shown.
  function scan(wanted, prime) {
    if (!port) return;
    const now = pathname();
    if (now !== path) {
      path = now;
      pathSince = Date.now();
    }
    if (Date.now() - pathSince < 1000) return;
    const m = exec.call(CONVERSATION, now);
    if (!m) return;
    const conversation = m[1];
    const anchors = query.call(document, TURNS);
    // Every id the last turns show, by where it last appears in the page.
    const lastAt = new Map();
    let position = 0;
    for (let i = Math.max(0, anchors.length - MAX_TURNS); i < anchors.length; i++) {
      const turn = currentTurnOf(fiberOf(anchors[i]));
      if (!turn || (turn.named && turn.named !== conversation)) continue;
      const messages = turn.messages;
      for (let k = 0; k < messages.length && k < MAX_MESSAGES; k++) {
        const id = requestIdOf(messages[k]);
        if (id) lastAt.set(id, position++);
      }
    }
    if (lastAt.size === 0) return;
    // Newest first (page order, backwards).
    const shown = [...lastAt.keys()].sort((a, b) => lastAt.get(b) - lastAt.get(a));
    const newest = shown[0];
    const ids = [];
    for (let k = 0; k < shown.length && ids.length < MAX_IDS; k++) {
      const id = shown[k];
      if (sent.has(id) && id !== wanted) continue;
      sent.add(id);
      if (sent.size > MAX_SENT) sent.delete(sent.values().next().value);
      ids.push(id);
    }
    // The first reading only takes note: an id already in the page when the
    // script started is reported when the daemon asks for it, not in a burst.
    if (ids.length > 0 && !prime) {
      postOnPort.call(port, { conversation, requestIds: ids, newest, again: wanted !== null });
    }
  }

  // The content script's port: taken at once, before any page listener.
  addEventListener(
    "message",
    (event) => {
      const data = eventData.call(event);
      const ports = eventPorts.call(event);
      if (eventSource.call(event) !== window || !data || data.t !== TAG || !ports || ports.length !== 1) return;
      stopImmediate.call(event);
      port = ports[0];
      port.onmessage = (m) => {
        const asked = eventData.call(m);
        const wanted = asked && typeof asked.scan === "string" ? asked.scan : null;
        if (wanted !== null) scan(wanted);
      };
      postOnPort.call(port, "ready");
      scan(null, true);
    },
    true,
  );

  // New calls show up as the thread re-renders: look once per batch of
  // mutations, at once (a hidden tab throttles timers to a second or more,
  // and a call waits on this). A slow timer catches data that changes
  // without a DOM change (a request id stamped up to ~40 s after its turn
  // began); it runs for a minute after the last change only, so a page
  // where nothing changes costs nothing. The content script also asks when
  // a call waits.
  const QUIET_MS = 60000;
  const later = setTimeout;
  let lastChange = 0;
  let ticking = false;
  const clock = Date.now;
  const tick = () => {
    // Rearmed before the look: a look that throws (page data of an
    // unexpected shape) never stops the timer.
    ticking = clock() - lastChange < QUIET_MS;
    if (ticking) later(tick, 1000);
    scan(null);
  };
  const changed = () => {
    lastChange = clock();
    if (!ticking) {
      ticking = true;
      later(tick, 1000);
    }
    scan(null);
  };
  new MutationObserver(changed).observe(document, { childList: true, subtree: true });
  changed();
})();
