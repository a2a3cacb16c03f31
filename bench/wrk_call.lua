-- wrk script: POST tools/call (server-everything's echo) on one initialized session.
-- Environment: MCP_SESSION_ID (required for legacy sessions), MCP_PROTOCOL_VERSION,
-- MCP_TOOL (the echo tool's name, default "echo"; "<prefix>_echo" through the bridge),
-- MCP_AUTHORIZATION (an Authorization header value, for gateways that want a token).
-- With MCP_PROTOCOL_VERSION=2026-07-28 the requests are the stateless era's: no session,
-- the routing headers and the per-request _meta envelope.
-- Every request gets a unique id; every response body is checked for the echo,
-- and done() prints "checked=N bad=M" so that the benchmark can count errors.
local session = os.getenv("MCP_SESSION_ID") or ""
local version = os.getenv("MCP_PROTOCOL_VERSION") or "2025-06-18"
local tool = os.getenv("MCP_TOOL") or "echo"
local authorization = os.getenv("MCP_AUTHORIZATION") or ""
local counter = 0
local threads = {}
local prefix = 0

function setup(thread)
  prefix = prefix + 1
  thread:set("prefix", prefix)
  table.insert(threads, thread)
end

function init(args)
  checked = 0
  bad = 0
  wrk.method = "POST"
  wrk.headers["Content-Type"] = "application/json"
  wrk.headers["Accept"] = "application/json, text/event-stream"
  wrk.headers["MCP-Protocol-Version"] = version
  if session ~= "" then
    wrk.headers["Mcp-Session-Id"] = session
  end
  if version == "2026-07-28" then
    wrk.headers["Mcp-Method"] = "tools/call"
    wrk.headers["Mcp-Name"] = tool
  end
  if authorization ~= "" then
    wrk.headers["Authorization"] = authorization
  end
end

function request()
  counter = counter + 1
  local id = prefix * 100000000 + counter
  local meta = ""
  if version == "2026-07-28" then
    meta = ',"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",'
      .. '"io.modelcontextprotocol/clientInfo":{"name":"wrk","version":"1"},'
      .. '"io.modelcontextprotocol/clientCapabilities":{}}'
  end
  local body = string.format(
    '{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"%s","arguments":{"message":"wrk-%d"}%s}}',
    id, tool, id, meta)
  return wrk.format(nil, nil, nil, body)
end

function response(status, headers, body)
  checked = checked + 1
  -- the answer must be the echo of this very request: its id and its message agree
  local id = string.match(body, '"id":(%d+)')
  local echoed = string.match(body, "Echo: wrk%-(%d+)")
  if status ~= 200 or echoed == nil or id ~= echoed then
    bad = bad + 1
  end
end

function done(summary, latency, requests)
  local total_checked, total_bad = 0, 0
  for _, thread in ipairs(threads) do
    total_checked = total_checked + thread:get("checked")
    total_bad = total_bad + thread:get("bad")
  end
  io.write(string.format("checked=%d bad=%d\n", total_checked, total_bad))
  io.write(string.format("p50_us=%d p99_us=%d\n", latency:percentile(50), latency:percentile(99)))
end
