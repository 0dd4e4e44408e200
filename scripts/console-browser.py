#!/usr/bin/env python3
"""The operator console in headless Chromium (run by scripts/console-test, which installs the
browser and selenium, builds, and exports DATABASE_URL of a throwaway PostgreSQL).

Starts `subsync serve` with an admin key, a webhook receiver on loopback
(Tests/Doubles/webhook-receiver.py) subscribed to every event, makes an account through
POST /v1/accounts/{id}/sync, lets its first deliveries die (the receiver answers 500 and the
retry schedule is one second long), and then, in the browser:

  1. no page works without the key: every page shows the sign-in form and nothing else, and the
     admin API answers 401 to the page's own fetch without it;
  2. a wrong key shows a clear message;
  3. signs in, finds the account by its original transaction id, sees its entitlements (with the
     renewal details: a pending crossgrade, a price increase) and its timeline (reports,
     resolutions, events, deliveries);
  4. revokes the transaction from the page (confirmation, reason) and sees the audit record, the
     `entitlement.revoked` event and the free tier;
  5. the health page shows the numbers and the last hour's chart;
  6. the endpoints page lists the dead deliveries; one is retried from the page and reaches the
     receiver (answered 200, signature verified); the secret is rotated and shown once;
  7. the App Store's answer (docs/STORE.md): against a real App Store Server API double
     (Tests/Doubles/appstore-double.py, which verifies the service's tokens with PyJWT), an account
     whose renewal nobody reported is checked from the page (one difference) and repaired (one
     store report, resolved: premium again);
  8. a named admin key (SUBSYNC_ADMIN_KEYS): the page says whose key it is and the audit log
     records its name beside the typed one; signing out leaves nothing usable behind.

Waits are conditions with generous deadlines (WebDriverWait), never fixed sleeps. The browser's
console must show no Content-Security-Policy violation. Screenshots go to --artifacts.
"""
import argparse
import inspect
import datetime
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import importlib.util
import urllib.error
import urllib.request

from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException, TimeoutException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as EC
from selenium.webdriver.support.ui import WebDriverWait

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUNDLE = "com.example.console"
STORE_KEY = os.path.normpath(os.path.join(ROOT, "Tests/Fixtures/apple-app-store-server-library/certs/testSigningKey.p8"))
ADMIN_KEY = "console-admin-key-0123456789abcdef"
# A named admin key (SUBSYNC_ADMIN_KEYS): the audit log and the console name its holder.
NAMED_KEY = ("olivia", "console-olivia-key-0123456789abcdef")
# What the audit log records for the shared key, used through step 7, beside named keys: the
# typed name as a note of `admin`, so that it never passes for a named key's record.
RECORDED = "admin (Olivia Operator)"
TOKEN_SECRET = "console-token-secret-0123456789abcdef-012345"
ACCOUNT = "console-alice"
TRANSACTION = "2000000000000042"
WAIT = 120  # seconds: generous, for a busy single core


def say(message):
    print(f"console-test: {message}", flush=True)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http(method, url, body=None, key=ADMIN_KEY):
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method)
    if key:
        request.add_header("Authorization", f"Bearer {key}")
    if data is not None:
        request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            raw = response.read()
            return response.status, (json.loads(raw) if raw and raw[:1] in (b"{", b"[") else raw)
    except urllib.error.HTTPError as error:
        raw = error.read()
        try:
            return error.code, json.loads(raw)
        except ValueError:
            return error.code, raw


def wait_for(what, condition, seconds=WAIT, interval=0.2):
    """Polls `condition` until it returns something truthy; fails with `what` after `seconds`."""
    deadline = time.monotonic() + seconds
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {seconds} s waiting for {what}")
        time.sleep(interval)


def click(driver, by, selector, attempts=20):
    """Finds an element and clicks it. The console re-renders a page when an action's answer (or
    a reload) arrives, so an element found a moment ago may be gone: it is found again."""
    for attempt in range(attempts):
        try:
            driver.find_element(by, selector).click()
            return
        except StaleElementReferenceException:
            if attempt == attempts - 1:
                raise
            time.sleep(0.1)


def check(condition, message):
    if not condition:
        raise AssertionError(message)


