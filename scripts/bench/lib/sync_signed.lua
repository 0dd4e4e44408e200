-- wrk script: POST /v1/accounts/{id}/sync with the 5 signed renewals of each account's purchase
-- (from signed.tsv, written by signed_material.py), fresh report ids every request. The device
-- JSON carries only what a signed report needs.
local counter = 0
local key = os.getenv("SUBSYNC_ADMIN_KEY")
local material = os.getenv("BENCH_SIGNED_FILE")
local headers = { ["Content-Type"] = "application/json", ["Authorization"] = "Bearer " .. key }
local accounts = {}

function setup(thread)
  thread:set("tid", tostring(math.random(1, 1000000000)))
end

function init(args)
  -- Each thread its own sequence of accounts (unseeded, both threads would send the same ones).
  math.randomseed(tonumber(tid))
  for line in io.lines(material) do
    local account, list = line:match("^([^\t]+)\t(.+)$")
    local jws = {}
    for token in list:gmatch("%S+") do jws[#jws + 1] = token end
    accounts[#accounts + 1] = { account = account, jws = jws }
  end
end

function request()
  counter = counter + 1
  local entry = accounts[math.random(1, #accounts)]
  local reports = {}
  for i = 1, #entry.jws do
    reports[i] = string.format('{"report_id":"%s-%d-%d","observed_at":"2026-11-20T10:00:00Z","signed_transaction":"%s"}',
      tid, counter, i, entry.jws[i])
  end
  local body = '{"device":{"id":"bench-device","platform":"ios","app_version":"1.0"},"reports":[' .. table.concat(reports, ",") .. ']}'
  return wrk.format("POST", "/v1/accounts/" .. entry.account .. "/sync", headers, body)
end

-- The BENCH line, shared with the other sync scripts (wrk runs this file by its path).
dofile((debug.getinfo(1, "S").source:sub(2):match("^(.*/)") or "./") .. "report.lua")
