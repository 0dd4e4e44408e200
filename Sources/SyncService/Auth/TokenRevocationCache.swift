import Foundation
import NIOConcurrencyHelpers
import SyncCore
import SyncStore

/// The authenticator's view of ``TokenRevocations``: every account's revocation line in memory,
/// so a device request costs no read. When its copy is older than ``ttl`` one caller reads what
/// changed (``TokenRevocations/changes(since:)``), and the whole table every ``fullReload`` (so
/// rows removed by hand go too); a revocation made by this process holds at once (``note(_:_:)``),
/// one made elsewhere (another process, `subsync tokens revoke`) within ``ttl``. Until a first
/// read has succeeded, callers wait for one shared read, so no revoked token passes after a start.
final class TokenRevocationCache: Sendable {
    let store: TokenRevocations
    let clock: any ServiceClock
    let ttl: Duration
    let fullReload: Duration
    private struct State {
        var lines: [String: Date] = [:]
        /// The newest change read (the database's clock).
        var newest: Date?
        var readAt: Duration?
        var fullAt: Duration?
        var reading: Task<Void, any Error>?
        /// This process's own revocations, re-applied over reads that may have started before
        /// they committed.
        var noted: [String: (line: Date, at: Duration)] = [:]
    }
    private let state = NIOLockedValueBox(State())

    init(store: TokenRevocations, clock: any ServiceClock, ttl: Duration = .seconds(5), fullReload: Duration = .seconds(300)) {
        self.store = store
        self.clock = clock
        self.ttl = ttl
        self.fullReload = fullReload
    }

    /// The revocation line of `accountID` (tokens issued before it are refused), `nil` for none.
    func revokedBefore(_ accountID: String) async throws -> Date? {
        let now = clock.uptime()
        let wait = state.withLockedValue { state -> Task<Void, any Error>? in
            guard state.readAt.map({ now - $0 >= ttl }) ?? true else { return nil }
            if let reading = state.reading {
                // A read is under way: wait for it only while there is no copy at all.
                return state.readAt == nil ? reading : nil
            }
            let full = state.fullAt.map { now - $0 >= fullReload } ?? true
            let since = full ? nil : state.newest
            let reading = Task { try await self.read(since: since, startedAt: now) }
            state.reading = reading
            return reading
        }
        if let wait {
            do {
                try await wait.value
            } catch {
                // Without a copy nothing can be said (a database outage: 503); with one, the
                // last copy answers until a read succeeds.
                if state.withLockedValue({ $0.readAt == nil }) { throw error }
            }
        }
        return state.withLockedValue { $0.lines[accountID] }
    }

    private func read(since: Date?, startedAt: Duration) async throws {
        do {
            let (lines, newest) = try await store.changes(since: since)
            state.withLockedValue { state in
                if since == nil {
                    state.lines = lines
                    state.fullAt = startedAt
                } else {
                    // Replaced, not joined: `tokens unrevoke` moves a line back.
                    state.lines.merge(lines) { $1 }
                }
                state.noted = state.noted.filter { startedAt - $0.value.at < ttl * 2 }
                for (account, note) in state.noted { state.lines[account] = max(state.lines[account] ?? note.line, note.line) }
                state.newest = newest ?? state.newest
                state.readAt = startedAt
                state.reading = nil
            }
        } catch {
            state.withLockedValue { $0.reading = nil }
            throw error
        }
    }

    /// Records that this process just took `accountID`'s revocation back: its tokens pass from
    /// the next request. (A read that started before the change committed may bring the old line
    /// back until the next read, within ``ttl``.)
    func forget(_ accountID: String) {
        state.withLockedValue { state in
            state.noted[accountID] = nil
            state.lines[accountID] = nil
        }
    }

    /// Records a revocation this process just made, so it holds from the next request.
    func note(_ accountID: String, _ line: Date) {
        let now = clock.uptime()
        state.withLockedValue { state in
            state.noted[accountID] = (line, now)
            state.lines[accountID] = max(state.lines[accountID] ?? line, line)
        }
    }
}