class Processes:
    def __init__(self):
        self.items = []

    def start(self, name, args, env=None, log=None):
        out = open(log, "w") if log else subprocess.DEVNULL
        process = subprocess.Popen(args, env=env, stdout=subprocess.PIPE if log is None else out,
                                   stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, text=True)
        self.items.append((name, process))
        return process

    def stop(self):
        for name, process in reversed(self.items):
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
                try:
                    process.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    process.kill()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin", default=os.path.join(ROOT, ".build/debug/subsync"))
    parser.add_argument("--artifacts", default=os.path.join(ROOT, ".build/console-artifacts"))
    parser.add_argument("--update-screenshot", action="store_true", help="copy the account page to docs/console-account.png")
    options = parser.parse_args()
    database_url = os.environ.get("DATABASE_URL")
    check(database_url, "DATABASE_URL is not set (run scripts/console-test)")
    os.makedirs(options.artifacts, exist_ok=True)
    workdir = tempfile.mkdtemp(prefix="subsync-console-")
    processes = Processes()
    session = {}
    try:
        run(options, database_url, workdir, processes, session)
    except BaseException:
        driver = session.get("driver")
        if driver is not None:
            try:
                driver.save_screenshot(os.path.join(options.artifacts, "failure.png"))
            except Exception:
                pass
        log = os.path.join(workdir, "serve.log")
        if os.path.exists(log):
            with open(log) as f:
                tail = f.read()[-4000:]
            print("--- serve.log (end) ---\n" + tail, file=sys.stderr)
        raise
    finally:
        if session.get("driver") is not None:
            session["driver"].quit()
        processes.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    say("passed; screenshots in " + os.path.relpath(options.artifacts, ROOT))


def signing_chain(workdir):
    """A root -> intermediate -> leaf chain shaped like Apple's (scripts/bench/lib/signed_material.py),
    the root written as PEM for the service to trust; returns sign(payload) -> compact JWS."""
    spec = importlib.util.spec_from_file_location("signed_material", os.path.join(ROOT, "scripts/bench/lib/signed_material.py"))
    material = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(material)
    return material.signing_chain(workdir, "console")


