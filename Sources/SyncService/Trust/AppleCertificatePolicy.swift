import SwiftASN1
import X509

/// A swift-certificates policy requiring Apple's App Store signing policy OIDs: the leaf must carry
/// 1.2.840.113635.100.6.11.1 and the intermediate 1.2.840.113635.100.6.2.1, and the chain must be
/// exactly leaf → intermediate → root. Used next to `RFC5280Policy`, which checks everything else.
struct AppleCertificatePolicy: VerifierPolicy {
    /// Apple's "Mac App Store receipt signing" leaf policy (used for App Store JWS signing).
    static let leafOID: ASN1ObjectIdentifier = [1, 2, 840, 113_635, 100, 6, 11, 1]
    /// Apple's "Apple Worldwide Developer Relations" intermediate marker.
    static let intermediateOID: ASN1ObjectIdentifier = [1, 2, 840, 113_635, 100, 6, 2, 1]

    /// Apple marks these extensions non-critical; nothing critical is enforced here.
    let verifyingCriticalExtensions: [ASN1ObjectIdentifier] = []

    mutating func chainMeetsPolicyRequirements(chain: UnverifiedCertificateChain) async -> PolicyEvaluationResult {
        let certificates = Array(chain)
        guard certificates.count == 3 else {
            return .failsToMeetPolicy(reason: "chain has \(certificates.count) certificates, expected 3")
        }
        guard certificates[0].extensions[oid: Self.leafOID] != nil else {
            return .failsToMeetPolicy(reason: "leaf lacks Apple policy OID \(Self.leafOID)")
        }
        guard certificates[1].extensions[oid: Self.intermediateOID] != nil else {
            return .failsToMeetPolicy(reason: "intermediate lacks Apple policy OID \(Self.intermediateOID)")
        }
        return .meetsPolicy
    }
}
