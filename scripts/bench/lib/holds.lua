-- wrk script: hold cycles (reserve 1 unit, then settle it with 1 unit used) against
-- POST /v1/accounts/{id}/usage/holds and .../settle. Run with one connection per thread
-- (-t N -c N): each thread alternates reserve and settle on its own connection.
-- BENCH_HOLD_ACCOUNTS: accounts the cycles spread over (1: every cycle on the same account).
local key = os.getenv("SUBSYNC_ADMIN_KEY")
local accounts = tonumber(os.getenv("BENCH_HOLD_ACCOUNTS") or "1")
local headers = { ["Content-Type"] = "application/json", ["Authorization"] = "Bearer " .. key }
local hold = nil
local account = nil

function setup(thread)
  thread:set("tid", tostring(math.random(1, 1000000000)))
end

function request()
  if hold then
    return wrk.format("POST", "/v1/accounts/" .. account .. "/usage/holds/" .. hold .. "/settle", headers, '{"units":1}')
  end
  account = "hold-" .. math.random(1, accounts)
  return wrk.format("POST", "/v1/accounts/" .. account .. "/usage/holds", headers,
    '{"device":{"id":"bench"},"meter":"minutes","units":1,"ttl_seconds":60}')
end

function response(status, headers, body)
  if hold then
    hold = nil
  elseif status == 201 then
    hold = body:match('"id":"([0-9a-fA-F-]+)"')
  end
end

dofile((debug.getinfo(1, "S").source:sub(2):match("^(.*/)") or "./") .. "report.lua")
