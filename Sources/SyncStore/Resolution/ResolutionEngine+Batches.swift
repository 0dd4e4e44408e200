import Foundation
import Logging
import Postgres
import SyncCore

extension ResolutionEngine {
    /// Claims up to `limit` entries of the claim queue (`account_work`, sql/0014; oldest first,
    /// `FOR UPDATE SKIP LOCKED` so workers in any process take disjoint entries), locks their
    /// accounts, resolves every pending report of them, and marks those resolved, all in one
    /// transaction.
    ///
    /// An account another transaction holds (a worker resolving it, a sync binding a purchase
    /// to it, a usage write) is not waited for: it is queued again, for a later claim, and the
    /// batch goes on with the rest. A busy account used to hold up every batch that touched it.
    ///
    /// If the batch fails for a reason other than a lost connection, each of its accounts is
    /// retried on its own, so one bad account cannot hold up the others; that account's reports
    /// get their attempt counted and, after `maximumAttempts`, are quarantined with the error.
    ///
    /// `sharedBy` is the number of workers claiming from this process: near the end of a
    /// backlog a claim takes that share of what is left rather than a full `limit`
    /// (``claimQueue(limit:sharedBy:bucket:on:)``).
    public func resolvePendingBatch(limit: Int, sharedBy workers: Int = 1, maximumAttempts: Int = 5) async throws -> Outcome {
        if let buckets = try await workBuckets.current(pool: pool, topology: topology, now: clock.now()), !buckets.isEmpty {
            try await router?.refreshUnlessRead()
            return try await resolveNextBucket(of: buckets, limit: limit, maximumAttempts: maximumAttempts)
        }
        do {
            return try await resolveBatch(limit: limit, sharedBy: workers, maximumAttempts: maximumAttempts, bucket: nil)
        } catch {
            // On Citus, `distribute` may have distributed the queue since the buckets were read
            // (Citus then refuses the whole queue's claim): read them again next time.
            if try await topology.isCitus(pool) { workBuckets.forget() }
            throw error
        }
    }

    /// A batch of the first of `buckets`, in turn (``WorkBuckets/take(of:)``), whose claim takes
    /// something; an empty outcome once each has been tried and none had an entry. A batch that
    /// resolved something, or took entries none of whose accounts was busy, says there may be
    /// more (`queuedAfter` 1), so the worker goes on at once; one whose accounts were all busy
    /// lets the worker look again shortly (`accountsDeferred`), not at once.
    ///
    /// A bucket whose node cannot be reached is passed over for the next, so that a worker node
    /// down holds up only its own buckets; the error is thrown only when no bucket could be tried.
    private func resolveNextBucket(of buckets: [String], limit: Int, maximumAttempts: Int) async throws -> Outcome {
        var failure: (any Error)?
        var tried = false
        for _ in buckets.indices {
            let bucket = buckets[workBuckets.take(of: buckets.count)]
            var outcome: Outcome
            do {
                outcome = try await resolveBatch(limit: limit, sharedBy: 1, maximumAttempts: maximumAttempts, bucket: bucket)
            } catch where Self.isRetryable(error) && !(error is CancellationError) {
                failure = error
                continue
            }
            tried = true
            guard outcome.entriesClaimed > 0 else { continue }
            if outcome.reportsResolved > 0 || outcome.accountsDeferred == 0 { outcome.queuedAfter = max(outcome.queuedAfter, 1) }
            return outcome
        }
        if !tried, let failure { throw failure }
        return Outcome()
    }

