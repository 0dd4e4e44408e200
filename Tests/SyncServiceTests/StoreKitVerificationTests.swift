import Crypto
import Foundation
import JWTKit
import SyncCore
import SyncService
import Testing
import X509
import TestSupport

@Suite("StoreKit signed-transaction verification")
struct StoreKitVerificationTests {
    static let bundleID = "com.example.subsync"
    static let signedDate = Date(timeIntervalSince1970: 1_750_000_000.5)

    static func transaction(
        bundleId: String = bundleID, environment: String = "Sandbox", signedDate: Date = signedDate
    ) -> JWSTransactionPayload {
        JWSTransactionPayload(
            transactionId: "2000000123", originalTransactionId: "2000000100", bundleId: bundleId,
            productId: "premium.monthly", purchaseDate: signedDate.addingTimeInterval(-3600),
            originalPurchaseDate: signedDate.addingTimeInterval(-86_400 * 60),
            expiresDate: signedDate.addingTimeInterval(86_400 * 30 - 3600),
            isUpgraded: false, type: "Auto-Renewable Subscription", environment: environment, signedDate: signedDate,
            webOrderLineItemId: "2000000009", inAppOwnershipType: "PURCHASED", storefront: "USA", price: 9990,
            currency: "USD")
    }

    static func verifier(
        _ authority: TestCertificateAuthority, environments: Set<StoreEnvironment> = [.sandbox], appAppleID: Int64? = nil
    ) throws -> StoreKitVerifier {
        try StoreKitVerifier(
            rootCertificates: [authority.root], bundleID: bundleID, allowedEnvironments: environments,
            appAppleID: appAppleID)
    }

    /// Runs `verifyTransaction` and returns the error code, or `nil` if it verified.
    static func code(_ verifier: StoreKitVerifier, _ jws: String) async -> String? {
        do {
            _ = try await verifier.verifyTransaction(jws)
            return nil
        } catch {
            return error.code
        }
    }

