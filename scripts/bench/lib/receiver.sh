# shellcheck shell=bash
# Sourced by scripts/bench/webhooks and scripts/bench/http: the webhook receiver both measure
# against, the body every request carries, and the wrk baseline.
#
# start_receiver WORK: nginx on loopback (one worker, keep-alive, 200 "ok" for every POST),
# configured and logging in WORK; sets nginx_port and nginx_pid (the caller's EXIT trap kills it).
# write_delivery_body FILE: a delivery's body with a realistic event payload (~1.5 KB): what
# payload_json holds afterwards is the event's data, for fixtures that store events.
# measure_wrk WORK SECONDS: wrk POSTing that body (2 threads, 16 connections); sets baseline_rps
# and baseline_ns (the whole machine's CPU a request, nanoseconds).
# busy_jiffies: the machine's busy time so far (user, nice, system in /proc/stat), in clock ticks;
# cpu_ns_per BUSY_BEFORE BUSY_AFTER COUNT: nanoseconds of the machine's CPU per item between them.
start_receiver() {
  local work=$1
  for tool in wrk nginx; do
    command -v "$tool" >/dev/null || { apt-get update -qq && apt-get install -y -qq "$tool" >/dev/null; }
  done
  nginx_port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  cat > "$work/nginx.conf" <<CONF
worker_processes 1;
daemon off;
pid $work/nginx.pid;
error_log $work/error.log;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path $work;
  keepalive_requests 1000000;
  server {
    listen 127.0.0.1:$nginx_port;
    location / { client_max_body_size 1m; return 200 "ok"; }
  }
}
CONF
  nginx -c "$work/nginx.conf" &
  nginx_pid=$!
  sleep 0.5
}

write_delivery_body() {
  payload_json=$(python3 -c '
import json
ent = {"id": "premium", "tier": "premium", "status": "active", "is_active": True, "product_id": "voip.premium.monthly",
       "product_kind": "auto_renewable", "source_transaction_id": "2000000123456789", "original_transaction_id": "2000000123456789",
       "purchased_at": "2026-11-01T10:00:00Z", "expires_at": "2026-12-01T10:00:00Z", "period_ends_at": "2026-12-01T10:00:00Z",
       "grace_period_expires_at": None, "will_renew": True, "revoked_at": None, "revocation_reason": None}
state = {"tier": "premium", "features": ["basic_calling", "call_recording", "custom_ringtones", "group_calls", "international_calling",
         "unlimited_domestic", "video_calling"], "limits": {"monthly_minutes": None, "max_devices": 5}, "ads": False,
         "entitlements": [ent], "next_transition_at": "2026-12-01T10:00:00Z"}
print(json.dumps({"previous": None, "current": ent, "state": state}))')
  printf '%s' "{\"type\":\"entitlement.activated\",\"timestamp\":\"2026-11-21T10:00:00Z\",\"data\":$payload_json}" > "$1"
}

measure_wrk() {
  local work=$1 seconds=$2 baseline
  cat > "$work/post.lua" <<LUA
wrk.method = "POST"
wrk.body = io.open("$work/body.json"):read("*a")
wrk.headers["Content-Type"] = "application/json"
function done(summary, latency, requests)
  io.write(string.format("BASELINE rps=%.0f p99_ms=%.2f requests=%d\n", summary.requests / (summary.duration / 1e6), latency:percentile(99) / 1000, summary.requests))
end
LUA
  echo "== baseline: wrk POSTing the same body to the same receiver (2 threads, 16 connections, ${seconds}s)"
  local before after
  before=$(busy_jiffies)
  baseline=$(wrk -t2 -c16 -d"${seconds}s" -s "$work/post.lua" "http://127.0.0.1:$nginx_port/hook" | grep '^BASELINE')
  after=$(busy_jiffies)
  baseline_rps=$(echo "$baseline" | sed 's/.*rps=\([0-9]*\).*/\1/')
  baseline_ns=$(cpu_ns_per "$before" "$after" "$(echo "$baseline" | sed 's/.*requests=\([0-9]*\).*/\1/')")
  echo "$baseline cpu_ns_per_request=$baseline_ns"
}

busy_jiffies() { awk 'NR == 1 {print $2 + $3 + $4}' /proc/stat; }

cpu_ns_per() { echo $(( ($2 - $1) * 1000000000 / $(getconf CLK_TCK) / ($3 > 0 ? $3 : 1) )); }
