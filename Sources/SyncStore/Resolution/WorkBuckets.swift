import Foundation
import NIOConcurrencyHelpers
import Postgres

/// The claim queue's buckets, when the queue is distributed by them: on Citus after `subsync
/// distribute` (sql/0047), a worker claims one bucket at a time, on the node that holds it, and
/// the whole batch runs there (docs/CITUS.md, "How the pipeline runs on Citus"). `nil` on one
/// PostgreSQL, and on a cluster whose queue is still local to the coordinator: a claim then
/// takes the oldest entry of the whole queue.
///
/// The buckets are `work_anchors`' rows (one per shard of the accounts, and any a shard split
/// left behind, whose entries are claimed all the same), read from the coordinator and kept for
/// ``lifetime`` (a bucket appears only when `distribute` runs after a split). A read that fails
/// (it reads every shard: a worker node down) keeps the last answer for another ``lifetime``; a
/// whole-queue claim refused on Citus drops it (``forget()``: `distribute` has just run). Buckets are handed out in
/// turn, so that the workers of a process start on different ones.
final class WorkBuckets: Sendable {
    private struct State {
        var buckets: [String]?
        var readAt: Date?
        var next = 0
    }

    private let state = NIOLockedValueBox(State())
    /// How long an answer is kept.
    let lifetime: TimeInterval = 30

    /// The buckets to claim from in turn, or `nil` when the queue is not distributed.
    func current(pool: ConnectionPool, topology: DatabaseTopology, now: Date) async throws -> [String]? {
        guard try await topology.isCitus(pool) else { return nil }
        let kept = state.withLockedValue { state -> (buckets: [String]?, fresh: Bool) in
            (state.buckets, state.readAt.map { now.timeIntervalSince($0) < lifetime && $0 <= now } ?? false)
        }
        if kept.fresh { return kept.buckets }
        let read: [String]?
        do {
            read = try await Self.read(pool: pool)
        } catch {
            // The last answer stands for another `lifetime`: a node down must not make every
            // batch wait for a read that fails.
            let known = state.withLockedValue { state -> Bool in
                guard state.readAt != nil else { return false }
                state.readAt = now
                return true
            }
            guard known else { throw error }
            return kept.buckets
        }
        state.withLockedValue { state in
            state.buckets = read
            state.readAt = now
        }
        return read
    }

    /// Drops the answer kept, so that the next call reads the buckets again.
    func forget() {
        state.withLockedValue { $0.readAt = nil }
    }

    /// The index of the next bucket to try, of `count`.
    func take(of count: Int) -> Int {
        state.withLockedValue { state in
            let index = state.next % max(1, count)
            state.next = index + 1
            return index
        }
    }

    private static func read(pool: ConnectionPool) async throws -> [String]? {
        let distributed = try await pool.preparedQuery(
            "SELECT EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = to_regclass('account_work'))")
        guard try distributed[0].decode(Bool.self, at: 0) else { return nil }
        return try await pool.preparedQuery("SELECT bucket FROM work_anchors ORDER BY bucket").map { try $0.decode(String.self, at: 0) }
    }
}
