import Crypto
import Foundation
import NIOConcurrencyHelpers
import SyncCore

/// StoreKit JWS that verified already, by the SHA-256 of their exact text, with what
/// verification returned: devices send the same signed transactions again and again (every
/// launch and every sync of `Transaction.currentEntitlements`), and a token seen before then
/// costs one hash instead of a base64 and JSON decode and an ECDSA verification.
///
/// Sound because verifying a token is a pure function of its text and of the verifier's
/// configuration (roots, bundle id, app Apple id, environments), which never changes for a
/// verifier (this cache belongs to one): the chain is checked at the payload's `signedDate`,
/// never at the current time. Tokens without a `signedDate` (validated at the clock's time) are
/// never kept, and neither are tokens that failed: anyone can send new ones, and a failure costs
/// one signature check already. SHA-256 makes a different token with the same key infeasible.
///
/// Bounded by two generations: new entries go to the current one; when it is full it becomes the
/// previous one (the older previous one is dropped), and a hit in the previous generation moves
/// the entry back to the current one. Tokens in use stay; a flood of new ones costs memory for at
/// most `2 × capacity` entries.
final class VerifiedTokenCache: Sendable {
    struct Key: Hashable, Sendable {
        var digest: SHA256Digest
        /// The payload type the token was decoded as (a transaction and a renewal info are
        /// different types; a token is only answered as the type it was verified as).
        var payloadType: ObjectIdentifier
    }

    struct Entry: Sendable {
        var payload: any StoreKitSignedPayload
        var environment: StoreEnvironment
    }

    let capacity: Int
    private struct Generations {
        var current: [Key: Entry] = [:]
        var previous: [Key: Entry] = [:]
        var hits = 0
    }
    private let generations = NIOLockedValueBox(Generations())

    init(capacity: Int) {
        self.capacity = max(1, capacity)
    }

    /// The key of `jws` verified as `payloadType`.
    static func key(for jws: String, as payloadType: Any.Type) -> Key {
        var text = jws
        let digest = text.withUTF8 { SHA256.hash(data: UnsafeRawBufferPointer($0)) }
        return Key(digest: digest, payloadType: ObjectIdentifier(payloadType))
    }

    /// What verifying the token of `key` returned before, if it verified and is still kept.
    func entry(for key: Key) -> Entry? {
        let (entry, dropped) = generations.withLockedValue { state -> (Entry?, [Key: Entry]) in
            if let entry = state.current[key] {
                state.hits += 1
                return (entry, [:])
            }
            guard let entry = state.previous.removeValue(forKey: key) else { return (nil, [:]) }
            state.hits += 1
            return (entry, Self.insert(entry, for: key, into: &state, capacity: capacity))
        }
        // A generation dropped by moving the entry is freed here, after the lock is released.
        withExtendedLifetime(dropped) {}
        return entry
    }

    /// Keeps what verifying the token of `key` returned.
    func insert(_ entry: Entry, for key: Key) {
        let dropped = generations.withLockedValue { Self.insert(entry, for: key, into: &$0, capacity: capacity) }
        // Freed here, after the lock is released.
        withExtendedLifetime(dropped) {}
    }

    /// How many lookups were answered from this cache.
    var hits: Int { generations.withLockedValue { $0.hits } }

    /// Inserts into the current generation; when it is full it becomes the previous one, and the
    /// generation that was previous is returned for the caller to free outside the lock.
    private static func insert(_ entry: Entry, for key: Key, into state: inout Generations, capacity: Int) -> [Key: Entry] {
        var dropped: [Key: Entry] = [:]
        if state.current.count >= capacity, state.current[key] == nil {
            dropped = state.previous
            state.previous = state.current
            state.current = [:]
            state.current.reserveCapacity(capacity)
        }
        state.current[key] = entry
        return dropped
    }
}
