import Crypto
import Foundation
import JWTKit
import SyncCore
@_spi(FixedExpiryValidationTime) @_spi(DisableValidityCheck) import X509

/// Verifies StoreKit 2 JWS: signed transactions, signed renewal info and App Store Server
/// Notifications V2 (docs/STOREKIT.md, "The checks").
///
/// A token is accepted only when all of these hold, checked in this order (cheapest first, so a
/// forged token costs one signature check and no chain work):
/// 1. it is a compact JWS whose header and payload decode, and its `x5c` header holds three DER
///    certificates (else ``StoreKitVerificationError/malformed(_:)`` or `untrustedChain`);
/// 2. its `alg` is `ES256` (else ``StoreKitVerificationError/unsupportedAlgorithm(_:)``);
/// 3. the signature verifies with the leaf certificate's P-256 key (else ``StoreKitVerificationError/badSignature``);
/// 4. the certificates (leaf, intermediate, root) chain to a configured trusted root under
///    RFC 5280, with Apple's policy OIDs on leaf and intermediate
///    (else ``StoreKitVerificationError/untrustedChain(_:)``), every certificate valid at the payload's
///    `signedDate` (else ``StoreKitVerificationError/certificateExpired``). Chains that verified are
///    cached with their validity, and so are chains that failed, so each chain is built once;
/// 5. the bundle id, the app Apple id (when configured and carried) and the environment match the
///    configuration (else `wrongBundle`, `wrongApp`, `wrongEnvironment`).
///
/// Chain building and RFC 5280 checks are jwt-kit's `X5CVerifier` and swift-certificates' `Verifier`.
public struct StoreKitVerifier: Sendable {
    /// The bundle id every transaction and notification must carry.
    public let bundleID: String
    /// The environments accepted.
    public let allowedEnvironments: Set<StoreEnvironment>
    /// The app Apple id notifications must carry, when configured.
    public let appAppleID: Int64?
    /// The trusted roots.
    public let rootCertificates: [Certificate]
    private let x5cVerifier: X5CVerifier
    private let clock: any ServiceClock
    /// Chains that verified already, and ones that failed (shared by copies of this verifier).
    private let verifiedChains = VerifiedChainCache()
    /// Tokens that verified already, by their exact text (shared by copies of this verifier).
    private let verifiedTokens: VerifiedTokenCache

    /// How many certificate chains this verifier (and its copies) built and checked: the costly
    /// step, which forged tokens must not reach and repeated chains must not repeat.
    public var chainValidations: Int { verifiedChains.chainValidations }

    /// How many tokens were answered from the cache of tokens that verified before (sent again
    /// unchanged, as devices do on every sync), with no decoding and no signature check.
    public var tokenCacheHits: Int { verifiedTokens.hits }

    /// The decoder of StoreKit payloads: dates are milliseconds since 1970, possibly fractional.
    public static var payloadDecoder: JSONDecoder {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .millisecondsSince1970
        return decoder
    }

    /// Creates a verifier.
    /// - Parameters:
    ///   - rootCertificates: the trusted roots (Apple Root CA G3 in production).
    ///   - bundleID: the app's bundle id.
    ///   - allowedEnvironments: the StoreKit environments accepted.
    ///   - appAppleID: the app's Apple id, checked against notifications that carry one.
    ///   - clock: the service's clock, used only for notifications that carry no `signedDate`.
    ///   - tokenCacheCapacity: how many verified tokens are kept per generation (see
    ///     `VerifiedTokenCache`); at most twice as many are kept.
    public init(
        rootCertificates: [Certificate],
        bundleID: String,
        allowedEnvironments: Set<StoreEnvironment>,
        appAppleID: Int64? = nil,
        clock: any ServiceClock = SystemClock(),
        tokenCacheCapacity: Int = 4096
    ) throws(StoreKitVerifierConfigurationError) {
        guard !bundleID.isEmpty else { throw .emptyBundleID }
        guard !allowedEnvironments.isEmpty else { throw .noEnvironments }
        do {
            x5cVerifier = try X5CVerifier(rootCertificates: rootCertificates)
        } catch {
            throw .noRootCertificates
        }
        self.rootCertificates = rootCertificates
        self.bundleID = bundleID
        self.allowedEnvironments = allowedEnvironments
        self.appAppleID = appAppleID
        self.clock = clock
        self.verifiedTokens = VerifiedTokenCache(capacity: tokenCacheCapacity)
    }

