// The official TypeScript SDK client against a Streamable HTTP server: node ts_client.mjs URL
//
// Connects, lists tools, calls slow_count with an onprogress callback, answers the elicitation of
// confirm_action, ends the session, and prints one line of JSON saying what it saw.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ElicitRequestSchema } from "@modelcontextprotocol/sdk/types.js";

const url = process.argv[2];
if (!url) {
  console.error("usage: node ts_client.mjs URL");
  process.exit(64);
}
// Every wait is bounded.
setTimeout(() => {
  console.error("ts_client: timed out");
  process.exit(2);
}, 30_000).unref();

const client = new Client({ name: "ts-interop", version: "1.0.0" }, { capabilities: { elicitation: {} } });
const elicitations = [];
client.setRequestHandler(ElicitRequestSchema, async (request) => {
  elicitations.push({ message: request.params.message, schema: request.params.requestedSchema });
  return { action: "accept", content: { confirm: true, priority: "high" } };
});

const transport = new StreamableHTTPClientTransport(new URL(url));
await client.connect(transport);
const sessionId = transport.sessionId;
const tools = await client.listTools();
const progress = [];
const counted = await client.callTool(
  { name: "slow_count", arguments: { count: 3, delay: 0.05 } },
  undefined,
  { onprogress: (update) => progress.push(update) },
);
const confirmed = await client.callTool({ name: "confirm_action", arguments: { action: "ship" } });
await transport.terminateSession();
await client.close();

console.log(JSON.stringify({
  sessionId,
  protocolVersion: transport.protocolVersion,
  server: client.getServerVersion(),
  tools: tools.tools.map((tool) => tool.name),
  progress,
  counted: counted.content[0].text,
  elicitations,
  confirmed: confirmed.content[0].text,
}));
