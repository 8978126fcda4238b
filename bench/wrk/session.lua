-- Whole sessions, one after another on each connection: initialize, notifications/initialized,
-- one tools/call of echo, DELETE. Run with one connection per thread (-t N -c N), so that each
-- thread's state machine follows its one connection.
--
-- done() prints "RESULT {json}" with the number of completed sessions; a failed step starts the
-- session over and counts as a failure.

local version = os.getenv("MCP_PROTOCOL_VERSION") or "2025-11-25"
local threads = {}

function setup(thread)
  table.insert(threads, thread)
end

-- Globals of each thread's environment, read back in done() with thread:get.
step = 1
session = nil
sessions = 0
failures = 0
local counter = 0

local initialize = '{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"' ..
  version .. '","capabilities":{},"clientInfo":{"name":"wrk","version":"4.1.0"}}}'
local initialized = '{"jsonrpc":"2.0","method":"notifications/initialized"}'
local call = '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo",' ..
  '"arguments":{"message":"hello"}}}'

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
  elseif step == 3 then
    return wrk.format("POST", nil, headers_for(true), call)
  end
  local h = headers_for(true)
  h["Content-Type"] = nil
  return wrk.format("DELETE", nil, h, nil)
end

local expected = {200, 202, 200, 200}

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
  elseif step == 3 and not string.find(body, '"hello"', 1, true) then
    failures = failures + 1
    step = 1
    return
  end
  if step == 4 then
    sessions = sessions + 1
    step = 1
  else
    step = step + 1
  end
end

function done(summary, latency, requests)
  local total, failed = 0, 0
  for _, thread in ipairs(threads) do
    total = total + (thread:get("sessions") or 0)
    failed = failed + (thread:get("failures") or 0)
  end
  local e = summary.errors
  io.write(string.format(
    'RESULT {"sessions":%d,"failures":%d,"requests":%d,"duration_us":%d,"p50_us":%d,' ..
    '"p99_us":%d,"errors":{"connect":%d,"read":%d,"write":%d,"status":%d,"timeout":%d}}\n',
    total, failed, summary.requests, summary.duration, latency:percentile(50),
    latency:percentile(99), e.connect, e.read, e.write, e.status, e.timeout))
end