    /// Creates a verifier from root certificate files, each DER or PEM (e.g. `AppleRootCA-G3.cer`).
    public init(
        rootCertificatePaths: [String],
        bundleID: String,
        allowedEnvironments: Set<StoreEnvironment>,
        appAppleID: Int64? = nil
    ) throws(StoreKitVerifierConfigurationError) {
        var certificates: [Certificate] = []
        for path in rootCertificatePaths {
            let bytes: [UInt8]
            do {
                bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
            } catch {
                throw .unreadableCertificate(source: path, reason: "\(error)")
            }
            certificates.append(try Self.certificate(fromDERorPEM: bytes, source: path))
        }
        try self.init(
            rootCertificates: certificates, bundleID: bundleID,
            allowedEnvironments: allowedEnvironments, appAppleID: appAppleID)
    }

    /// Parses one certificate given as DER or PEM bytes.
    public static func certificate(
        fromDERorPEM bytes: [UInt8], source: String
    ) throws(StoreKitVerifierConfigurationError) -> Certificate {
        do {
            let text = String(decoding: bytes, as: UTF8.self)
            if text.contains("-----BEGIN") {
                return try Certificate(pemEncoded: text)
            }
            return try Certificate(derEncoded: bytes)
        } catch {
            throw .unreadableCertificate(source: source, reason: "\(error)")
        }
    }

    /// Verifies a StoreKit 2 signed transaction (`signed_transaction` of a report).
    public func verifyTransaction(_ jws: String) async throws(StoreKitVerificationError) -> VerifiedTransaction {
        let (payload, environment) = try await verifiedPayload(jws, as: JWSTransactionPayload.self)
        return VerifiedTransaction(payload: payload, environment: environment, jws: jws)
    }

    /// Verifies a signed renewal info (no bundle id is carried, so it is not checked).
    public func verifyRenewalInfo<Payload: StoreKitSignedPayload>(
        _ jws: String, as _: Payload.Type = JWSRenewalInfoPayload.self
    ) async throws(StoreKitVerificationError) -> Payload {
        try await verifiedPayload(jws, as: Payload.self).payload
    }

    /// Verifies an App Store Server Notification V2 `signedPayload`.
    public func verifyNotification<Payload: StoreKitSignedPayload>(
        _ signedPayload: String, as _: Payload.Type = NotificationPayload.self
    ) async throws(StoreKitVerificationError) -> Payload {
        try await verifiedPayload(signedPayload, as: Payload.self).payload
    }

    /// Verifies any StoreKit JWS and returns its payload.
    public func verify<Payload: StoreKitSignedPayload>(
        _ jws: String, as _: Payload.Type
    ) async throws(StoreKitVerificationError) -> Payload {
        try await verifiedPayload(jws, as: Payload.self).payload
    }

    // MARK: - Steps

    /// A JWS header: the algorithm and the certificate chain.
    struct Header: Decodable, Sendable {
        var alg: String?
        var x5c: [String]?
    }

    private func verifiedPayload<Payload: StoreKitSignedPayload>(
        _ jws: String, as _: Payload.Type
    ) async throws(StoreKitVerificationError) -> (payload: Payload, environment: StoreEnvironment) {
        guard Payload.keepsVerifiedTokens else { return try await verifiedPayloadUncached(jws) }
        let tokenKey = VerifiedTokenCache.key(for: jws, as: Payload.self)
        if let known = verifiedTokens.entry(for: tokenKey), let payload = known.payload as? Payload {
            ServiceMetrics.tokenCacheHits.increment()
            return (payload, known.environment)
        }
        let verified: (payload: Payload, environment: StoreEnvironment) = try await verifiedPayloadUncached(jws)
        // Only a token checked at its own signed date: one checked at the clock's time could
        // verify now and not later.
        if verified.payload.signedAt != nil {
            verifiedTokens.insert(.init(payload: verified.payload, environment: verified.environment), for: tokenKey)
        }
        return verified
    }

