import Crypto
import Foundation
import NIOConcurrencyHelpers
import X509

/// Certificate chains that already verified, so that the next JWS signed by the same chain costs
/// one ECDSA verification instead of building and checking the chain twice (the chain checks
/// are most of the cost of a signed report: docs/PERFORMANCE.md, *In the code*).
///
/// An entry is added only after a chain passed every check of ``StoreKitVerifier`` (trusted root,
/// Apple's policy OIDs, RFC 5280) at some instant. Those checks do not depend on time except for
/// the validity periods, so an entry keeps the intersection of its certificates' periods and is
/// used only for a `signedDate` inside it; anything else takes the full path again, which gives
/// the precise error. The key is the exact `x5c` header text, so a different chain (or one byte
/// changed) never matches.
final class VerifiedChainCache: Sendable {
    struct Entry: Sendable {
        /// The leaf's key, which signs the JWS.
        var leafKey: P256.Signing.PublicKey
        /// When every certificate of the chain is valid.
        var validity: ClosedRange<Date>
    }

    /// Apple signs with a handful of chains at a time; a bound keeps forged-chain floods from
    /// growing memory (only verified chains are added anyway).
    static let capacity = 32

    private let entries = NIOLockedValueBox<[String: Entry]>([:])
    /// Chains that did not lead to a trusted root even ignoring validity periods (a failure
    /// that no date changes), with the reason; bounded like the verified ones, but larger, since
    /// anyone can send new ones.
    private let failures = NIOLockedValueBox<[String: String]>([:])
    static let failureCapacity = 1024
    private let builds = NIOLockedValueBox(0)
    /// Decoded JWS headers by their base64url text: a header is a pure function of that text, so
    /// any header that decoded (even of a chain that fails) may be kept; bounded like the failures.
    private let headers = NIOLockedValueBox<[Substring: StoreKitVerifier.Header]>([:])
    static let headerCapacity = 256

    /// The header whose base64url text is `segment`: from the cache, or `decode`d and kept.
    func header(_ segment: Substring, decode: (Substring) -> StoreKitVerifier.Header?) -> StoreKitVerifier.Header? {
        if let known = headers.withLockedValue({ $0[segment] }) { return known }
        guard let header = decode(segment) else { return nil }
        // A copy of the text, not a slice that would keep the whole token alive.
        let key = Substring(String(segment))
        headers.withLockedValue { headers in
            if headers.count >= Self.headerCapacity, headers[key] == nil { headers.removeAll(keepingCapacity: true) }
            headers[key] = header
        }
        return header
    }

    /// How many chains were built and checked (not answered from this cache).
    var chainValidations: Int { builds.withLockedValue { $0 } }

    func countValidation() {
        builds.withLockedValue { $0 += 1 }
    }

    /// Why the chain `x5c` failed before, when it did.
    func failure(for x5c: [String]) -> String? {
        let key = x5c.joined(separator: ",")
        return failures.withLockedValue { $0[key] }
    }

    /// Remembers that the chain `x5c` does not lead to a trusted root.
    func insertFailure(x5c: [String], reason: String) {
        let key = x5c.joined(separator: ",")
        failures.withLockedValue { failures in
            if failures.count >= Self.failureCapacity, failures[key] == nil { failures.removeAll(keepingCapacity: true) }
            failures[key] = reason
        }
    }

    /// The verified chain `x5c`, when `date` is inside its validity.
    func entry(for x5c: [String], at date: Date) -> Entry? {
        let key = x5c.joined(separator: ",")
        return entries.withLockedValue { entries in
            guard let entry = entries[key], entry.validity.contains(date) else { return nil }
            return entry
        }
    }

    /// Remembers `certificates` (leaf first), which just verified, under `x5c`.
    func insert(x5c: [String], certificates: [Certificate]) {
        guard let leaf = certificates.first, let leafKey = P256.Signing.PublicKey(leaf.publicKey),
            let notBefore = certificates.map(\.notValidBefore).max(),
            let notAfter = certificates.map(\.notValidAfter).min(), notBefore <= notAfter
        else { return }
        let key = x5c.joined(separator: ",")
        entries.withLockedValue { entries in
            if entries.count >= Self.capacity, entries[key] == nil { entries.removeAll(keepingCapacity: true) }
            entries[key] = Entry(leafKey: leafKey, validity: notBefore...notAfter)
        }
    }
}
