// The official TypeScript SDK 1.32.2 server over stdio, a handshake-era-only server for the
// interop tests of our client: node ts_server.mjs
//
// An echo tool, a count tool that reports progress, a confirm tool that asks the client live
// (elicitation/create), a resource and a prompt.
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { z } from "zod";

const server = new McpServer({ name: "ts-server", version: "1.32.2" });

server.registerTool("echo", { description: "Echo a message back.", inputSchema: { message: z.string() } },
  async ({ message }) => ({ content: [{ type: "text", text: message }] }));

server.registerTool("count", { description: "Count to `to`, reporting progress.", inputSchema: { to: z.number() } },
  async ({ to }, extra) => {
    const token = extra._meta?.progressToken;
    for (let step = 1; step <= to; step++) {
      if (token !== undefined) {
        await extra.sendNotification({ method: "notifications/progress",
                                       params: { progressToken: token, progress: step, total: to } });
      }
    }
    return { content: [{ type: "text", text: `counted to ${to}` }] };
  });

server.registerTool("confirm", { description: "Ask the user to confirm an action.", inputSchema: { action: z.string() } },
  async ({ action }) => {
    const answer = await server.server.elicitInput({
      message: `Confirm ${action}?`,
      requestedSchema: { type: "object", properties: { confirm: { type: "boolean" } }, required: ["confirm"] },
    });
    const confirmed = answer.action === "accept" && answer.content?.confirm === true;
    return { content: [{ type: "text", text: `${confirmed ? "done" : "not done"}: ${action}` }] };
  });

server.registerResource("readme", "ts://readme", { mimeType: "text/plain" },
  async (uri) => ({ contents: [{ uri: uri.href, mimeType: "text/plain", text: "The TypeScript SDK server." }] }));

server.registerPrompt("greet", { description: "Greet someone.", argsSchema: { name: z.string() } },
  ({ name }) => ({ messages: [{ role: "user", content: { type: "text", text: `Greet ${name}.` } }] }));

await server.connect(new StdioServerTransport());
