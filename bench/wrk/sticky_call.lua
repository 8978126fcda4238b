-- Stateful tools/call of echo where each connection holds its own session: a connection sends
-- initialize and notifications/initialized once, then calls echo in a closed loop on its session.
-- Run with one connection per thread (-t N -c N), so that each thread's state follows its one
-- connection. A session made and used on one keep-alive connection stays with the process that
-- accepted the connection: the stickiness of a server whose workers share one listening socket.
--
-- done() prints "RESULT {json}" with the calls that answered "hello" ("calls") and the failed
-- steps ("failures"); a failure starts the session over.

local version = os.getenv("MCP_PROTOCOL_VERSION") or "2025-11-25"
local threads = {}

function setup(thread)
  table.insert(threads, thread)
end

step = 1
session = nil
calls = 0
failures = 0
local counter = 0

local initialize = '{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"' ..
  version .. '","capabilities":{},"clientInfo":{"name":"wrk","version":"4.1.0"}}}'
local initialized = '{"jsonrpc":"2.0","method":"notifications/initialized"}'

local function headers_for(with_session)
  local h = {
    ["Content-Type"] = "application/json",
    ["Accept"] = "application/json, text/event-stream",
  }
  if with_session then
    h["Mcp-Session-Id"] = session
    h["MCP-Protocol-Version"] = version
  end
  return h
end

function request()
  if step == 1 then
    return wrk.format("POST", nil, headers_for(false), initialize)
  elseif step == 2 then
    return wrk.format("POST", nil, headers_for(true), initialized)
  end
  counter = counter + 1
  local body = '{"jsonrpc":"2.0","id":' .. counter ..
    ',"method":"tools/call","params":{"name":"echo","arguments":{"message":"hello"}}}'
  return wrk.format("POST", nil, headers_for(true), body)
end

local expected = {200, 202, 200}

function response(status, headers, body)
  if status ~= expected[step] then
    failures = failures + 1
    step = 1
    return
  end
  if step == 1 then
    session = nil
    for name, value in pairs(headers) do
      if string.lower(name) == "mcp-session-id" then session = value end
    end
    if session == nil then
      failures = failures + 1
      return
    end
    step = 2
  elseif step == 2 then
    step = 3
  elseif string.find(body, '"hello"', 1, true) then
    calls = calls + 1
  else
    failures = failures + 1
    step = 1
  end
end

function done(summary, latency, requests)
  local total, failed = 0, 0
  for _, thread in ipairs(threads) do
    total = total + (thread:get("calls") or 0)
    failed = failed + (thread:get("failures") or 0)
  end
  local e = summary.errors
  io.write(string.format(
    'RESULT {"calls":%d,"failures":%d,"requests":%d,"duration_us":%d,"p50_us":%d,' ..
    '"p99_us":%d,"errors":{"connect":%d,"read":%d,"write":%d,"status":%d,"timeout":%d}}\n',
    total, failed, summary.requests, summary.duration, latency:percentile(50),
    latency:percentile(99), e.connect, e.read, e.write, e.status, e.timeout))
end
