-- wrk script: POST /v1/notifications/apple with a forged notification (the real chain in x5c,
-- a random signature), which serve must refuse with 422 after one signature check.
wrk.method = "POST"
wrk.path = "/v1/notifications/apple"
wrk.headers["Content-Type"] = "application/json"
local file = assert(io.open(os.getenv("BENCH_FORGED_FILE"), "r"))
wrk.body = file:read("*a")
file:close()
dofile("scripts/bench/lib/report.lua")
