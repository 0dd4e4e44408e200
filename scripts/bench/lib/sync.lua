-- wrk script: POST /v1/accounts/{id}/sync with 5 new reports per request, spread over
-- BENCH_ACCOUNTS accounts. WRK_DELAY_MS paces each connection (for a target request rate).
local counter = 0
local key = os.getenv("SUBSYNC_ADMIN_KEY")
local accounts = tonumber(os.getenv("BENCH_ACCOUNTS") or "10000")
local pause = tonumber(os.getenv("WRK_DELAY_MS") or "0")
local headers = { ["Content-Type"] = "application/json", ["Authorization"] = "Bearer " .. key }
-- BENCH_TOKENS_FILE: lines "account<TAB>device token"; each request then picks one of those
-- accounts and sends as its device (so rate limits apply), instead of the admin key.
local tokens = {}
local tokens_file = os.getenv("BENCH_TOKENS_FILE")
if tokens_file then
  for line in io.lines(tokens_file) do
    local account, token = line:match("^([^\t]+)\t(.+)$")
    tokens[#tokens + 1] = { account = account, token = token }
  end
end

function setup(thread)
  thread:set("tid", tostring(math.random(1, 1000000000)))
end

function request()
  counter = counter + 1
  local account = "bench-" .. math.random(1, accounts)
  local request_headers = headers
  if #tokens > 0 then
    local pick = tokens[math.random(1, #tokens)]
    account = pick.account
    request_headers = { ["Content-Type"] = "application/json", ["Authorization"] = "Bearer " .. pick.token }
  end
  local tx = tostring(math.random(1, 3))
  local reports = {}
  for i = 1, 5 do
    reports[i] = string.format(
      '{"report_id":"%s-%d-%d","observed_at":"2026-11-%02dT10:00:00Z","product_id":"voip.premium.monthly",' ..
      '"original_transaction_id":"%s-%s","transaction_id":"%s-%s","purchased_at":"2026-11-01T10:00:00Z",' ..
      '"expires_at":"2026-12-%02dT10:00:00Z","will_auto_renew":true}',
      tid, counter, i, math.random(1, 20), account, tx, account, tx, math.random(1, 28))
  end
  local body = '{"device":{"id":"bench-device","platform":"ios","app_version":"1.0"},"reports":[' .. table.concat(reports, ",") .. ']}'
  return wrk.format("POST", "/v1/accounts/" .. account .. "/sync", request_headers, body)
end

function delay()
  return pause
end

-- The BENCH line, shared with the other sync scripts (wrk runs this file by its path).
dofile((debug.getinfo(1, "S").source:sub(2):match("^(.*/)") or "./") .. "report.lua")