def run(options, database_url, workdir, processes, session):
    sign = signing_chain(workdir)
    double = processes.start("appstore", [sys.executable, os.path.join(ROOT, "Tests/Doubles/appstore-double.py"), "--key-file", STORE_KEY,
                                          "--key-id", "CONSOLEKEY1", "--issuer", "console-issuer", "--bundle", BUNDLE])
    line = double.stdout.readline().strip()
    check(line.startswith("PORT "), f"the App Store double did not start: {line!r}")
    store = f"http://127.0.0.1:{int(line.split()[1])}"
    # Nothing in the notification history (the backfill asks at start).
    http("POST", store + "/__double/script", {"method": "POST", "path": "/inApps/v1/notifications/history",
                                             "answers": [{"json": {"hasMore": False, "notificationHistory": []}}]}, key=None)
    env = {k: v for k, v in os.environ.items() if not k.startswith("SUBSYNC_")}
    env.update({
        "DATABASE_URL": database_url, "SUBSYNC_HOST": "127.0.0.1", "SUBSYNC_ADMIN_KEY": ADMIN_KEY,
        "SUBSYNC_ADMIN_KEYS": f"{NAMED_KEY[0]}={NAMED_KEY[1]}",
        "SUBSYNC_TOKEN_SECRET": TOKEN_SECRET, "SUBSYNC_WORKERS": "1", "SUBSYNC_DELIVERY_WORKERS": "1",
        "SUBSYNC_WEBHOOK_ALLOW": "127.0.0.0/8", "SUBSYNC_WEBHOOK_RETRY_SCHEDULE": "1",
        "SUBSYNC_WEBHOOK_TIMEOUT_MS": "5000", "SUBSYNC_REQUIRE_SIGNED": "false", "SUBSYNC_LOG_LEVEL": "notice",
        "SUBSYNC_RATE_LIMIT_ACCOUNT": "off", "SUBSYNC_RATE_LIMIT_DEVICE": "off",
        # StoreKit verification and the App Store Server API (the double), for step 7.
        "SUBSYNC_APPLE_ROOT_CERTIFICATES": os.path.join(workdir, "root.pem"), "SUBSYNC_BUNDLE_ID": BUNDLE,
        "SUBSYNC_APPSTORE_KEY_FILE": STORE_KEY, "SUBSYNC_APPSTORE_KEY_ID": "CONSOLEKEY1", "SUBSYNC_APPSTORE_ISSUER_ID": "console-issuer",
        "SUBSYNC_APPSTORE_BASE_URL": store,
    })
    migrate = subprocess.run([options.bin, "migrate"], capture_output=True, text=True, env=env, timeout=300)
    check(migrate.returncode == 0, f"subsync migrate failed: {migrate.stderr}")

    receiver = processes.start("receiver", [sys.executable, os.path.join(ROOT, "Tests/Doubles/webhook-receiver.py"), "--port", "0", "--quiet"])
    line = receiver.stdout.readline().strip()
    check(line.startswith("PORT "), f"the receiver did not start: {line!r}")
    hooks = f"http://127.0.0.1:{int(line.split()[1])}"

    port = free_port()
    env["SUBSYNC_PORT"] = str(port)
    base = f"http://127.0.0.1:{port}"
    processes.start("serve", [options.bin, "serve"], env=env, log=os.path.join(workdir, "serve.log"))
    wait_for("serve to be ready", lambda: http("GET", base + "/readyz", key=None)[0] == 200 if port_open(port) else False)
    say(f"serve on :{port}, receiver at {hooks}")

    # An endpoint for the receiver (secret shown once: handed to the receiver to verify), which
    # fails for now, so the first deliveries die after their two attempts.
    status, endpoint = http("POST", base + "/v1/webhook-endpoints", {"url": hooks + "/ok", "description": "console test receiver"})
    check(status == 201, f"create endpoint: {status} {endpoint}")
    http("POST", hooks + "/_secrets", {"secrets": [endpoint["secret"]]}, key=None)
    http("POST", hooks + "/_mode", {"mode": "500"}, key=None)

    now = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0)
    stamp = lambda t: t.isoformat().replace("+00:00", "Z")
    status, synced = http("POST", f"{base}/v1/accounts/{ACCOUNT}/sync?wait_ms=5000", {
        "device": {"id": "iphone-of-alice", "platform": "ios", "app_version": "4.2"},
        "reports": [{"report_id": "console-r1", "observed_at": stamp(now), "product_id": "voip.premium.monthly",
                     "original_transaction_id": TRANSACTION, "transaction_id": TRANSACTION,
                     "purchased_at": stamp(now - datetime.timedelta(days=1)),
                     "expires_at": stamp(now + datetime.timedelta(days=29)), "will_auto_renew": True,
                     # Unsigned renewal details (development mode): a crossgrade to yearly is
                     # pending, a price increase awaits consent.
                     "renewal_product_id": "voip.premium.yearly", "price_increase_status": "pending",
                     "renewal_date": stamp(now + datetime.timedelta(days=29))}]})
    check(status == 202, f"sync: {status} {synced}")
    dead = wait_for("the first deliveries to die", lambda: not pending_deliveries(base) and dead_deliveries(base))
    say(f"{len(dead)} dead deliveries")
    http("POST", hooks + "/_mode", {"mode": "ok"}, key=None)

    driver = session["driver"] = browser()
    wait = Wait(driver)
    shot = lambda name: driver.save_screenshot(os.path.join(options.artifacts, name))

    # 1. Without the key, every page is the sign-in form, and the API refuses the page.
    for page in ["#/account/" + ACCOUNT, "#/health", "#/endpoints", ""]:
        driver.get(base + "/console" + page)
        wait.until(EC.visibility_of_element_located((By.ID, "login-view")))
        check(not driver.find_element(By.ID, "nav").is_displayed(), f"navigation visible without a key on {page}")
        for view in ["account-view", "health-view", "endpoints-view"]:
            check(not driver.find_element(By.ID, view).is_displayed(), f"{view} visible without a key on {page}")
        check(ACCOUNT not in driver.find_element(By.TAG_NAME, "body").text, "account data shown without a key")
    answer = driver.execute_async_script(
        "const done = arguments[arguments.length - 1];"
        "fetch('/v1/admin/accounts/' + arguments[0]).then(r => done(r.status)).catch(e => done(String(e)));", ACCOUNT)
    check(answer == 401, f"the admin API answered {answer} to the page without a key")
    shot("01-sign-in.png")

    # 2. A wrong key says so, and stores nothing.
    sign_in(driver, "wrong-key-0000000000000000", "Olivia Operator")
    error = wait.until(EC.visibility_of_element_located((By.ID, "login-error")))
    check("Wrong admin key" in error.text, f"unclear wrong-key message: {error.text!r}")
    check(driver.execute_script("return sessionStorage.length") == 0, "something was stored for a wrong key")
    shot("02-wrong-key.png")

    # 3. Sign in; find the account by its purchase; state and timeline.
    sign_in(driver, ADMIN_KEY, "Olivia Operator")
    wait.until(EC.visibility_of_element_located((By.ID, "account-view")))
    wait.until(EC.text_to_be_present_in_element((By.ID, "signed-in-as"), "signed in as " + RECORDED))
    check(ADMIN_KEY not in driver.current_url, "the key is in the URL")
    check(driver.get_cookies() == [], "the console set a cookie")
    search = driver.find_element(By.ID, "account-search-input")
    search.send_keys(TRANSACTION)
    click(driver, By.ID, "account-search-submit")
    wait.until(EC.text_to_be_present_in_element((By.ID, "account-tier"), "premium"))
    check("/console#/account/" + ACCOUNT in driver.current_url, f"search did not open the account: {driver.current_url}")
    entitlements = driver.find_element(By.ID, "entitlements").text
    check("premium" in entitlements and "active" in entitlements, f"entitlements: {entitlements!r}")
    renews = driver.find_element(By.CSS_SELECTOR, '#entitlements tr[data-entitlement="premium"] td[data-field="renews"]').text
    check(renews.startswith("yes") and "to voip.premium.yearly" in renews, f"renews: {renews!r}")
    store_says = driver.find_element(By.CSS_SELECTOR, '#entitlements tr[data-entitlement="premium"] td[data-field="store-says"]').text
    check(store_says == "price increase pending", f"store says: {store_says!r}")
    timeline = driver.find_element(By.ID, "timeline")
    kinds = {row.get_attribute("data-kind") for row in timeline.find_elements(By.CSS_SELECTOR, "tbody tr")}
    check({"report", "resolution", "event", "delivery"} <= kinds, f"timeline kinds: {kinds}")
    check("entitlement.activated" in timeline.text, "no activation event in the timeline")
    check("iphone-of-alice" in timeline.text, "the report's device is not in the timeline")
    full_height(driver)
    shot("03-account.png")
    if options.update_screenshot:
        shutil.copyfile(os.path.join(options.artifacts, "03-account.png"), os.path.join(ROOT, "docs/console-account.png"))
    driver.set_window_size(1400, 1000)

    # 4. Revoke from the page: confirmation with a reason, then the audit record and the event.
    click(driver, By.CSS_SELECTOR, f".revoke-button[data-transaction='{TRANSACTION}']")
    wait.until(EC.visibility_of_element_located((By.ID, "confirm-dialog")))
    click(driver, By.ID, "confirm-ok")  # without a reason: refused by the page
    wait.until(EC.visibility_of_element_located((By.ID, "confirm-error")))
    driver.find_element(By.ID, "confirm-reason").send_keys("chargeback #881 (console test)")
    click(driver, By.ID, "confirm-ok")
    record = wait.until(EC.visibility_of_element_located((By.ID, "audit-record")))
    check("Recorded revoke" in record.text and "Olivia Operator" in record.text and "chargeback #881" in record.text,
          f"audit record: {record.text!r}")
    wait.until(EC.text_to_be_present_in_element((By.ID, "timeline"), "entitlement.revoked"))
    wait.until(EC.text_to_be_present_in_element((By.ID, "account-tier"), "free"))
    check("admin revoke" in driver.find_element(By.ID, "timeline").text, "the admin report is not in the timeline")
    full_height(driver)
    shot("04-account-revoked.png")
    driver.set_window_size(1400, 1000)

    # 5. Health: numbers and the last hour's chart (two samples make a line: ~10 s).
    click(driver, By.ID, "nav-health")
    wait.until(EC.visibility_of_element_located((By.ID, "health-inbox-depth")))
    wait.until(EC.presence_of_element_located((By.CSS_SELECTOR, "#health-chart svg polyline")))
    # (The page redraws itself every 10 s: read it through waits, which survive a redraw.)
    wait.until(EC.text_to_be_present_in_element((By.ID, "health-endpoints-table"), "/ok"))
    wait.until(EC.text_to_be_present_in_element((By.ID, "health-deliveries-table"), "dead"))
    shot("05-health.png")

    # 6. Endpoints: retry one dead delivery from the page; it reaches the receiver.
    click(driver, By.ID, "nav-endpoints")
    rows = wait.until(EC.presence_of_all_elements_located((By.CSS_SELECTOR, "#dead-deliveries-table tbody tr")))
    check(len(rows) == len(dead_deliveries(base)), "the page does not list every dead delivery")
    target = dead[-1]
    shot("06-endpoints.png")
    click(driver, By.CSS_SELECTOR, f"#dead-deliveries-table .retry-delivery[data-delivery='{target['delivery_id']}']")
    wait.until(EC.visibility_of_element_located((By.ID, "confirm-dialog")))
    click(driver, By.ID, "confirm-ok")
    record = wait.until(EC.visibility_of_element_located((By.ID, "endpoints-record")))
    check("Delivery retried" in record.text and "Olivia Operator" in record.text, f"retry record: {record.text!r}")
    delivered = wait_for("the retried delivery at the receiver", lambda: [
        entry for entry in receiver_log(hooks)
        if str(entry.get("id", "")).lower() == target["event_id"].lower() and entry.get("status") == 200])
    check(delivered[0].get("verified_by"), "the receiver could not verify the retried delivery's signature")
    wait_for("the retried delivery to be recorded as succeeded",
             lambda: delivery_status(base, target["delivery_id"]) == "succeeded")
    loads = driver.find_element(By.ID, "endpoints-view").get_attribute("data-loads")
    click(driver, By.ID, "endpoints-refresh")
    wait.until(lambda d: d.find_element(By.ID, "endpoints-view").get_attribute("data-loads") != loads)
    wait.until(lambda d: not d.find_elements(By.CSS_SELECTOR, f"#dead-deliveries-table tr[data-delivery='{target['delivery_id']}']"))

    # ... and the secret, rotated, is shown once.
    click(driver, By.CSS_SELECTOR, "#endpoints-list .rotate-secret")
    wait.until(EC.visibility_of_element_located((By.ID, "confirm-dialog")))
    click(driver, By.ID, "confirm-ok")
    secret = wait.until(EC.visibility_of_element_located((By.ID, "rotated-secret")))
    check(secret.text.startswith("whsec_"), f"rotated secret: {secret.text!r}")
    shot("07-endpoints-rotated.png")

    # ... every other dead delivery retried at once, and they reach the receiver too.
    remaining = dead_deliveries(base) or []
    check(len(remaining) == len(dead) - 1, f"dead deliveries left: {remaining}")
    wait.until(lambda d: d.find_element(By.ID, "retry-dead").is_enabled())
    click(driver, By.ID, "retry-dead")
    wait.until(EC.visibility_of_element_located((By.ID, "confirm-dialog")))
    click(driver, By.ID, "confirm-ok")
    wait.until(EC.text_to_be_present_in_element((By.ID, "endpoints-record"), f"Retried {len(remaining)} dead deliveries"))
    for delivery in remaining:
        wait_for(f"delivery {delivery['delivery_id']} at the receiver", lambda: [
            entry for entry in receiver_log(hooks)
            if str(entry.get("id", "")).lower() == delivery["event_id"].lower() and entry.get("status") == 200])
    wait.until(EC.visibility_of_element_located((By.ID, "no-dead")))

    # ... an endpoint disabled and enabled again.
    click(driver, By.CSS_SELECTOR, "#endpoints-list .disable-endpoint")
    wait.until(EC.visibility_of_element_located((By.ID, "confirm-dialog")))
    click(driver, By.ID, "confirm-ok")
    wait.until(EC.presence_of_element_located((By.CSS_SELECTOR, "#endpoints-list .enable-endpoint")))
    check(http("GET", base + "/v1/webhook-endpoints")[1]["data"][0]["enabled"] is False, "the endpoint is still enabled")
    click(driver, By.CSS_SELECTOR, "#endpoints-list .enable-endpoint")
    wait.until(EC.visibility_of_element_located((By.ID, "confirm-dialog")))
    click(driver, By.ID, "confirm-ok")
    wait.until(EC.presence_of_element_located((By.CSS_SELECTOR, "#endpoints-list .disable-endpoint")))
    check(http("GET", base + "/v1/webhook-endpoints")[1]["data"][0]["enabled"] is True, "the endpoint is still disabled")
    # ... each of those changes recorded with the console's operator.
    endpoint_id = http("GET", base + "/v1/webhook-endpoints")[1]["data"][0]["id"]
    changes = [(a["action"], a["actor"]) for a in http("GET", base + "/v1/webhook-endpoints/" + endpoint_id)[1].get("audit", [])]
    check(changes[-3:] == [("endpoint_rotate_secret", RECORDED), ("endpoint_disable", RECORDED),
                           ("endpoint_enable", RECORDED)], f"the endpoint's audit: {changes}")

    # ... and back on the account, a reconcile dry run finds nothing to repair.
    driver.get(base + "/console#/account/" + ACCOUNT)
    wait.until(EC.text_to_be_present_in_element((By.ID, "account-tier"), "free"))
    click(driver, By.ID, "reconcile-dry-run")
    wait.until(EC.text_to_be_present_in_element((By.ID, "audit-record"), "Reconcile (dry run): 0 differences"))
    # The dry run and the single retry are in the audit log (sql/0015), and the account page
    # shows them in its timeline.
    wait.until(EC.text_to_be_present_in_element((By.ID, "timeline"), "operator reconcile dry run"))

    def audit_log(account):
        return [entry["action"] for entry in http("GET", base + "/v1/admin/accounts/" + account)[1]["timeline"]
                if entry["kind"] == "action"]
    check([(a["action"], a["actor"]) for a in audit_log(ACCOUNT) if a["action"] == "reconcile_dry_run"]
          == [("reconcile_dry_run", RECORDED)], f"audit log of {ACCOUNT}: {audit_log(ACCOUNT)}")
    retries = [a for a in audit_log(target["account_id"]) if a["action"] == "delivery_retry"]
    check(len(retries) == 1 and retries[0]["actor"] == RECORDED
          and retries[0]["target"] == f"delivery {target['delivery_id']}", f"audit log of the retry: {retries}")
    if target["account_id"] == ACCOUNT:
        wait.until(EC.text_to_be_present_in_element((By.ID, "timeline"), "operator delivery retry"))

    # 7. The App Store's answer: a renewal nobody reported, checked and repaired from the page.
    bob, original = "console-bob", "3000000000000007"
    now_ms = int(now.timestamp() * 1000)
    day = 86_400_000

    def transaction(transaction_id, purchased, expires):
        return sign({"transactionId": transaction_id, "originalTransactionId": original, "bundleId": BUNDLE,
                     "productId": "voip.premium.monthly", "purchaseDate": purchased, "originalPurchaseDate": now_ms - 40 * day,
                     "expiresDate": expires, "type": "Auto-Renewable Subscription", "environment": "Production",
                     "signedDate": purchased, "inAppOwnershipType": "PURCHASED"})
    first = transaction(original, now_ms - 40 * day, now_ms - 10 * day)
    renewal = transaction("3000000000000008", now_ms - 10 * day, now_ms + 20 * day)
    status, synced = http("POST", f"{base}/v1/accounts/{bob}/sync?wait_ms=5000", {
        "device": {"id": "ipad-of-bob", "platform": "ios"},
        "reports": [{"report_id": "console-b1", "observed_at": stamp(now), "product_id": "voip.premium.monthly",
                     "original_transaction_id": original, "transaction_id": original,
                     "purchased_at": stamp(now - datetime.timedelta(days=40)), "signed_transaction": first}]})
    check(status == 202, f"bob's sync: {status} {synced}")
    http("POST", store + "/__double/script", {"method": "GET", "path": f"/inApps/v2/history/{original}",
                                             "answers": [{"json": {"hasMore": False, "signedTransactions": [first, renewal]}}]}, key=None)
    driver.get(base + "/console#/account/" + bob)
    wait.until(EC.text_to_be_present_in_element((By.ID, "account-tier"), "free"))
    click(driver, By.ID, "reconcile-store-dry-run")
    wait.until(EC.text_to_be_present_in_element((By.ID, "audit-record"), "App Store check: 1 differences"))
    check("3000000000000008" in driver.find_element(By.ID, "audit-record").text, "the check does not name the missing renewal")
    shot("08-app-store-check.png")
    click(driver, By.ID, "reconcile-store-repair")
    wait.until(EC.visibility_of_element_located((By.ID, "confirm-dialog")))
    click(driver, By.ID, "confirm-ok")
    wait.until(EC.text_to_be_present_in_element((By.ID, "audit-record"), "App Store repair: 1 store reports submitted"))
    click(driver, By.ID, "account-reload")
    wait_for("the store report to be resolved", lambda: http("GET", f"{base}/v1/accounts/{bob}")[1].get("tier") == "premium")
    click(driver, By.ID, "account-reload")
    wait.until(EC.text_to_be_present_in_element((By.ID, "account-tier"), "premium"))
    asked = http("GET", store + "/__double/requests", key=None)[1]
    check(asked and all(request["jwt"]["valid"] for request in asked), f"the double refused a token: {asked}")
    check([a["actor"] for a in audit_log(bob) if a["action"].startswith("reconcile_store")] == [RECORDED] * 2,
          f"the App Store actions are not in the audit log with the operator: {audit_log(bob)}")

    # 8. A named key: the console says whose it is, and the audit log records its name with the
    # name typed at sign-in beside it. Then no CSP violation, nothing left after signing out.
    click(driver, By.ID, "sign-out")
    sign_in(driver, NAMED_KEY[1], "Olivia at home")
    wait.until(EC.text_to_be_present_in_element((By.ID, "signed-in-as"), "signed in as olivia (Olivia at home)"))
    driver.get(base + "/console#/account/" + ACCOUNT)
    wait.until(EC.text_to_be_present_in_element((By.ID, "account-tier"), "free"))
    click(driver, By.ID, "reconcile-dry-run")
    wait.until(lambda _: any(a["action"] == "reconcile_dry_run" and a["actor"] == "olivia (Olivia at home)" for a in audit_log(ACCOUNT)))
    violations = [entry["message"] for entry in driver.get_log("browser") if "Content Security Policy" in entry["message"]]
    check(not violations, f"CSP violations: {violations}")
    click(driver, By.ID, "sign-out")
    wait.until(EC.visibility_of_element_located((By.ID, "login-view")))
    check(driver.execute_script("return sessionStorage.length") == 0, "sign out left the key in session storage")
    driver.get(base + "/console#/endpoints")
    wait.until(EC.visibility_of_element_located((By.ID, "login-view")))
    check(not driver.find_element(By.ID, "endpoints-view").is_displayed(), "endpoints visible after signing out")


