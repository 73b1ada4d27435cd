// Popup loader.
import init, { popup_main } from "./pkg/extension.js";
init({ module_or_path: new URL("./pkg/extension_bg.wasm", import.meta.url) }).then(() => popup_main());