    private func verifiedPayloadUncached<Payload: StoreKitSignedPayload>(
        _ jws: String
    ) async throws(StoreKitVerificationError) -> (payload: Payload, environment: StoreEnvironment) {
        let parts = Self.compactParts(jws)
        guard parts.count == 3 else {
            throw .malformed("expected 3 dot-separated parts, found \(parts.count)")
        }
        // Every JWS of a chain carries the same header (4-6 KiB, the chain in base64): it is
        // decoded once, then found by its text.
        guard let header = verifiedChains.header(parts[0], decode: { segment in
            Self.base64URLDecoded(segment).flatMap { try? JSONDecoder().decode(Header.self, from: $0) }
        }) else {
            throw .malformed("the header does not decode")
        }
        guard header.alg == "ES256" else { throw .unsupportedAlgorithm(header.alg) }
        guard let payloadData = Self.base64URLDecoded(parts[1]) else {
            throw .malformed("the payload is not base64url")
        }
        let claims: Payload
        do {
            claims = try Self.payloadDecoder.decode(Payload.self, from: payloadData)
        } catch {
            throw .malformed("the payload does not decode: \(error)")
        }
        guard !parts[2].isEmpty, Self.base64URLDecoded(parts[2]) != nil else {
            throw .malformed("the signature is missing or not base64url")
        }
        guard let x5c = header.x5c else { throw .untrustedChain("no x5c header") }
        guard x5c.count == 3 else {
            throw .untrustedChain("x5c holds \(x5c.count) certificates, expected 3")
        }
        let validationTime = claims.signedAt ?? clock.now()
        if let known = verifiedChains.entry(for: x5c, at: validationTime) {
            // The chain verified before and is valid at this date: only the signature is left.
            guard Self.signatureIsValid(parts, key: known.leafKey) else { throw .badSignature }
            return (claims, try checkClaims(claims))
        }
        var certificates: [Certificate] = []
        for encoded in x5c {
            guard let der = Data(base64Encoded: encoded),
                let certificate = try? Certificate(derEncoded: [UInt8](der))
            else {
                throw .malformed("an x5c entry is not a base64 DER certificate")
            }
            certificates.append(certificate)
        }
        // The signature first: a token that the leaf did not sign costs no chain work.
        guard let leafKey = P256.Signing.PublicKey(certificates[0].publicKey) else {
            throw .untrustedChain("the leaf certificate's key is not a P-256 key")
        }
        guard Self.signatureIsValid(parts, key: leafKey) else { throw .badSignature }
        if let reason = verifiedChains.failure(for: x5c) { throw .untrustedChain(reason) }
        verifiedChains.countValidation()
        ServiceMetrics.chainValidations.increment()
        do {
            try await verifyChain(certificates, at: validationTime)
        } catch .untrustedChain(let reason) {
            verifiedChains.insertFailure(x5c: x5c, reason: reason)
            throw .untrustedChain(reason)
        }
        // The chain holds and the leaf signed the token: that is what jwt-kit's
        // `X5CVerifier.verifyJWS` checks too, which would build the chain a second time.
        verifiedChains.insert(x5c: x5c, certificates: certificates)
        return (claims, try checkClaims(claims))
    }

    /// Chain to a trusted root with Apple's OIDs at `date`; when that fails, tells an expired
    /// chain (which would verify ignoring validity periods) from an untrusted one.
    private func verifyChain(_ certificates: [Certificate], at date: Date) async throws(StoreKitVerificationError) {
        let atDate: CertificateValidationResult
        let ignoringTime: CertificateValidationResult
        do {
            atDate = try await x5cVerifier.verifyChain(certificates: certificates) {
                AppleCertificatePolicy()
                RFC5280Policy(fixedExpiryValidationTime: date)
            }
            guard case .couldNotValidate(let failures) = atDate else { return }
            ignoringTime = try await x5cVerifier.verifyChain(certificates: certificates) {
                AppleCertificatePolicy()
                RFC5280Policy.withValidityCheckDisabled()
            }
            if case .validCertificate = ignoringTime { throw StoreKitVerificationError.certificateExpired }
            let reasons = failures.map { $0.policyFailureReason.description }
            throw StoreKitVerificationError.untrustedChain(
                reasons.isEmpty ? "no chain to a trusted root" : reasons.joined(separator: "; "))
        } catch let error as StoreKitVerificationError {
            throw error
        } catch {
            throw .untrustedChain("\(error)")
        }
    }

