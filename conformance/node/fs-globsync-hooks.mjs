// Module resolve hook (registered by fs-globsync.mjs): "fs" / "node:fs" imported from the
// conformance package resolves to fs-facade.mjs; the facade's own import of node:fs does not.
const FACADE = new URL("./fs-facade.mjs", import.meta.url).href;
const PACKAGE = "/node_modules/@modelcontextprotocol/conformance/";

export async function resolve(specifier, context, nextResolve) {
  if ((specifier === "fs" || specifier === "node:fs") && context.parentURL?.includes(PACKAGE)) {
    return { url: FACADE, shortCircuit: true };
  }
  return nextResolve(specifier, context);
}
