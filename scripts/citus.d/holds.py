#!/usr/bin/env python3
"""DeliveryStore.holdBlocked's Citus form on a real cluster (sql/0018), run by scripts/citus:
`subsync_hold_blocked_deliveries` looks at a window of the due deliveries (a due time: that of
the window-th due delivery of an enabled endpoint, over every shard), and holds the deliveries in
it that wait behind a head that is not due. The same scenario as the Swift test
`WebhookOrderTests.holdLooksAtAWindow`, which runs the function on one PostgreSQL: here the
window's ORDER BY ... OFFSET crosses shards and the search for heads is pushed down to them.

usage: holds.py DATABASE_URL
"""
import subprocess
import sys
import uuid

url = sys.argv[1]


def psql(sql):
    return subprocess.run(["psql", url, "-qtAX", "-v", "ON_ERROR_STOP=1", "-c", sql],
                          capture_output=True, text=True, check=True).stdout.split()


enabled, disabled = uuid.uuid4(), uuid.uuid4()
accounts = {"citus-hold-ann": 0, "citus-hold-bob": 2, "citus-hold-cy": 4, "citus-hold-zed": -10}
psql(f"""INSERT INTO webhook_endpoints (endpoint_id, url, secret, enabled) VALUES
         ('{enabled}', 'http://127.0.0.1:9/on', 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw', true),
         ('{disabled}', 'http://127.0.0.1:9/off', 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw', false)""")
try:
    for account, offset in accounts.items():
        endpoint = disabled if account.endswith("zed") else enabled
        for sequence in (1, 2):
            # Strictly ordered due times: zed's (a disabled endpoint: claims do not read them, and
            # they must not take the window), then ann1, ann2, bob1, bob2, cy1, cy2.
            psql(f"""INSERT INTO deliveries (account_id, endpoint_id, event_sequence, event_id, next_attempt_at, leased_until)
                     VALUES ('{account}', '{endpoint}', {sequence}, '{uuid.uuid4()}',
                             timestamptz '2026-01-01 00:00:00+00' + {offset + sequence} * interval '1 second',
                             {"timestamptz '2099-01-01 00:00:00+00'" if sequence == 1 else "NULL"})""")
    now = "timestamptz '2026-01-02 00:00:00+00'"

    def hold(window=None):
        arguments = f"{now}, 0, 1" + (f", {window}" if window is not None else "")
        return int(psql(f"SELECT subsync_hold_blocked_deliveries({arguments})")[0])

    def due(account):
        return int(psql(f"""SELECT count(*) FROM deliveries WHERE account_id = '{account}' AND event_sequence = 2
                            AND next_attempt_at <= {now}""")[0])

    steps = [
        (hold(2), 1, "window 2 (ann1, ann2): ann2 waits behind its leased head"),
        (due("citus-hold-ann"), 0, "ann2 held"),
        (due("citus-hold-bob"), 1, "bob2 beyond the window"),
        (hold(2), 0, "window 2 (ann1, bob1): nothing behind them in it"),
        (hold(3), 1, "window 3 (ann1, bob1, bob2)"),
        (due("citus-hold-bob"), 0, "bob2 held"),
        (due("citus-hold-cy"), 1, "cy2 beyond the window"),
        (hold(), 1, "the three-argument form (sql/0014's, for a previous release): the default window"),
        (due("citus-hold-cy"), 0, "cy2 held"),
        (due("citus-hold-zed"), 1, "a disabled endpoint's deliveries are not held"),
    ]
    failed = [f"{what}: got {got}, expected {expected}" for got, expected, what in steps if got != expected]
    if failed:
        print("citus holds: " + "; ".join(failed), file=sys.stderr)
        sys.exit(1)
    print(f"citus holds: the window of subsync_hold_blocked_deliveries checked in {len(steps)} steps")
finally:
    names = ", ".join(f"'{account}'" for account in accounts)
    psql(f"DELETE FROM deliveries WHERE account_id IN ({names})")
    psql(f"DELETE FROM webhook_endpoints WHERE endpoint_id IN ('{enabled}', '{disabled}')")