    /// One batch: of the whole queue (`bucket` nil), or of one bucket of a distributed queue,
    /// in a transaction on the node that holds the bucket (``AccountConnections``, which wakes
    /// the delivery loops from the coordinator when the batch wrote deliveries).
    private func resolveBatch(limit: Int, sharedBy workers: Int, maximumAttempts: Int, bucket: String?) async throws -> Outcome {
        var claimedAccounts: [String] = []
        var claimedBucket = bucket
        do {
            let work: (Connection) async throws -> Outcome = { connection in
                let taken = try await claimQueue(limit: limit, sharedBy: workers, bucket: bucket, on: connection)
                claimedAccounts = taken.accounts
                claimedBucket = taken.bucket
                guard let bucket = taken.bucket else { return Outcome() }
                let claimed = try await claim(accounts: claimedAccounts, bucket: bucket, skipLocked: true, on: connection)
                var outcome = try await resolveClaimed(claimed, on: connection)
                outcome.accountsDeferred = claimed.deferred.count
                outcome.queuedAfter = taken.queuedAfter
                outcome.entriesClaimed = taken.entries
                return outcome
            }
            guard let bucket else { return try await pool.withTransaction(work) }
            return try await AccountConnections(pool: pool, router: router).withTransaction(for: bucket, work)
        } catch {
            guard !Self.isRetryable(error), !claimedAccounts.isEmpty, let claimedBucket else { throw error }
            logger.warning("batch failed; retrying its accounts one by one", metadata: ["error": "\(error)"])
            return try await resolveAccountsSeparately(claimedAccounts, bucket: claimedBucket, maximumAttempts: maximumAttempts)
        }
    }

    /// Errors that say nothing about the reports: the connection, the pool, or contention.
    /// They are retried as they are, never counted against a report.
    static func isRetryable(_ error: any Error) -> Bool {
        if error is CancellationError { return true }
        return (error as? PostgresError)?.isTransient ?? false
    }

    /// Resolves the accounts whose state changes with time alone (`next_transition_at` due), at
    /// most `limit` of them, skipping accounts another process is resolving right now.
    public func resolveDueAccounts(limit: Int) async throws -> Outcome {
        var dueAccounts: [String] = []
        do {
            return try await pool.withTransaction { connection in
                // Accounts whose state changes with time, then accounts whose usage periods have
                // ended unclosed or have a revised total to announce (`usage.period_closed`,
                // docs/USAGE.md: late changes are coalesced here), each with a limit of its
                // own so that neither can starve the other. Found without locks, then locked one
                // by one without waiting (an account another sweeper or a worker holds is left
                // for the next sweep): no statement locks rows of several accounts, which Citus
                // cannot run (sql/0014).
                let now = clock.now()
                let candidates = try await connection.preparedQuery(
                    """
                    (SELECT account_id FROM account_states
                     WHERE next_transition_at <= \(now)
                     ORDER BY next_transition_at
                     LIMIT \(limit))
                    UNION
                    (SELECT account_id FROM usage_periods
                     WHERE closed_revision = 0 AND period_end <= \(now)
                     ORDER BY period_end
                     LIMIT \(limit))
                    UNION
                    (SELECT account_id FROM usage_periods
                     WHERE revision_due -- usage_periods_revision_due (sql/0036)
                     ORDER BY period_end
                     LIMIT \(limit))
                    """
                ).map { try $0.decode(String.self, at: 0) }
                let locked = try await AccountLocks.lockExisting(Array(Set(candidates)).sorted(), skipLocked: true, on: connection)
                dueAccounts = locked.keys.sorted()
                return try await resolve(locked: locked, accounts: dueAccounts, newReports: [:], origin: .sweeper, on: connection)
            }
        } catch {
            guard !Self.isRetryable(error), !dueAccounts.isEmpty else { throw error }
            // One account that cannot be resolved must not stop the sweep for everyone: retry
            // one by one, and push a failing account's next attempt a minute later.
            var total = Outcome()
            for accountID in dueAccounts {
                do {
                    total = total + (try await pool.withTransaction { connection in
                        try await resolve(accounts: [accountID], newReports: [:], origin: .sweeper, on: connection)
                    })
                } catch where !Self.isRetryable(error) {
                    total.accountsFailed += 1
                    logger.error("expiry sweep could not resolve an account; retrying in a minute",
                                 metadata: ["account": "\(accountID)", "error": "\(error)"])
                    try await pool.preparedQuery(
                        """
                        UPDATE account_states SET next_transition_at = \(clock.now().addingTimeInterval(60))
                        WHERE account_id = \(accountID)
                        """
                    )
                }
            }
            return total
        }
    }

