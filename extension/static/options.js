// Options page loader.
import init, { options_main } from "./pkg/extension.js";
init({ module_or_path: new URL("./pkg/extension_bg.wasm", import.meta.url) }).then(() => options_main());