    @Test("a valid chain verifies; the report takes every field from the signed payload")
    func validChain() async throws {
        let authority = try TestCertificateAuthority()
        let payload = Self.transaction()
        let jws = try authority.sign(payload)
        let verified = try await Self.verifier(authority).verifyTransaction(jws)
        #expect(verified.payload == payload)
        #expect(verified.environment == .sandbox)
        #expect(verified.signedDate == Self.signedDate)

        let observedAt = Date(timeIntervalSince1970: 1_760_000_000)
        let report = try verified.report(reportID: "r-1", deviceID: "iphone", observedAt: observedAt)
        #expect(report == Report(
            reportID: "r-1", deviceID: "iphone", observedAt: observedAt, productID: "premium.monthly",
            originalTransactionID: "2000000100", transactionID: "2000000123",
            purchasedAt: Self.signedDate.addingTimeInterval(-3600),
            expiresAt: Self.signedDate.addingTimeInterval(86_400 * 30 - 3600), environment: .sandbox,
            signedTransaction: jws, trust: .verified(signedDate: Self.signedDate)))
    }

    @Test("revocation and upgrade come from the payload, StoreKit's reason codes map to the domain's")
    func revocationMapping() async throws {
        let authority = try TestCertificateAuthority()
        let verifier = try Self.verifier(authority)
        for (code, expected) in [(0, RevocationReason.other), (1, .developerIssue), (7, .other)] {
            var payload = Self.transaction()
            payload.revocationDate = Self.signedDate.addingTimeInterval(-60)
            payload.revocationReason = code
            payload.isUpgraded = true
            let report = try await verifier.verifyTransaction(try authority.sign(payload))
                .report(reportID: "r", deviceID: "d", observedAt: Self.signedDate)
            #expect(report.revokedAt == Self.signedDate.addingTimeInterval(-60))
            #expect(report.revocationReason == expected)
            #expect(report.isUpgraded)
        }
    }

    @Test("fractional millisecond timestamps (Xcode's test signer) decode")
    func fractionalMilliseconds() async throws {
        let authority = try TestCertificateAuthority()
        let json = """
            {"bundleId":"\(Self.bundleID)","environment":"Xcode","expiresDate":1750003600000.25,\
            "originalTransactionId":"0","productId":"premium.monthly","purchaseDate":1749999999123.456,\
            "signedDate":1750000000999.5,"transactionId":"0","type":"Auto-Renewable Subscription"}
            """
        let jws = try authority.sign(header: authority.header(), payload: Data(json.utf8))
        let verified = try await Self.verifier(authority, environments: [.xcode]).verifyTransaction(jws)
        #expect(abs(verified.signedDate.timeIntervalSince1970 - 1_750_000_000.9995) < 0.000_001)
        #expect(abs((verified.payload.purchaseDate?.timeIntervalSince1970 ?? 0) - 1_749_999_999.123456) < 0.000_001)
        #expect(verified.environment == .xcode)
    }

    @Test("a tampered payload, a tampered header and another key's signature are bad signatures")
    func badSignatures() async throws {
        let authority = try TestCertificateAuthority()
        let verifier = try Self.verifier(authority)
        let jws = try authority.sign(Self.transaction())
        let parts = jws.split(separator: ".").map(String.init)

        var tamperedPayload = Self.transaction()
        tamperedPayload.productId = "business.yearly"
        let forgedPayload = TestCertificateAuthority.base64URL(try TestCertificateAuthority.payloadJSON(tamperedPayload))
        #expect(await Self.code(verifier, "\(parts[0]).\(forgedPayload).\(parts[2])") == "bad_signature")

        let forgedHeader = TestCertificateAuthority.base64URL(try authority.header(extra: ["kid": "other"]))
        #expect(await Self.code(verifier, "\(forgedHeader).\(parts[1]).\(parts[2])") == "bad_signature")

        let otherKey = P256.Signing.PrivateKey()
        let wrongKey = try authority.sign(
            header: authority.header(), payload: TestCertificateAuthority.payloadJSON(Self.transaction()), key: otherKey)
        #expect(await Self.code(verifier, wrongKey) == "bad_signature")

        let flipped = parts[2].first == "A" ? "B" + parts[2].dropFirst() : "A" + parts[2].dropFirst()
        #expect(await Self.code(verifier, "\(parts[0]).\(parts[1]).\(flipped)") == "bad_signature")
    }

    @Test("alg none and HS256 keyed with the leaf's public key are unsupported algorithms")
    func unsupportedAlgorithms() async throws {
        let authority = try TestCertificateAuthority()
        let verifier = try Self.verifier(authority)
        let payload = try TestCertificateAuthority.payloadJSON(Self.transaction())

        let none = TestCertificateAuthority.signingInput(header: try authority.header(alg: "none"), payload: payload) + "."
        #expect(await Self.code(verifier, none) == "unsupported_algorithm")

        let hsInput = TestCertificateAuthority.signingInput(header: try authority.header(alg: "HS256"), payload: payload)
        let secret = SymmetricKey(data: Data(try authority.leaf.publicKey.serializeAsPEM().pemString.utf8))
        let mac = HMAC<SHA256>.authenticationCode(for: Data(hsInput.utf8), using: secret)
        #expect(await Self.code(verifier, hsInput + "." + TestCertificateAuthority.base64URL(Data(mac))) == "unsupported_algorithm")

        let es384 = try authority.sign(header: authority.header(alg: "ES384"), payload: payload)
        #expect(await Self.code(verifier, es384) == "unsupported_algorithm")
    }

    @Test("an untrusted root, a missing intermediate and a missing chain are untrusted chains")
    func untrustedChains() async throws {
        let trusted = try TestCertificateAuthority(name: "trusted")
        let stranger = try TestCertificateAuthority(name: "stranger")
        let verifier = try Self.verifier(trusted)
        #expect(await Self.code(verifier, try stranger.sign(Self.transaction())) == "untrusted_chain")

        let payload = try TestCertificateAuthority.payloadJSON(Self.transaction())
        let withoutIntermediate = try [trusted.leaf, trusted.root].map(TestCertificateAuthority.x5cEntry)
        let short = try trusted.sign(header: trusted.header(x5c: withoutIntermediate), payload: payload)
        #expect(await Self.code(verifier, short) == "untrusted_chain")

        // Three certificates, but the intermediate is another CA's: no path to the trusted root.
        let foreignIntermediate = try [trusted.leaf, stranger.intermediate, trusted.root].map(TestCertificateAuthority.x5cEntry)
        let mixed = try trusted.sign(header: trusted.header(x5c: foreignIntermediate), payload: payload)
        #expect(await Self.code(verifier, mixed) == "untrusted_chain")

        let noChain = try JSONSerialization.data(withJSONObject: ["alg": "ES256"])
        #expect(await Self.code(verifier, try trusted.sign(header: noChain, payload: payload)) == "untrusted_chain")
    }

    @Test("a leaf or intermediate without Apple's policy OID is an untrusted chain")
    func policyOIDs() async throws {
        let wrongLeaf = try TestCertificateAuthority(leafPolicyOID: TestCertificateAuthority.unrelatedOID)
        #expect(await Self.code(try Self.verifier(wrongLeaf), try wrongLeaf.sign(Self.transaction())) == "untrusted_chain")
        let noLeafOID = try TestCertificateAuthority(leafPolicyOID: nil)
        #expect(await Self.code(try Self.verifier(noLeafOID), try noLeafOID.sign(Self.transaction())) == "untrusted_chain")
        let wrongIntermediate = try TestCertificateAuthority(intermediatePolicyOID: TestCertificateAuthority.unrelatedOID)
        #expect(
            await Self.code(try Self.verifier(wrongIntermediate), try wrongIntermediate.sign(Self.transaction()))
                == "untrusted_chain")
        // The two OIDs swapped are not accepted either.
        let swapped = try TestCertificateAuthority(
            leafPolicyOID: TestCertificateAuthority.appleIntermediateOID,
            intermediatePolicyOID: TestCertificateAuthority.appleLeafOID)
        #expect(await Self.code(try Self.verifier(swapped), try swapped.sign(Self.transaction())) == "untrusted_chain")
    }

    @Test("a leaf not valid at the signed date is an expired certificate, whatever today's date")
    func expiredCertificate() async throws {
        let validity = Self.signedDate.addingTimeInterval(-86_400 * 30)...Self.signedDate.addingTimeInterval(-86_400)
        let expired = try TestCertificateAuthority(leafValidity: validity, now: Self.signedDate)
        #expect(await Self.code(try Self.verifier(expired), try expired.sign(Self.transaction())) == "certificate_expired")

        // Valid at the signed date is enough, even if the leaf has expired since.
        let sinceExpired = try TestCertificateAuthority(
            leafValidity: Self.signedDate.addingTimeInterval(-86_400)...Self.signedDate.addingTimeInterval(86_400),
            now: Self.signedDate)
        #expect(await Self.code(try Self.verifier(sinceExpired), try sinceExpired.sign(Self.transaction())) == nil)

        // Signed before the leaf was issued.
        let notYetValid = try TestCertificateAuthority(
            leafValidity: Self.signedDate.addingTimeInterval(86_400)...Self.signedDate.addingTimeInterval(86_400 * 30),
            now: Self.signedDate)
        #expect(await Self.code(try Self.verifier(notYetValid), try notYetValid.sign(Self.transaction())) == "certificate_expired")
    }

    @Test("once a chain has verified, later tokens with it still fail every check but the chain's own")
    func verifiedChainCache() async throws {
        let validity = Self.signedDate.addingTimeInterval(-86_400)...Self.signedDate.addingTimeInterval(86_400)
        let authority = try TestCertificateAuthority(leafValidity: validity, now: Self.signedDate)
        let verifier = try Self.verifier(authority)
        // Warm: the chain is now known.
        #expect(await Self.code(verifier, try authority.sign(Self.transaction())) == nil)
        #expect(await Self.code(verifier, try authority.sign(Self.transaction())) == nil)

        let parts = try authority.sign(Self.transaction()).split(separator: ".").map(String.init)
        var forgedClaims = Self.transaction()
        forgedClaims.productId = "business.yearly"
        let tampered = parts[0] + "." + TestCertificateAuthority.base64URL(try TestCertificateAuthority.payloadJSON(forgedClaims)) + "." + parts[2]
        #expect(await Self.code(verifier, tampered) == "bad_signature")
        let otherKey = try authority.sign(
            header: try authority.header(), payload: try TestCertificateAuthority.payloadJSON(Self.transaction()), key: P256.Signing.PrivateKey())
        #expect(await Self.code(verifier, otherKey) == "bad_signature")
        let truncated = parts[0] + "." + parts[1] + "." + String(parts[2].dropLast(4))
        #expect(await Self.code(verifier, truncated) != nil)
        #expect(await Self.code(verifier, try authority.sign(Self.transaction(bundleId: "com.example.other"))) == "wrong_bundle")
        #expect(await Self.code(verifier, try authority.sign(Self.transaction(environment: "Production"))) == "wrong_environment")
        // Outside the leaf's validity the cached chain does not apply: the full path says why.
        let late = Self.transaction(signedDate: Self.signedDate.addingTimeInterval(2 * 86_400))
        #expect(await Self.code(verifier, try authority.sign(late)) == "certificate_expired")
        // The same chain with another root: a different x5c, so never the cached entry.
        let stranger = try TestCertificateAuthority(name: "stranger", leafValidity: validity, now: Self.signedDate)
        #expect(await Self.code(verifier, try stranger.sign(Self.transaction())) == "untrusted_chain")
    }

    @Test("a token sent again is answered from the cache of verified tokens; a token one byte apart is checked in full")
    func verifiedTokenCache() async throws {
        let authority = try TestCertificateAuthority()
        let verifier = try Self.verifier(authority)
        let jws = try authority.sign(Self.transaction())
        let first = try await verifier.verifyTransaction(jws)
        #expect(verifier.tokenCacheHits == 0)
        let again = try await verifier.verifyTransaction(jws)
        #expect(again == first)
        #expect(verifier.tokenCacheHits == 1)

        // One character changed in each part (the same length, still base64url): never the cached answer.
        func changed(_ token: String, part: Int) -> String {
            var parts = token.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
            let index = parts[part].index(parts[part].startIndex, offsetBy: parts[part].count / 2)
            let replacement: Character = parts[part][index] == "A" ? "B" : "A"
            parts[part].replaceSubrange(index...index, with: String(replacement))
            return parts.joined(separator: ".")
        }
        #expect(await Self.code(verifier, changed(jws, part: 2)) == "bad_signature")
        #expect(await Self.code(verifier, changed(jws, part: 1)) != nil)
        #expect(await Self.code(verifier, changed(jws, part: 0)) != nil)
        #expect(verifier.tokenCacheHits == 1)

        // The same text verified as another payload type is not answered from the transaction's entry.
        _ = try? await verifier.verifyRenewalInfo(jws)
        #expect(verifier.tokenCacheHits == 1)

        // A verifier with another configuration has its own cache: the token is refused there.
        let production = try Self.verifier(authority, environments: [.production])
        #expect(await Self.code(production, jws) == "wrong_environment")
        #expect(await Self.code(production, jws) == "wrong_environment")
        #expect(production.tokenCacheHits == 0)
    }

    @Test("the token cache is bounded, keeps the tokens in use, and never keeps one checked at the clock's time")
    func verifiedTokenCacheBounds() async throws {
        let authority = try TestCertificateAuthority()
        let verifier = try StoreKitVerifier(
            rootCertificates: [authority.root], bundleID: Self.bundleID, allowedEnvironments: [.sandbox], tokenCacheCapacity: 2)
        var tokens: [String] = []
        for index in 0..<5 {
            var payload = Self.transaction()
            payload.transactionId = "20000001\(index)"
            tokens.append(try authority.sign(payload))
        }
        for token in tokens { _ = try await verifier.verifyTransaction(token) }
        #expect(verifier.tokenCacheHits == 0)
        // Two generations of two: the first two are gone, the last three kept ({2, 3} then {4}).
        _ = try await verifier.verifyTransaction(tokens[0])
        #expect(verifier.tokenCacheHits == 0)
        _ = try await verifier.verifyTransaction(tokens[4])
        #expect(verifier.tokenCacheHits == 1)
        // tokens[0] came back into the newest generation; tokens[2] is found in the older one.
        _ = try await verifier.verifyTransaction(tokens[2])
        #expect(verifier.tokenCacheHits == 2)
        _ = try await verifier.verifyTransaction(tokens[1])
        #expect(verifier.tokenCacheHits == 2)

        // A payload without signedDate is checked at the clock's time: verified in full every time.
        let undated = try authority.sign(
            header: authority.header(), payload: Data(#"{"bundleId":"\#(Self.bundleID)","environment":"Sandbox"}"#.utf8))
        let hits = verifier.tokenCacheHits
        _ = try await verifier.verify(undated, as: UndatedPayload.self)
        _ = try await verifier.verify(undated, as: UndatedPayload.self)
        #expect(verifier.tokenCacheHits == hits)
        // Notifications (each handled once, carrying whole JWS) are never kept.
        let json = #"{"notificationType":"TEST","notificationUUID":"u-2","version":"2.0","signedDate":1750000000000,"data":{"bundleId":"\#(Self.bundleID)","environment":"Sandbox"}}"#
        let notification = try authority.sign(header: authority.header(), payload: Data(json.utf8))
        _ = try await verifier.verifyNotification(notification)
        _ = try await verifier.verifyNotification(notification)
        #expect(verifier.tokenCacheHits == hits)
    }

    /// A signed payload whose `signedDate` may be missing (as a notification's may).
    struct UndatedPayload: StoreKitSignedPayload, Codable {
        var bundleId: String
        var environment: String
        var signedDate: Date?
        var signedAt: Date? { signedDate }
        var signedBundleID: String? { bundleId }
        var signedEnvironment: String? { environment }
    }

    @Test("another bundle id and a disallowed or unknown environment are rejected")
    func bundleAndEnvironment() async throws {
        let authority = try TestCertificateAuthority()
        let verifier = try Self.verifier(authority, environments: [.production])
        #expect(await Self.code(verifier, try authority.sign(Self.transaction(bundleId: "com.example.other", environment: "Production"))) == "wrong_bundle")
        #expect(await Self.code(verifier, try authority.sign(Self.transaction(environment: "Sandbox"))) == "wrong_environment")
        #expect(await Self.code(verifier, try authority.sign(Self.transaction(environment: "LocalTesting"))) == "wrong_environment")
        #expect(await Self.code(verifier, try authority.sign(Self.transaction(environment: "Production"))) == nil)
        let both = try Self.verifier(authority, environments: [.production, .sandbox])
        #expect(await Self.code(both, try authority.sign(Self.transaction(environment: "Sandbox"))) == nil)
    }

    @Test("malformed tokens are malformed")
    func malformed() async throws {
        let authority = try TestCertificateAuthority()
        let verifier = try Self.verifier(authority)
        let notJSON = try authority.sign(header: authority.header(), payload: Data("not json".utf8))
        let noSignature = TestCertificateAuthority.signingInput(
            header: try authority.header(), payload: try TestCertificateAuthority.payloadJSON(Self.transaction())) + "."
        let noSignedDate = try authority.sign(header: authority.header(), payload: Data(#"{"bundleId":"x"}"#.utf8))
        let badCertificate = try authority.sign(
            header: authority.header(x5c: ["bm90IGEgY2VydA==", "AA==", "AA=="]),
            payload: TestCertificateAuthority.payloadJSON(Self.transaction()))
        for token in ["", "a.b.c", "a.b.c.d", "onlyone", notJSON, noSignature, noSignedDate, badCertificate] {
            #expect(await Self.code(verifier, token) == "malformed", "\(token.prefix(40))")
        }
    }

    @Test("a verified transaction without the fields a report needs does not make a report")
    func incompleteTransaction() async throws {
        let authority = try TestCertificateAuthority()
        let json = #"{"bundleId":"\#(Self.bundleID)","environment":"Sandbox","signedDate":1750000000000}"#
        let verified = try await Self.verifier(authority)
            .verifyTransaction(try authority.sign(header: authority.header(), payload: Data(json.utf8)))
        #expect(throws: StoreKitVerificationError.self) {
            try verified.report(reportID: "r", deviceID: "d", observedAt: Self.signedDate)
        }
    }

    @Test("every error has its stable code")
    func codes() {
        let cases: [(StoreKitVerificationError, String)] = [
            (.badSignature, "bad_signature"), (.untrustedChain(""), "untrusted_chain"), (.wrongBundle(nil), "wrong_bundle"),
            (.wrongEnvironment(nil), "wrong_environment"), (.certificateExpired, "certificate_expired"),
            (.malformed(""), "malformed"), (.unsupportedAlgorithm(nil), "unsupported_algorithm"), (.wrongApp(nil), "wrong_app"),
            (.environmentMismatch(nil, nil), "environment_mismatch"),
        ]
        for (error, code) in cases { #expect(error.code == code) }
    }

    @Test("configuration: roots are required, and load from DER or PEM files")
    func configuration() async throws {
        #expect(throws: StoreKitVerifierConfigurationError.noRootCertificates) {
            try StoreKitVerifier(rootCertificates: [], bundleID: Self.bundleID, allowedEnvironments: [.sandbox])
        }
        let authority = try TestCertificateAuthority()
        #expect(throws: StoreKitVerifierConfigurationError.emptyBundleID) {
            try StoreKitVerifier(rootCertificates: [authority.root], bundleID: "", allowedEnvironments: [.sandbox])
        }
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("subsync-storekit-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let pem = directory.appendingPathComponent("root.pem")
        try Data(authority.root.serializeAsPEM().pemString.utf8).write(to: pem)
        let other = try TestCertificateAuthority(name: "other")
        let der = directory.appendingPathComponent("other.der")
        try Data(base64Encoded: TestCertificateAuthority.x5cEntry(other.root))?.write(to: der)
        let verifier = try StoreKitVerifier(
            rootCertificatePaths: [der.path, pem.path], bundleID: Self.bundleID, allowedEnvironments: [.sandbox])
        #expect(await Self.code(verifier, try authority.sign(Self.transaction())) == nil)
        #expect(await Self.code(verifier, try other.sign(Self.transaction())) == nil)
        #expect(throws: StoreKitVerifierConfigurationError.self) {
            try StoreKitVerifier(
                rootCertificatePaths: [directory.appendingPathComponent("missing.pem").path], bundleID: Self.bundleID,
                allowedEnvironments: [.sandbox])
        }
    }

    @Test("notifications and renewal info signed by our CA verify with the same scheme")
    func notificationsAndRenewalInfo() async throws {
        let authority = try TestCertificateAuthority()
        let json = """
            {"notificationType":"REFUND","notificationUUID":"u-1","version":"2.0","signedDate":1750000000000,\
            "data":{"bundleId":"\(Self.bundleID)","appAppleId":42,"environment":"Production","signedTransactionInfo":"x"}}
            """
        let jws = try authority.sign(header: authority.header(), payload: Data(json.utf8))
        let verifier = try Self.verifier(authority, environments: [.production], appAppleID: 42)
        let notification = try await verifier.verifyNotification(jws)
        #expect(notification.notificationType == "REFUND")
        #expect(notification.data?.signedTransactionInfo == "x")
        let otherApp = try Self.verifier(authority, environments: [.production], appAppleID: 43)
        await #expect(throws: StoreKitVerificationError.wrongApp(42)) { try await otherApp.verifyNotification(jws) }

        let renewal = try authority.sign(
            header: authority.header(),
            payload: Data(#"{"environment":"Sandbox","signedDate":1750000000000,"autoRenewStatus":1,"isInBillingRetryPeriod":false}"#.utf8))
        let info = try await Self.verifier(authority).verifyRenewalInfo(renewal)
        #expect(info.autoRenewStatus == 1)
    }
}

/// Apple's published test material (App Store Server Library): every expectation of its README.
@Suite("StoreKit verification against Apple's test material")
struct StoreKitAppleTestMaterialTests {
    static let directory = TestPackage.fixture("apple-app-store-server-library")

    static func file(_ relativePath: String) throws -> Data {
        let url = directory.appendingPathComponent(relativePath)
        guard let data = FileManager.default.contents(atPath: url.path) else {
            throw MissingTestData(path: url.path)
        }
        return data
    }

    struct MissingTestData: Error, CustomStringConvertible {
        var path: String
        var description: String { "Apple's test material is missing: \(path) (expected in Tests/Fixtures)" }
    }

    static func signed(_ name: String) throws -> String {
        String(decoding: try file("mock_signed_data/\(name)"), as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    static func verifier(
        bundleID: String = "com.example", environments: Set<StoreEnvironment> = [.sandbox], appAppleID: Int64? = nil
    ) throws -> StoreKitVerifier {
        let root = try StoreKitVerifier.certificate(fromDERorPEM: [UInt8](try file("certs/testCA.der")), source: "testCA.der")
        return try StoreKitVerifier(
            rootCertificates: [root], bundleID: bundleID, allowedEnvironments: environments, appAppleID: appAppleID)
    }

    @Test("testNotification verifies in Sandbox, not in Production, not for another app Apple id")
    func testNotification() async throws {
        let jws = try Self.signed("testNotification")
        let notification = try await Self.verifier().verifyNotification(jws)
        #expect(notification.notificationType == "TEST")
        #expect(notification.data?.environment == "Sandbox")
        #expect(try await Self.verifier(appAppleID: 1234).verifyNotification(jws).data?.appAppleId == 1234)
        await #expect(throws: StoreKitVerificationError.wrongEnvironment("Sandbox")) {
            try await Self.verifier(environments: [.production]).verifyNotification(jws)
        }
        await #expect(throws: StoreKitVerificationError.wrongApp(1234)) {
            try await Self.verifier(appAppleID: 1235).verifyNotification(jws)
        }
    }

    @Test("transactionInfo verifies, with its signed date")
    func transactionInfo() async throws {
        let verified = try await Self.verifier().verifyTransaction(try Self.signed("transactionInfo"))
        #expect(verified.payload.bundleId == "com.example")
        #expect(verified.environment == .sandbox)
        #expect(verified.signedDate == Date(timeIntervalSince1970: 1_672_956_154))
    }

    @Test("renewalInfo verifies")
    func renewalInfo() async throws {
        let info = try await Self.verifier().verifyRenewalInfo(try Self.signed("renewalInfo"))
        #expect(info.environment == "Sandbox")
        #expect(info.signedDate == Date(timeIntervalSince1970: 1_672_956_154))
    }

    @Test("wrongBundleId is rejected for com.example and any other bundle id")
    func wrongBundleID() async throws {
        let jws = try Self.signed("wrongBundleId")
        for bundle in ["com.example", "com.example.other"] {
            await #expect(throws: StoreKitVerificationError.wrongBundle("com.example.wrong")) {
                try await Self.verifier(bundleID: bundle).verifyNotification(jws)
            }
        }
    }

    @Test("missingX5CHeaderClaim is rejected as a verification failure")
    func missingX5C() async throws {
        let jws = try Self.signed("missingX5CHeaderClaim")
        await #expect(throws: StoreKitVerificationError.untrustedChain("no x5c header")) {
            try await Self.verifier().verifyNotification(jws)
        }
    }

    @Test("a.b.c.d and a.b.c are rejected as malformed", arguments: ["a.b.c.d", "a.b.c"])
    func malformed(token: String) async throws {
        let verifier = try Self.verifier()
        await #expect {
            try await verifier.verifyNotification(token)
        } throws: { error in
            (error as? StoreKitVerificationError)?.code == "malformed"
        }
        await #expect {
            try await verifier.verifyTransaction(token)
        } throws: { error in
            (error as? StoreKitVerificationError)?.code == "malformed"
        }
    }
}
