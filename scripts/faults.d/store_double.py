"""The App Store (issue #51): a double of its Server API (Tests/Doubles/appstore-double.py) whose
notification history fails and recovers, and the checks of what the backfill made of it."""
import importlib.util
import json
import os
import random
import socket
import sys
import time
import uuid
from collections import Counter

from clusters import psql
from common import ADMIN_KEY, ROOT, Failure, free_port, registry, say, tail
from http_requests import http_request
from load import iso


STORE_KEY = os.path.normpath(os.path.join(ROOT, "Tests/Fixtures/apple-app-store-server-library/certs/testSigningKey.p8"))
STORE_BUNDLE = "com.example.subsync.faults"
STORE_KEY_ID = "FAULTSKEY01"
STORE_ISSUER = "faults-issuer"
STORE_RETRY_AFTER = 3.0        # seconds the double's 429 asks for (Retry-After, UNIX ms)
STORE_ACCOUNTS = 4
STORE_REQUESTS_PER_SECOND = 50  # Apple's limit, per serve process (the limiter is per process)


class StoreDouble:
    """The App Store Server API (Tests/Doubles/appstore-double.py, which verifies every token with PyJWT)
    for the notification backfill of both serve processes: Get Notification History answers 500
    from the start, then, from the fault schedule's `store` time, 429 with a Retry-After, then two
    pages of signed notifications the devices never sent for STORE_ACCOUNTS accounts (purchases,
    a refund, auto-renew turned off, renewal details). The checks: each notification applied once
    (the backfill's overlap and the repeated last page are duplicates), the states they make, the
    Retry-After kept, the rate limit kept, every token valid, and the checkpoint moved on."""

    def __init__(self, workdir, seed):
        spec = importlib.util.spec_from_file_location("signed_material", os.path.join(ROOT, "scripts/bench/lib/signed_material.py"))
        material = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(material)
        self.sign = material.signing_chain(workdir, "faults")
        self.root = os.path.join(workdir, "root.pem")
        self.port = free_port()
        self.process = registry.spawn(
            [sys.executable, os.path.join(ROOT, "Tests/Doubles/appstore-double.py"), "--port", str(self.port), "--key-file", STORE_KEY,
             "--key-id", STORE_KEY_ID, "--issuer", STORE_ISSUER, "--bundle", STORE_BUNDLE],
            os.path.join(workdir, "appstore-double.out"))
        deadline = time.time() + 20
        while True:
            if self.process.poll() is not None:
                raise Failure(f"the App Store double exited at start:\n{tail(os.path.join(workdir, 'appstore-double.out'))}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    break
            except OSError:
                if time.time() > deadline:
                    raise Failure("the App Store double did not listen in 20 s")
                time.sleep(0.05)
        rng = random.Random(seed)
        self.accounts = [str(uuid.UUID(int=rng.getrandbits(128), version=4)) for _ in range(STORE_ACCOUNTS)]
        self.recovered_at = None
        self.script([{"status": 500, "json": {"errorCode": 5000000, "errorMessage": "An unknown error occurred."}}])

    def env(self):
        return {
            "SUBSYNC_APPLE_ROOT_CERTIFICATES": self.root, "SUBSYNC_BUNDLE_ID": STORE_BUNDLE,
            "SUBSYNC_APPSTORE_KEY_FILE": STORE_KEY, "SUBSYNC_APPSTORE_KEY_ID": STORE_KEY_ID,
            "SUBSYNC_APPSTORE_ISSUER_ID": STORE_ISSUER, "SUBSYNC_APPSTORE_BASE_URL": f"http://127.0.0.1:{self.port}",
            "SUBSYNC_APPSTORE_BACKFILL_INTERVAL": "60",
        }

    def script(self, answers):
        status, _, data = http_request(self.port, "POST", "/__double/script", json.dumps({
            "method": "POST", "path": "/inApps/v1/notifications/history", "answers": answers}).encode(), timeout=5)
        if status != 200:
            raise Failure(f"scripting the App Store double: {status} {data[:200]!r}")

    def requests(self):
        status, _, data = http_request(self.port, "GET", "/__double/requests", timeout=30)
        if status != 200:
            raise Failure(f"the App Store double's requests: {status}")
        return json.loads(data)

    def create_accounts(self, serve, record):
        """Each store account first syncs a long-expired pass from a device (so the account exists
        and a purchase carrying its id as appAccountToken binds to it)."""
        for account in self.accounts:
            report_id = f"store-pass-{account}"
            body = json.dumps({"device": {"id": "store-device", "platform": "ios"}, "reports": [{
                "report_id": report_id, "observed_at": iso(time.time()), "product_id": "voip.basic.pass.3m",
                "original_transaction_id": f"pass-{account}", "transaction_id": f"pass-{account}",
                "purchased_at": iso(time.time() - 400 * 86400), "environment": "production"}]}).encode()
            status, _, data = http_request(serve.port, "POST", f"/v1/accounts/{account}/sync", body,
                                           {"Authorization": f"Bearer {ADMIN_KEY}", "Content-Type": "application/json"})
            if status != 202:
                raise Failure(f"creating store account {account}: {status} {data[:200]!r}")
            with record.lock:
                record.accepted.add((account, report_id))

    def notification(self, kind, account, index, signed, subtype=None, revoked=None, auto_renew=True, renews_to=None,
                     price_increase=None, expiration_intent=None):
        ms = lambda t: int(t * 1000)
        purchased = signed - 5 * 86400
        transaction = {
            "transactionId": f"store-{index}", "originalTransactionId": f"store-{index}", "bundleId": STORE_BUNDLE,
            "productId": "voip.premium.monthly", "purchaseDate": ms(purchased), "expiresDate": ms(purchased + 30 * 86400),
            "type": "Auto-Renewable Subscription", "environment": "Production", "signedDate": ms(signed),
            "appAccountToken": account, "inAppOwnershipType": "PURCHASED",
        }
        if revoked is not None:
            transaction.update({"revocationDate": ms(revoked), "revocationReason": 0})
        renewal = {
            "originalTransactionId": f"store-{index}", "productId": "voip.premium.monthly",
            "autoRenewProductId": renews_to or "voip.premium.monthly", "autoRenewStatus": 1 if auto_renew else 0,
            "isInBillingRetryPeriod": False, "environment": "Production", "signedDate": ms(signed),
            "renewalDate": ms(purchased + 30 * 86400),
        }
        if price_increase is not None:
            renewal["priceIncreaseStatus"] = price_increase
        if expiration_intent is not None:
            renewal["expirationIntent"] = expiration_intent
        payload = {
            "notificationType": kind, "notificationUUID": str(uuid.uuid4()), "version": "2.0", "signedDate": ms(signed),
            "data": {"bundleId": STORE_BUNDLE, "environment": "Production", "signedTransactionInfo": self.sign(transaction),
                     "signedRenewalInfo": self.sign(renewal)},
        }
        if subtype:
            payload["subtype"] = subtype
        return {"signedPayload": self.sign(payload)}

    def recover(self):
        """The outage ends: one 429 asking for STORE_RETRY_AFTER seconds, then two pages; the
        second repeats for every later ask (duplicates by notificationUUID)."""
        now = time.time()
        a = self.accounts
        first = [self.notification("SUBSCRIBED", a[i], i, now - 600, subtype="INITIAL_BUY",
                                   renews_to="voip.premium.yearly" if i == 2 else None,
                                   price_increase=0 if i == 3 else None) for i in range(STORE_ACCOUNTS)]
        second = [
            self.notification("REFUND", a[0], 0, now - 300, revoked=now - 300),
            self.notification("DID_CHANGE_RENEWAL_STATUS", a[1], 1, now - 300, subtype="AUTO_RENEW_DISABLED", auto_renew=False),
        ]
        self.expected_notifications = len(first) + len(second)
        self.script([
            {"status": 429, "json": {"errorCode": 4290000, "errorMessage": "Rate limit exceeded."}, "retry_after_in": STORE_RETRY_AFTER},
            {"json": {"hasMore": True, "paginationToken": "faults-page-2", "notificationHistory": first}},
            {"json": {"hasMore": False, "notificationHistory": second}},
        ])
        self.recovered_at = time.time()

    def wait_applied(self, pg, limit):
        """Waits until every notification of the recovery was applied (the next backfill run, at
        most one interval after the outage ended)."""
        say(f"waiting until the backfill has applied the App Store's {self.expected_notifications} notifications")
        accounts = ",".join(f"'{a}'" for a in self.accounts)
        deadline = time.time() + limit
        while time.time() < deadline:
            rows = psql(pg.url, f"SELECT count(*) FROM store_notifications WHERE status = 'applied' AND account_id IN ({accounts})")
            if int(rows[0][0]) >= self.expected_notifications:
                return True
            time.sleep(1)
        return False

    def check(self, pg, serve, applied_in_time):
        """What the App Store part came to: (lines to print, problems)."""
        lines, problems = [], []
        accounts = ",".join(f"'{a}'" for a in self.accounts)
        applied = int(psql(pg.url, f"SELECT count(*) FROM store_notifications WHERE status = 'applied' AND account_id IN ({accounts})")[0][0])
        reports = int(psql(pg.url, f"SELECT count(*) FROM reports WHERE source = 'store' AND account_id IN ({accounts})")[0][0])
        lines.append(f"notifications applied: {applied} of {self.expected_notifications}; store reports: {reports}")
        if not applied_in_time or applied != self.expected_notifications or reports != self.expected_notifications:
            problems.append(f"the backfill applied {applied} notifications ({reports} store reports); expected {self.expected_notifications} of each, once")
        expected = [  # (status, will_renew, renewal_product_id, price_increase_status)
            ("revoked", False, None, None), ("active", False, None, None),
            ("active", True, "voip.premium.yearly", None), ("active", True, "voip.premium.monthly", "pending"),
        ]
        for account, (status, will_renew, renews_to, price) in zip(self.accounts, expected):
            code, _, data = http_request(serve.port, "GET", f"/v1/accounts/{account}", headers={"Authorization": f"Bearer {ADMIN_KEY}"})
            premium = next((e for e in json.loads(data).get("entitlements", []) if e.get("id") == "premium"), None) if code == 200 else None
            seen = premium and (premium["status"], premium["will_renew"], premium.get("renewal_product_id"), premium.get("price_increase_status"))
            lines.append(f"account {account}: premium {seen}")
            if seen != (status, will_renew, renews_to, price):
                problems.append(f"store account {account}: premium is {seen}, expected {(status, will_renew, renews_to, price)}")
        asked = sorted(self.requests(), key=lambda r: r["time"])
        statuses = Counter(r.get("status") for r in asked)
        lines.append(f"double: {len(asked)} requests, answers {dict(statuses)}")
        if not all(r["jwt"]["valid"] for r in asked):
            problems.append("a request to the App Store double carried a token PyJWT did not accept: "
                            + next(str(r["jwt"]["error"]) for r in asked if not r["jwt"]["valid"]))
        if not statuses.get(500):
            problems.append("the backfill never met the double's outage (no 500 answered)")
        throttled = [r for r in asked if r.get("status") == 429]
        if not throttled:
            problems.append("the backfill never met the double's 429")
        else:
            after = [r for r in asked if r["time"] > throttled[0]["time"]]
            gap = (after[0]["time"] - throttled[0]["time"]) if after else None
            lines.append(f"after the 429 (Retry-After {STORE_RETRY_AFTER:.0f} s) the next request came {gap if gap is None else round(gap, 2)} s later")
            if gap is None or gap < STORE_RETRY_AFTER - 0.5:
                problems.append(f"the 429's Retry-After ({STORE_RETRY_AFTER} s) was not kept: next request after {gap} s")
        busiest = max(Counter(int(r["time"]) for r in asked).values(), default=0)
        lines.append(f"busiest second: {busiest} requests (limit {STORE_REQUESTS_PER_SECOND} per serve process)")
        if busiest > 2 * STORE_REQUESTS_PER_SECOND:
            problems.append(f"{busiest} requests to the App Store in one second")
        checkpoint = psql(pg.url, "SELECT checkpoint IS NOT NULL AND checkpoint > now() - interval '10 minutes', last_error IS NULL, notifications FROM store_backfill")
        lines.append(f"backfill checkpoint recent, no error, notifications counted: {checkpoint}")
        if not checkpoint or checkpoint[0][:2] != ["t", "t"]:
            problems.append(f"the backfill's checkpoint did not move on after the outage: {checkpoint}")
        return lines, problems