    /// Queues the accounts with reports pending for longer than `age` that have no entry in the
    /// claim queue, at most `limit` of them; returns how many. On one PostgreSQL every writer
    /// queues in the transaction that stores the reports, so this finds nothing. On Citus a sync
    /// commits its reports before its queue entry (a statement of its own, on the account's node
    /// once the queue is distributed, sql/0047, else on the coordinator), so a `serve` that dies
    /// between the two, or a queue insert that fails, leaves reports without
    /// an entry (a retry of the same sync queues them again: `ReportInbox.submit`); and a claim
    /// written through the coordinator can see an entry a moment before its reports and let
    /// it go: this is what brings those reports back (sql/0014). The expiry sweeper runs it.
    ///
    /// It looks at the `limit` oldest pending reports of each node only, then at their age: stalled reports
    /// are the oldest pending ones, and filtering by age first reads the whole pending set while a
    /// fresh backlog drains (docs/PERFORMANCE.md, "In the code").
    public func requeueStalledAccounts(age: TimeInterval = 5, limit: Int = 1000) async throws -> Int {
        try await pool.withConnection { connection in
            // The oldest of each node's range of `arrival` (sql/0045: on Citus a sync's reports
            // are numbered by the node that inserts them), each through reports_pending_by_arrival.
            let stalled = try await connection.preparedQuery(
                """
                SELECT DISTINCT a FROM subsync_stalled_accounts(\(limit), \(clock.now().addingTimeInterval(-age))) AS a
                """
            ).map { try $0.decode(String.self, at: 0) }
            guard !stalled.isEmpty else { return 0 }
            // Two statements rather than one `NOT EXISTS`: Citus refuses a correlated subquery
            // over the queue once it is distributed (sql/0047).
            let queuedAlready = Set(try await connection.preparedQuery(
                "SELECT DISTINCT account_id FROM account_work WHERE account_id = ANY(\(stalled)::text[])"
            ).map { try $0.decode(String.self, at: 0) })
            let missing = stalled.filter { !queuedAlready.contains($0) }
            guard !missing.isEmpty else { return 0 }
            let queued = try await ReportInbox.queue(accountIDs: missing, on: connection)
            if queued > 0 {
                logger.warning("queued accounts whose pending reports had no claim queue entry", metadata: ["accounts": "\(queued)"])
                try await connection.notify(channel: ReportInbox.channel)
            }
            return queued
        }
    }

    /// Pending reports claimed for resolution, by account.
    struct Claimed {
        var reports: [String: [Report]] = [:]
        /// The claimed reports' ids (a failed batch counts an attempt on them).
        var reportIDs: [String] = []
        /// The claimed accounts' states, locked.
        var locked: [String: AccountLocks.LockedState] = [:]
        /// Accounts another transaction held, queued again (claims with `skipLocked`).
        var deferred: [String] = []
    }

    /// Takes entries of the claim queue (oldest first, `FOR UPDATE SKIP LOCKED`, so workers in
    /// any process take disjoint entries) and returns their accounts, sorted, with an estimate
    /// of the entries left in the queue (the span of its ids, seen before the claim, less the
    /// entries taken: ids only grow, and other buckets' entries are among them), 0 when it took
    /// none.
    ///
    /// How many: `limit`, or fewer near the end of a backlog, a `sharedBy`-th of the entries
    /// nobody has taken (the queue's last id less its first unlocked one, both read from the
    /// primary key's ends), at least a tenth of `limit`, so that the workers finish a drain together
    /// rather than the last full batches running alone (docs/PERFORMANCE.md, "In the code"). Pass
    /// the number of workers that claim from this process.
    ///
    /// The entries are deleted by key, `id = ANY(ARRAY(...))`: written `id IN (...)`, the planner
    /// scanned the whole queue, so a claim cost more the longer the backlog (docs/PERFORMANCE.md,
    /// "How a path's cost grows with its data").
    ///
    /// Only entries of one bucket, the oldest unlocked entry's (sql/0043): on Citus a bucket is a
    /// shard, so a batch's accounts are all in one, and its statements run on that shard alone
    /// (docs/CITUS.md, "Scale-out: the plan"). On one PostgreSQL every entry is in bucket `''`.
    ///
    /// With `bucket`, entries of that bucket only, oldest first, at most `limit`: the claim of a
    /// queue distributed by bucket (sql/0047), one statement on the bucket's node. Its ids come
    /// from the range of the node that inserted each entry (Citus numbers identities by node), so
    /// no estimate of what is left is made (`queuedAfter` 0).
    func claimQueue(limit: Int, sharedBy workers: Int = 1, bucket: String? = nil, on connection: Connection) async throws -> QueueClaim {
        let limit = max(1, limit)
        let workers = max(1, workers)
        if let bucket {
            let accounts = try await connection.preparedQuery(
                """
                DELETE FROM account_work WHERE bucket = \(bucket) AND id = ANY(ARRAY(
                    SELECT id FROM account_work WHERE bucket = \(bucket) ORDER BY id LIMIT \(limit) FOR UPDATE SKIP LOCKED))
                RETURNING account_id
                """
            ).map { try $0.decode(String.self, at: 0) }
            return QueueClaim(accounts: Set(accounts).sorted(), bucket: bucket, entries: accounts.count, queuedAfter: 0)
        }
        let rows = try await connection.preparedQuery(
            """
            WITH first AS MATERIALIZED (
                SELECT id, bucket FROM account_work ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED
            ), taken AS (
                DELETE FROM account_work WHERE id = ANY(ARRAY(
                    SELECT w.id FROM account_work w WHERE w.bucket = (SELECT bucket FROM first) ORDER BY w.id
                    LIMIT coalesce((
                        SELECT least(\(limit), greatest(\(max(1, limit / 10)),
                                     ((SELECT max(id) FROM account_work) - first.id + \(workers)) / \(workers)))
                        FROM first), \(limit))
                    FOR UPDATE SKIP LOCKED))
                RETURNING id, account_id, bucket
            )
            SELECT account_id, (SELECT max(id) - min(id) + 1 FROM account_work) - count(*) OVER (), bucket FROM taken
            """
        )
        var claim = QueueClaim(accounts: [], bucket: nil, entries: rows.count, queuedAfter: 0)
        var accounts = Set<String>()
        for row in rows {
            accounts.insert(try row.decode(String.self, at: 0))
            claim.queuedAfter = max(claim.queuedAfter, Int(try row.decode(Int64.self, at: 1)))
            claim.bucket = try row.decode(String.self, at: 2)
        }
        claim.accounts = accounts.sorted()
        return claim
    }

