// Background loader: instantiates the Rust module and forwards browser events
// to it. Listeners are registered synchronously at top level so a suspended
// service worker / event page is woken for them (MV3 rule).
import init, * as ext from "./pkg/extension.js";

const api = globalThis.browser ?? globalThis.chrome;
// Why this background started, for its stored tab ids: "browser" (the
// browser started: an old tab id may now name a person's tab) or "installed"
// (installed, updated or reloaded: the same browser session). Neither is
// said when it was only woken for an event.
let said;
const why = new Promise((resolve) => (said = resolve));
const ready = init({ module_or_path: new URL("./pkg/extension_bg.wasm", import.meta.url) }).then(() => ext.bg_start(why));
const forward = (kind) => (first, second) => {
  ready.then(() => ext.bg_event(kind, first, second));
};

api.runtime.onMessage.addListener(forward("message"));
api.tabs.onRemoved.addListener(forward("tab_removed"));
api.tabs.onUpdated.addListener(forward("tab_updated"));
api.tabs.onReplaced?.addListener(forward("tab_replaced"));
api.alarms.onAlarm.addListener(forward("alarm"));
api.storage.onChanged.addListener(forward("storage_changed"));
api.runtime.onStartup.addListener(() => {
  said("browser");
  return ready;
});
api.runtime.onInstalled.addListener((details) => {
  // The browser's own update comes with a browser start; an update of the
  // extension applied at a browser start comes with onStartup, which must
  // win: "installed" is said a moment later.
  const ours = details?.reason === "install" || details?.reason === "update";
  setTimeout(() => said(ours ? "installed" : "browser"), ours ? 500 : 0);
  forward("installed")(details);
});
api.notifications?.onClicked.addListener(forward("notification_clicked"));
