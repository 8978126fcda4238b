-- tools/call of the echo tool, as fast as the connections allow (a closed loop: each connection
-- sends its next request when the previous response has ended).
--
--   MCP_SESSIONS=id1,id2,...  sessions to spread the calls over (round robin); none: stateless
--   MCP_PROTOCOL_VERSION      the MCP-Protocol-Version header (default 2025-11-25)
--   MCP_MODERN=1              2026-07-28 requests: the _meta envelope and the Mcp-Method and
--                             Mcp-Name headers, no session (the version defaults to 2026-07-28)
--
-- Every request has its own JSON-RPC id (a session refuses an id already in flight). done()
-- prints one line "RESULT {json}" that bench/run.py reads.

local modern = os.getenv("MCP_MODERN") == "1"
local version = os.getenv("MCP_PROTOCOL_VERSION") or (modern and "2026-07-28" or "2025-11-25")
local sessions = {}
for id in string.gmatch(os.getenv("MCP_SESSIONS") or "", "[^,]+") do
  table.insert(sessions, id)
end

local threads = {}
local thread_count = 0

function setup(thread)
  thread_count = thread_count + 1
  thread:set("thread_index", thread_count)
  table.insert(threads, thread)
end

local counter = 0
local headers = {
  ["Content-Type"] = "application/json",
  ["Accept"] = "application/json, text/event-stream",
  ["MCP-Protocol-Version"] = version,
}
local meta = ""
if modern then
  headers["Mcp-Method"] = "tools/call"
  headers["Mcp-Name"] = "echo"
  meta = ',"_meta":{"io.modelcontextprotocol/protocolVersion":"' .. version .. '",' ..
    '"io.modelcontextprotocol/clientCapabilities":{},' ..
    '"io.modelcontextprotocol/clientInfo":{"name":"wrk","version":"1.0"}}'
end

function request()
  counter = counter + 1
  local id = (thread_index or 1) * 1000000000 + counter
  if #sessions > 0 then
    headers["Mcp-Session-Id"] = sessions[(id % #sessions) + 1]
  end
  local body = '{"jsonrpc":"2.0","id":' .. id ..
    ',"method":"tools/call","params":{"name":"echo","arguments":{"message":"hello"}' .. meta .. '}}'
  return wrk.format("POST", nil, headers, body)
end

function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    'RESULT {"requests":%d,"duration_us":%d,"p50_us":%d,"p99_us":%d,"errors":{"connect":%d,' ..
    '"read":%d,"write":%d,"status":%d,"timeout":%d}}\n',
    summary.requests, summary.duration, latency:percentile(50), latency:percentile(99),
    e.connect, e.read, e.write, e.status, e.timeout))
end