    /// What ``claimQueue(limit:sharedBy:bucket:on:)`` took.
    struct QueueClaim {
        /// The entries' accounts, sorted.
        var accounts: [String]
        /// Their bucket; `nil` when nothing was taken from the whole queue.
        var bucket: String?
        /// Entries taken (an account queued twice has two).
        var entries: Int
        /// The estimate of entries left, 0 when none was taken or none is made.
        var queuedAfter: Int
    }

    /// Claims `accounts` (sorted) and their pending reports: the accounts' locks (in order,
    /// waiting unless `skipLocked`: a worker holding one of them finishes first), then every queue entry of those
    /// accounts in `bucket` this transaction can see (deleted: this claim does their work) and, in the same
    /// statement and so the same snapshot, every pending report of them, marked resolved as it is
    /// read. A report committed after that snapshot has an entry the delete did not see, and is
    /// claimed next time. The reports come in no particular order: an account's resolution is a
    /// join of its reports, the same in any order, so they are not sorted.
    ///
    /// Marking in the claim rather than after the resolution is the same commit: if anything in
    /// the batch fails, the transaction rolls back and the reports are pending again. It spares
    /// a second visit of every row by key after the resolution (docs/PERFORMANCE.md, "In the
    /// code"). The reports' row locks are held from here to the commit, so a device sending one of
    /// them again meanwhile waits for the batch before its insert finds the report stored.
    ///
    /// With `skipLocked`, the accounts another transaction holds are not waited for: they get a
    /// new queue entry (in this transaction, so a rolled-back batch leaves the entries it took,
    /// not new ones) and neither their entries nor their reports are claimed now.
    ///
    /// Only the entries of `bucket`, the one the accounts were claimed from: a statement over
    /// the queue's rows of several buckets would read every shard on Citus once the queue is
    /// distributed by them (sql/0047). An entry of the same account left in another bucket (queued
    /// before a shard split) is claimed later and finds nothing to do.
    func claim(accounts: [String], bucket: String, skipLocked: Bool = false, on connection: Connection) async throws -> Claimed {
        var claimed = Claimed()
        guard !accounts.isEmpty else { return claimed }
        claimed.locked = try await AccountLocks.lockStatesToResolve(
            of: accounts, catalogue: catalogue, clock: clock, topology: topology, skipLocked: skipLocked, on: connection)
        claimed.deferred = accounts.filter { claimed.locked[$0] == nil }
        try await ReportInbox.queue(accountIDs: claimed.deferred, on: connection)
        let accounts = accounts.filter { claimed.locked[$0] != nil }
        guard !accounts.isEmpty else { return claimed }
        let opaque = try await keysOpaqueToPlanner(on: connection)
        let rows = try await connection.preparedQuery(
            """
            WITH done AS (
                DELETE FROM account_work WHERE bucket = \(bucket) AND id IN (
                    SELECT id FROM account_work
                    WHERE bucket = \(bucket) AND account_id = ANY(\(accounts, cast: "text[]", opaqueToPlanner: opaque))
                    FOR UPDATE SKIP LOCKED)
            ), claimed AS (
                UPDATE reports SET status = 'resolved', resolved_at = now(), attempts = attempts + 1, last_error = NULL
                WHERE status = 'pending' AND account_id = ANY(\(accounts, cast: "text[]", opaqueToPlanner: opaque))
                RETURNING account_id, \(unescaped: Report.columns)
            )
            SELECT account_id, \(unescaped: Report.columns) FROM claimed
            """
        )
        for row in rows {
            let accountID = try row.decode(String.self, at: 0)
            let report = try Report(row: row, offset: 1)
            claimed.reports[accountID, default: []].append(report)
            claimed.reportIDs.append(report.reportID)
        }
        return claimed
    }

