import Crypto
import Foundation
import SwiftASN1
import SyncService
import X509

/// A root → intermediate → leaf P-256 chain built with swift-certificates, shaped like Apple's App
/// Store signing chain (policy OIDs on leaf and intermediate), and an ES256 JWS signer using the leaf key.
public struct TestCertificateAuthority: Sendable {
    public static let appleLeafOID: ASN1ObjectIdentifier = [1, 2, 840, 113_635, 100, 6, 11, 1]
    public static let appleIntermediateOID: ASN1ObjectIdentifier = [1, 2, 840, 113_635, 100, 6, 2, 1]
    public static let unrelatedOID: ASN1ObjectIdentifier = [1, 2, 3, 4, 5, 6]

    public let root: Certificate
    public let intermediate: Certificate
    public let leaf: Certificate
    public let leafKey: P256.Signing.PrivateKey

    /// - Parameters:
    ///   - leafPolicyOID / intermediatePolicyOID: the policy extension each carries (`nil`: none).
    ///   - leafValidity: the leaf's validity period (by default, like the others, ten years either side of `now`).
    public init(
        name: String = "subsync test",
        leafPolicyOID: ASN1ObjectIdentifier? = Self.appleLeafOID,
        intermediatePolicyOID: ASN1ObjectIdentifier? = Self.appleIntermediateOID,
        leafValidity: ClosedRange<Date>? = nil,
        now: Date = Date()
    ) throws {
        let rootKey = P256.Signing.PrivateKey()
        let intermediateKey = P256.Signing.PrivateKey()
        leafKey = P256.Signing.PrivateKey()
        let longValidity = now.addingTimeInterval(-10 * 365 * 86_400)...now.addingTimeInterval(10 * 365 * 86_400)
        let rootName = try DistinguishedName { CommonName("\(name) root"); OrganizationName("subsync") }
        let intermediateName = try DistinguishedName { CommonName("\(name) intermediate"); OrganizationName("subsync") }
        let leafName = try DistinguishedName { CommonName("\(name) leaf"); OrganizationName("subsync") }
        root = try Self.certificate(
            subject: rootName, publicKey: rootKey.publicKey, issuer: rootName, issuerKey: rootKey,
            isCA: true, policyOID: nil, validity: longValidity)
        intermediate = try Self.certificate(
            subject: intermediateName, publicKey: intermediateKey.publicKey, issuer: rootName, issuerKey: rootKey,
            isCA: true, policyOID: intermediatePolicyOID, validity: longValidity)
        leaf = try Self.certificate(
            subject: leafName, publicKey: leafKey.publicKey, issuer: intermediateName, issuerKey: intermediateKey,
            isCA: false, policyOID: leafPolicyOID, validity: leafValidity ?? longValidity)
    }

    private static func certificate(
        subject: DistinguishedName, publicKey: P256.Signing.PublicKey, issuer: DistinguishedName,
        issuerKey: P256.Signing.PrivateKey, isCA: Bool, policyOID: ASN1ObjectIdentifier?, validity: ClosedRange<Date>
    ) throws -> Certificate {
        var extensions = Certificate.Extensions()
        if isCA {
            try extensions.append(Critical(BasicConstraints.isCertificateAuthority(maxPathLength: nil)).makeCertificateExtension())
            try extensions.append(Critical(KeyUsage(keyCertSign: true)).makeCertificateExtension())
        } else {
            try extensions.append(Critical(BasicConstraints.notCertificateAuthority).makeCertificateExtension())
            try extensions.append(Critical(KeyUsage(digitalSignature: true)).makeCertificateExtension())
        }
        if let policyOID {
            // Apple's extensions carry an ASN.1 NULL and are not critical.
            try extensions.append(Certificate.Extension(oid: policyOID, critical: false, value: [0x05, 0x00]))
        }
        return try Certificate(
            version: .v3, serialNumber: Certificate.SerialNumber(), publicKey: Certificate.PublicKey(publicKey),
            notValidBefore: validity.lowerBound, notValidAfter: validity.upperBound, issuer: issuer, subject: subject,
            signatureAlgorithm: .ecdsaWithSHA256, extensions: extensions,
            issuerPrivateKey: Certificate.PrivateKey(issuerKey))
    }

    /// Base64 DER, as in an `x5c` header.
    public static func x5cEntry(_ certificate: Certificate) throws -> String {
        var serializer = DER.Serializer()
        try serializer.serialize(certificate)
        return Data(serializer.serializedBytes).base64EncodedString()
    }

    /// The full `x5c` chain: leaf, intermediate, root.
    public func x5c() throws -> [String] {
        try [leaf, intermediate, root].map(Self.x5cEntry)
    }

    /// A JWS header as JSON (keys sorted, so it is stable).
    public func header(alg: String = "ES256", x5c: [String]? = nil, extra: [String: String] = [:]) throws -> Data {
        var object: [String: Any] = ["alg": alg]
        object["x5c"] = try x5c ?? self.x5c()
        for (key, value) in extra { object[key] = value }
        return try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])
    }

    /// StoreKit's JSON of a payload: dates as milliseconds since 1970.
    public static func payloadJSON(_ payload: some Encodable) throws -> Data {
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .millisecondsSince1970
        encoder.outputFormatting = [.sortedKeys]
        return try encoder.encode(payload)
    }

    /// `base64url(header).base64url(payload)`, the signing input.
    public static func signingInput(header: Data, payload: Data) -> String {
        "\(base64URL(header)).\(base64URL(payload))"
    }

    /// An ES256 JWS of raw header and payload JSON, signed with `key` (the leaf key by default).
    public func sign(header: Data, payload: Data, key: P256.Signing.PrivateKey? = nil) throws -> String {
        let input = Self.signingInput(header: header, payload: payload)
        let signature = try (key ?? leafKey).signature(for: Data(input.utf8))
        return "\(input).\(Self.base64URL(signature.rawRepresentation))"
    }

    /// An ES256 JWS of `payload` with this chain in `x5c`.
    public func sign(_ payload: some Encodable) throws -> String {
        try sign(header: header(), payload: Self.payloadJSON(payload))
    }

    public static func base64URL(_ data: Data) -> String {
        data.base64EncodedString()
            .replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }
}
