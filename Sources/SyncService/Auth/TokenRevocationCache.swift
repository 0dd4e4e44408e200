import Foundation
import Synchronization
import SyncCore
import SyncStore

/// The authenticator's view of ``TokenRevocations``: every account's revocation line in memory,
/// so a device request costs no read. It reads what changed (``TokenRevocations/changes(since:)``)
/// when its copy is older than ``ttl``: a revocation made by this process is seen at once
/// (``note(_:_:)``), one made by another process or by `subsync tokens revoke` within ``ttl``.
/// Requests before a first successful read wait for one, so no revoked token passes then.
final class TokenRevocationCache: Sendable {
    let store: TokenRevocations
    let clock: any ServiceClock
    let ttl: Duration
    private struct State {
        var lines: [String: Date] = [:]
        /// The newest change read (the database's clock); `nil` before the first read.
        var newest: Date?
        var loaded = false
        var readAt: Duration = .zero
        var reading = false
    }
    private let state = Mutex(State())

    init(store: TokenRevocations, clock: any ServiceClock, ttl: Duration = .seconds(5)) {
        self.store = store
        self.clock = clock
        self.ttl = ttl
    }

    /// The revocation line of `accountID` (tokens issued before it are refused), `nil` for none.
    func revokedBefore(_ accountID: String) async throws -> Date? {
        let now = clock.uptime()
        // One caller reads when the copy is stale; the others answer from it meanwhile (it is at
        // most one read older). Before a first read has succeeded every caller reads.
        let (read, since) = state.withLock { state -> (Bool, Date?) in
            guard !state.loaded || (now - state.readAt >= ttl && !state.reading) else { return (false, nil) }
            state.reading = true
            return (true, state.newest)
        }
        if read {
            do {
                let (lines, newest) = try await store.changes(since: since)
                state.withLock { state in
                    state.lines.merge(lines) { max($0, $1) }
                    state.newest = newest ?? state.newest
                    state.loaded = true
                    state.readAt = now
                    state.reading = false
                }
            } catch {
                state.withLock { $0.reading = false }
                // Without a first read nothing can be said: the request fails (503 for a
                // database outage). Afterwards the last copy answers until a read succeeds.
                if !state.withLock({ $0.loaded }) { throw error }
            }
        }
        return state.withLock { $0.lines[accountID] }
    }

    /// Records a revocation this process just made, so it holds from the next request.
    func note(_ accountID: String, _ line: Date) {
        state.withLock { state in
            state.lines[accountID] = max(state.lines[accountID] ?? line, line)
        }
    }
}