    /// Bundle, app and environment, in that order.
    private func checkClaims(_ payload: some StoreKitSignedPayload) throws(StoreKitVerificationError) -> StoreEnvironment {
        let rawEnvironment = payload.signedEnvironment
        let environment = rawEnvironment.flatMap { StoreEnvironment(rawValue: $0.lowercased()) }
        if type(of: payload).carriesBundleID, payload.signedBundleID != bundleID {
            throw .wrongBundle(payload.signedBundleID)
        }
        if let appAppleID {
            if let carried = payload.signedAppAppleID, carried != appAppleID {
                throw .wrongApp(carried)
            }
            if payload.signedAppAppleID == nil, type(of: payload).carriesAppAppleID, environment == .production {
                throw .wrongApp(nil)
            }
        }
        guard let environment, allowedEnvironments.contains(environment) else {
            throw .wrongEnvironment(rawEnvironment)
        }
        return environment
    }

    /// The dot-separated parts of a compact JWS (empty ones included), found on bytes: splitting
    /// the String compares Characters, and a generic byte split calls a closure per byte, both a
    /// visible share of a signed sync (docs/PERFORMANCE.md, *In the code*).
    static func compactParts(_ jws: String) -> [Substring] {
        var text = jws
        // The byte offsets of the dots, found with memchr.
        let dots: [Int] = text.withUTF8 { bytes in
            guard let base = bytes.baseAddress else { return [] }
            var found: [Int] = []
            var offset = 0
            while offset < bytes.count,
                let dot = memchr(base + offset, Int32(UInt8(ascii: ".")), bytes.count - offset)
            {
                let at = UnsafeRawPointer(dot) - UnsafeRawPointer(base)
                found.append(at)
                offset = at + 1
            }
            return found
        }
        let utf8 = jws.utf8
        var parts: [Substring] = []
        parts.reserveCapacity(dots.count + 1)
        var start = utf8.startIndex
        for dot in dots {
            let end = utf8.index(utf8.startIndex, offsetBy: dot)
            parts.append(Substring(utf8[start..<end]))
            start = utf8.index(after: end)
        }
        parts.append(Substring(utf8[start...]))
        return parts
    }

    /// ES256 over `header.payload`: a raw 64-byte `r || s` signature, as JWS encodes it.
    private static func signatureIsValid(_ parts: [Substring], key: P256.Signing.PublicKey) -> Bool {
        guard let raw = base64URLDecoded(parts[2]), raw.count == 64,
            let signature = try? P256.Signing.ECDSASignature(rawRepresentation: raw)
        else { return false }
        var signingInput = Data(capacity: parts[0].utf8.count + 1 + parts[1].utf8.count)
        signingInput.append(contentsOf: parts[0].utf8)
        signingInput.append(UInt8(ascii: "."))
        signingInput.append(contentsOf: parts[1].utf8)
        return key.isValidSignature(signature, for: signingInput)
    }

    /// Decodes unpadded base64url (on bytes: Foundation's string replacing is a visible cost).
    static func base64URLDecoded(_ text: Substring) -> Data? {
        var bytes = Array(text.utf8)
        for index in bytes.indices {
            switch bytes[index] {
            case UInt8(ascii: "-"): bytes[index] = UInt8(ascii: "+")
            case UInt8(ascii: "_"): bytes[index] = UInt8(ascii: "/")
            default: break
            }
        }
        let remainder = bytes.count % 4
        if remainder == 1 { return nil }
        if remainder > 0 { bytes.append(contentsOf: repeatElement(UInt8(ascii: "="), count: 4 - remainder)) }
        return Data(base64Encoded: Data(bytes))
    }
}
