// Preload for Node < 22 (`node --import ./fs-globsync.mjs ...`): the conformance suite's bundle
// imports `globSync` from "fs", which Node added in 22 and which only its `tier-check` command
// uses. Node 20 refuses to load the bundle at all, so the suite's own imports of "fs" are
// resolved to a facade that re-exports node:fs with a stub globSync. Everything else is untouched.
import * as fs from "node:fs";
import { register } from "node:module";

if (typeof fs.globSync !== "function") {
  register(new URL("./fs-globsync-hooks.mjs", import.meta.url));
}
