// The browser test page's script: the library, as an app on its own origin would bundle it.
import * as client from "../../src/index.ts";

(globalThis as unknown as { authoric: typeof client }).authoric = client;
