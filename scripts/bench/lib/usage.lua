-- wrk script: POST /v1/accounts/{id}/usage with 50 new entries per request over
-- BENCH_ACCOUNTS accounts (calls of 1-30 minutes in the last hour).
local counter = 0
local key = os.getenv("SUBSYNC_ADMIN_KEY")
local accounts = tonumber(os.getenv("BENCH_ACCOUNTS") or "10000")
local now = os.time()
local headers = { ["Content-Type"] = "application/json", ["Authorization"] = "Bearer " .. key }

function setup(thread)
  thread:set("tid", tostring(math.random(1, 1000000000)))
end

function request()
  counter = counter + 1
  local account = "usage-" .. math.random(1, accounts)
  local entries = {}
  for i = 1, 50 do
    entries[i] = string.format('{"id":"c-%s-%d-%d","meter":"minutes","units":%d,"at":"%s"}',
      tid, counter, i, math.random(1, 30), os.date("!%Y-%m-%dT%H:%M:%SZ", now - math.random(60, 3600)))
  end
  return wrk.format("POST", "/v1/accounts/" .. account .. "/usage", headers,
    '{"device":{"id":"bench"},"usage":[' .. table.concat(entries, ",") .. ']}')
end

dofile((debug.getinfo(1, "S").source:sub(2):match("^(.*/)") or "./") .. "report.lua")
