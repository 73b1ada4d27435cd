// Background loader: instantiates the Rust module and forwards browser events
// to it. Listeners are registered synchronously at top level so a suspended
// service worker / event page is woken for them (MV3 rule).
import init, * as ext from "./pkg/extension.js";

const api = globalThis.browser ?? globalThis.chrome;
const ready = init({ module_or_path: new URL("./pkg/extension_bg.wasm", import.meta.url) }).then(() => ext.bg_start());
const forward = (kind) => (first, second) => {
  ready.then(() => ext.bg_event(kind, first, second));
};

api.runtime.onMessage.addListener(forward("message"));
api.tabs.onRemoved.addListener(forward("tab_removed"));
api.tabs.onUpdated.addListener(forward("tab_updated"));
api.tabs.onReplaced?.addListener(forward("tab_replaced"));
api.alarms.onAlarm.addListener(forward("alarm"));
api.storage.onChanged.addListener(forward("storage_changed"));
api.runtime.onStartup.addListener(() => ready);
api.runtime.onInstalled.addListener(forward("installed"));
api.notifications?.onClicked.addListener(forward("notification_clicked"));