class Wait(WebDriverWait):
    """WebDriverWait with WAIT seconds whose timeout names the line that waited."""

    def __init__(self, driver):
        super().__init__(driver, WAIT)

    def until(self, method, message=""):
        line = inspect.stack()[1].lineno
        return super().until(method, message or f"timed out after {WAIT} s at scripts/console-browser.py:{line}")


def port_open(port):
    with socket.socket() as s:
        s.settimeout(1)
        return s.connect_ex(("127.0.0.1", port)) == 0


def dead_deliveries(base):
    status, answer = http("GET", base + "/v1/admin/deliveries?status=dead")
    return answer["data"] if status == 200 and answer["data"] else None


def pending_deliveries(base):
    status, answer = http("GET", base + "/v1/admin/deliveries?status=pending")
    return answer["data"] if status == 200 else ["(unknown)"]


def delivery_status(base, delivery_id):
    status, answer = http("GET", base + "/v1/admin/deliveries?limit=500")
    return next((d["status"] for d in answer.get("data", []) if d["delivery_id"] == delivery_id), None) if status == 200 else None


def receiver_log(hooks):
    status, entries = http("GET", hooks + "/_log", key=None)
    return entries if status == 200 and isinstance(entries, list) else []


def browser():
    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium") or "/usr/bin/chromium"
    for argument in ["--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu", "--window-size=1400,1000",
                     "--no-first-run", "--disable-extensions", "--disable-background-networking"]:
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(shutil.which("chromedriver") or "/usr/bin/chromedriver"), options=options)
    driver.set_page_load_timeout(WAIT)
    driver.set_script_timeout(WAIT)
    return driver


def sign_in(driver, key, name):
    wait = Wait(driver)
    wait.until(EC.visibility_of_element_located((By.ID, "login-key")))
    driver.find_element(By.ID, "login-key").clear()
    driver.find_element(By.ID, "login-key").send_keys(key)
    driver.find_element(By.ID, "login-actor").clear()
    driver.find_element(By.ID, "login-actor").send_keys(name)
    click(driver, By.ID, "login-submit")


def full_height(driver):
    """Makes the window as tall as the page, so a screenshot shows all of it."""
    height = driver.execute_script("return Math.max(document.body.scrollHeight, document.documentElement.scrollHeight)")
    driver.set_window_size(1400, min(max(int(height) + 40, 1000), 4000))


if __name__ == "__main__":
    try:
        main()
    except (AssertionError, TimeoutException) as error:
        print(f"console-test: FAILED: {error}", file=sys.stderr)
        sys.exit(1)