    func resolveClaimed(_ claimed: Claimed, on connection: Connection) async throws -> Outcome {
        guard !claimed.reports.isEmpty else { return Outcome() }
        // Only accounts with reports: another worker may have done the rest's work already.
        let accounts = Array(claimed.reports.keys)
        // The claim marked the reports resolved already, in this transaction.
        return try await resolve(
            locked: claimed.locked.filter { claimed.reports[$0.key] != nil },
            accounts: accounts, newReports: claimed.reports, origin: .worker, on: connection)
    }

    /// The slow path after a failed batch: the same accounts again, one transaction each.
    private func resolveAccountsSeparately(_ accounts: [String], bucket: String, maximumAttempts: Int) async throws -> Outcome {
        var total = Outcome()
        for accountID in accounts {
            var claimedIDs: [String] = []
            do {
                total = total + (try await pool.withTransaction { connection in
                    let claimed = try await claim(accounts: [accountID], bucket: bucket, on: connection)
                    claimedIDs = claimed.reportIDs
                    return try await resolveClaimed(claimed, on: connection)
                })
            } catch where !Self.isRetryable(error) {
                // Failed before its reports were read (its stored state, say): all its pending ones.
                total.accountsFailed += 1
                try await recordFailure(
                    accountID: accountID, reportIDs: claimedIDs.isEmpty ? nil : claimedIDs, error: error, maximumAttempts: maximumAttempts)
            }
        }
        return total
    }

    /// Counts a failed attempt on an account's pending reports; quarantines them at the limit.
    ///
    /// `reportIDs` `nil` means every pending report of the account. Once none is left pending,
    /// the account's claim queue entries go too, or workers would claim it again and again.
    private func recordFailure(accountID: String, reportIDs: [String]?, error: any Error, maximumAttempts: Int) async throws {
        // `description` of our errors is log-safe (no DETAIL, no secrets).
        let message = String(describing: error).prefix(1000)
        let result = try await pool.preparedQuery(
            """
            UPDATE reports SET
                attempts = attempts + 1,
                last_error = \(String(message)),
                status = CASE WHEN attempts + 1 >= \(maximumAttempts) THEN 'quarantined' ELSE 'pending' END
            WHERE account_id = \(accountID) AND (\(reportIDs)::text[] IS NULL OR report_id = ANY(\(reportIDs)::text[]))
              AND status = 'pending'
            RETURNING status
            """
        )
        let stillPending = try await pool.preparedQuery(
            "SELECT EXISTS (SELECT 1 FROM reports WHERE account_id = \(accountID) AND status = 'pending')"
        )
        if try !stillPending[0].decode(Bool.self, at: 0) {
            try await pool.preparedQuery("DELETE FROM account_work WHERE account_id = \(accountID)")
        }
        let quarantined = try result.filter { try $0.decode(String.self, at: 0) == "quarantined" }.count
        logger.error(
            "could not resolve an account's reports",
            metadata: ["account": "\(accountID)", "error": "\(message)", "quarantined": "\(quarantined)"]
        )
    }
}
