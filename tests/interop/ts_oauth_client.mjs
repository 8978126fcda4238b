// The official TypeScript SDK client's OAuth against a protected MCP server:
//   node ts_oauth_client.mjs URL REDIRECT_URI
//
// Driven by tests/test_oauth_flow_typescript_sdk.py, one JSON object a line each way.
// Out: {"authorize": url} when the SDK sends the user to the authorization server (the test plays
// the user), then {"step": ...} after each step. In: {"redirect": url}, where the user's browser
// was sent back to; {"do": "refresh"} and {"do": "call"}, the next steps.
import { randomUUID } from "node:crypto";
import { createInterface } from "node:readline";
import { auth, UnauthorizedError } from "@modelcontextprotocol/sdk/client/auth.js";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [url, redirectUrl] = process.argv.slice(2);
if (!url || !redirectUrl) {
  console.error("usage: node ts_oauth_client.mjs URL REDIRECT_URI");
  process.exit(64);
}
// Every wait is bounded.
setTimeout(() => {
  console.error("ts_oauth_client: timed out");
  process.exit(2);
}, 60_000).unref();

const input = createInterface({ input: process.stdin })[Symbol.asyncIterator]();
async function receive() {
  const { value, done } = await input.next();
  if (done) throw new Error("stdin ended");
  return JSON.parse(value);
}
function say(message) {
  process.stdout.write(JSON.stringify(message) + "\n");
}
async function expect(step) {
  const message = await receive();
  if (message.do !== step) throw new Error(`expected ${step}, got ${JSON.stringify(message)}`);
}

// The provider keeps everything in memory, as the SDK's OAuthClientProvider interface asks.
let clientInformation;
let tokens;
let codeVerifier;
const state = randomUUID();
const provider = {
  get redirectUrl() {
    return redirectUrl;
  },
  get clientMetadata() {
    return {
      client_name: "TypeScript SDK client",
      redirect_uris: [redirectUrl],
      grant_types: ["authorization_code", "refresh_token"],
      response_types: ["code"],
      token_endpoint_auth_method: "none",
    };
  },
  state: () => state,
  clientInformation: () => clientInformation,
  saveClientInformation: (information) => {
    clientInformation = information;
  },
  tokens: () => tokens,
  saveTokens: (saved) => {
    tokens = saved;
  },
  redirectToAuthorization: (authorizationUrl) => say({ authorize: authorizationUrl.href }),
  saveCodeVerifier: (verifier) => {
    codeVerifier = verifier;
  },
  codeVerifier: () => codeVerifier,
  invalidateCredentials: (scope) => {
    if (scope === "all" || scope === "tokens") tokens = undefined;
    if (scope === "all" || scope === "client") clientInformation = undefined;
  },
};

function connection() {
  const client = new Client({ name: "ts-oauth", version: "1.0.0" });
  const transport = new StreamableHTTPClientTransport(new URL(url), { authProvider: provider });
  return { client, transport };
}

// No token: the 401 starts discovery, registration and the authorization request.
let { client, transport } = connection();
try {
  await client.connect(transport);
  throw new Error("connected without authorization");
} catch (error) {
  if (!(error instanceof UnauthorizedError)) throw error;
}
const redirected = new URL((await receive()).redirect).searchParams;
if (redirected.get("state") !== state) throw new Error(`state mismatch: ${redirected.get("state")}`);
await transport.finishAuth(redirected.get("code"));
({ client, transport } = connection());
await client.connect(transport);
const added = await client.callTool({ name: "add", arguments: { a: 2, b: 3 } });
say({ step: "called", sum: added.structuredContent?.sum, iss: redirected.get("iss"), tokens,
      clientId: clientInformation.client_id });

// A refresh through the SDK's own entry point: with a refresh token held, auth() refreshes.
await expect("refresh");
const result = await auth(provider, { serverUrl: new URL(url) });
const echoed = await client.callTool({ name: "echo", arguments: { message: "after refresh" } });
say({ step: "refreshed", result, tokens, text: echoed.content[0].text });

// The tokens are revoked now: the call's 401 sends the SDK back to refresh (refused) and then to
// the user, who does not answer; the call fails.
await expect("call");
try {
  await client.callTool({ name: "echo", arguments: { message: "revoked" } });
  say({ step: "after revocation", error: null });
} catch (error) {
  say({ step: "after revocation", error: error.constructor.name, message: String(error.message) });
}
process.exit(0);
