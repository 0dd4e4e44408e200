import Foundation
import PropertyBased
@testable import SyncService
import NIOConcurrencyHelpers
import SyncStore
import Testing
import TestSupport

/// The sync body's reader (``SyncRequest/read(_:)``) against Foundation's `JSONDecoder` path
/// (`WireBody.decode`): whatever the reader takes, `JSONDecoder` decodes to the same value; what
/// it refuses goes to `JSONDecoder`, which words the error as before.
@Suite struct SyncBodyReaderTests {
    @Test func whatTheReaderTakesJSONDecoderDecodesTheSame() async {
        let taken = Counter()
        await propertyCheck(count: 2000, input: Gen.uint64()) { seed in
            var rng = SeededGenerator(seed: seed)
            let body = Self.body(&rng)
            let data = Data(body.utf8)
            guard let read = SyncRequest.read(data) else { return }
            taken.increment()
            let decoded = try? WireBody.decode(SyncRequest.self, from: data)
            #expect(decoded == read, "\(body)")
        }
        // Generated bodies are often off on purpose (unknown members, wrong types, bad dates):
        // the reader must still take a fair share, or the check above checks nothing.
        #expect(taken.value > 400, "the reader took only \(taken.value) of 2,000 bodies")
    }

    /// What devices send (the client library's and the benchmark's bodies) takes the reader's path.
    @Test func commonBodiesTakeTheReader() throws {
        let body = #"""
            {"device":{"id":"iphone-1","platform":"ios","app_version":"2.4.1"},"reports":[
              {"report_id":"r-1","observed_at":"2026-11-26T08:00:00.123Z","product_id":"voip.premium.monthly",
               "original_transaction_id":"1000","transaction_id":"1001","purchased_at":"2026-11-01T00:00:00Z",
               "expires_at":"2026-12-01T00:00:00+01:00","is_upgraded":false,"will_auto_renew":true,"environment":"Sandbox"},
              {"report_id":"r-2","observed_at":"2026-11-26T08:00:00Z","signed_transaction":"eyJhbGciOiJFUzI1NiJ9.e30.c2ln",
               "revoked_at":"2026-11-20T00:00:00Z","revocation_reason":"developer_issue","device_id":"ipad"}]}
            """#
        let data = Data(body.utf8)
        let read = try #require(SyncRequest.read(data))
        #expect(read == (try WireBody.decode(SyncRequest.self, from: data)))
        #expect(read.reports.count == 2)
        #expect(read.reports[0].environment == .sandbox)
        #expect(read.reports[1].revocationReason == .developerIssue)
        // And what it leaves to JSONDecoder: StoreKit's numeric code, an unknown member,
        // a key twice, non-ASCII text.
        for other in [
            body.replacingOccurrences(of: #""developer_issue""#, with: "1"),
            body.replacingOccurrences(of: #""platform":"ios""#, with: #""platform":"ios","model":"x""#),
            body.replacingOccurrences(of: #""platform":"ios""#, with: #""platform":"ios","platform":"tv""#),
            body.replacingOccurrences(of: "2.4.1", with: "2.4.1 é"),
        ] {
            #expect(SyncRequest.read(Data(other.utf8)) == nil, "\(other)")
            #expect(throws: Never.self) { try SyncRequest.decode(Data(other.utf8)) }
        }
    }

    // MARK: - Generated bodies

    private static let identifiers = ["a", "iphone-7", "r.1:x@y_z", "", "bad id", "ü"]
    private static let texts = ["ios", "", "2.0 (build 7)", #"quote \" and \\ slash \/"#, #"\u00e9\ud83d\ude00"#, #"tab\tnl\n"#, #"\u0000"#, #"\ud800"#, "é"]
    private static let dates = [
        "2026-11-26T08:00:00Z", "2026-11-26T08:00:00.123456Z", "2026-11-26T08:00:00.1Z", "2026-11-26T09:00:00+01:00",
        "2026-11-26 08:00:00+00", "2026-11-26T08:00:00", "2026-13-01T00:00:00Z", "yesterday", "", "infinity",
        #"2026-11-26T08:00:00\u005a"#, "2026-02-30T00:00:00Z", "0001-01-01T00:00:00Z",
    ]

    /// A JSON value of another type than the field's.
    private static func wrongValue(_ rng: inout SeededGenerator) -> String {
        ["1", "-0.5", "1e3", "true", "{}", "[]", #"{"a":1}"#, "[1,\"x\"]", "01", "nul"].randomElement(using: &rng) ?? "1"
    }

    private static func space(_ rng: inout SeededGenerator) -> String {
        ["", "", "", " ", "\n  ", "\t"].randomElement(using: &rng) ?? ""
    }

    private static func quoted(_ text: String) -> String { "\"\(text)\"" }

    /// One of `texts`; in a clean body one without raw non-ASCII bytes or a lone surrogate.
    private static func pick(_ texts: [String], _ rng: inout SeededGenerator) -> String {
        let usable = messy ? texts : texts.filter { $0.utf8.allSatisfy { $0 < 0x80 } && $0 != #"\ud800"# }
        return usable.randomElement(using: &rng) ?? ""
    }

    /// A value for a field: usually of its type, sometimes null, sometimes another type. Half
    /// the bodies are generated clean: values of their fields' types, dates the service reads.
    private static func value(_ rng: inout SeededGenerator, typed: String, nullable: Bool) -> String {
        switch Int.random(in: 0..<(messy ? 10 : 40), using: &rng) {
        case 0: return nullable || messy ? "null" : typed
        case 1: return messy ? wrongValue(&rng) : typed
        default: return typed
        }
    }

    /// Whether the body being generated may be off (set per body).
    @TaskLocal private static var messy = true

    private static func object(_ rng: inout SeededGenerator, members: [(String, String)]) -> String {
        var members = members.shuffled(using: &rng)
        switch Int.random(in: 0..<(messy ? 20 : 1000), using: &rng) {
        case 0: members.append(("unknown", wrongValue(&rng)))
        case 1: if let first = members.first { members.append(first) }
        default: break
        }
        let inner = members.map { "\(space(&rng))\(quoted($0.0))\(space(&rng)):\(space(&rng))\($0.1)" }.joined(separator: ",")
        return "{\(inner)\(space(&rng))}"
    }

    private static func device(_ rng: inout SeededGenerator) -> String {
        var members: [(String, String)] = []
        if !messy || Int.random(in: 0..<15, using: &rng) != 0 {
            members.append(("id", value(&rng, typed: quoted(pick(identifiers, &rng)), nullable: false)))
        }
        for key in ["platform", "app_version"] where Bool.random(using: &rng) {
            members.append((key, value(&rng, typed: quoted(pick(texts, &rng)), nullable: true)))
        }
        return object(&rng, members: members)
    }

    private static func report(_ rng: inout SeededGenerator) -> String {
        var members: [(String, String)] = []
        func text(_ rng: inout SeededGenerator) -> String { quoted(pick(identifiers + texts, &rng)) }
        func date(_ rng: inout SeededGenerator) -> String { quoted((messy ? dates : Array(dates.prefix(4))).randomElement(using: &rng) ?? "") }
        if !messy || Int.random(in: 0..<15, using: &rng) != 0 { members.append(("report_id", value(&rng, typed: text(&rng), nullable: false))) }
        if !messy || Int.random(in: 0..<15, using: &rng) != 0 { members.append(("observed_at", value(&rng, typed: date(&rng), nullable: false))) }
        for key in ["device_id", "product_id", "original_transaction_id", "transaction_id", "signed_transaction", "signed_renewal_info", "renewal_product_id"]
        where Bool.random(using: &rng) {
            members.append((key, value(&rng, typed: text(&rng), nullable: true)))
        }
        for key in ["purchased_at", "expires_at", "grace_period_expires_at", "revoked_at", "renewal_date"] where Bool.random(using: &rng) {
            members.append((key, value(&rng, typed: date(&rng), nullable: true)))
        }
        for key in ["is_upgraded", "will_auto_renew", "in_billing_retry"] where Bool.random(using: &rng) {
            members.append((key, value(&rng, typed: Bool.random(using: &rng) ? "true" : "false", nullable: true)))
        }
        if Bool.random(using: &rng) {
            let reasons = ["\"other\"", "\"developer_issue\"", "\"Developer_Issue\"", "\"refund\"", "0", "1", "2"]
            let reason = (messy ? reasons : Array(reasons.prefix(3))).randomElement(using: &rng) ?? "0"
            members.append(("revocation_reason", value(&rng, typed: reason, nullable: true)))
        }
        if Bool.random(using: &rng) {
            let reasons = ["\"cancelled\"", "\"billing_error\"", "\"Price_Increase_Declined\"", "\"bored\"", "1", "5", "9"]
            let reason = (messy ? reasons : Array(reasons.prefix(3))).randomElement(using: &rng) ?? "1"
            members.append(("expiration_reason", value(&rng, typed: reason, nullable: true)))
        }
        if Bool.random(using: &rng) {
            let statuses = ["\"pending\"", "\"ACCEPTED\"", "\"declined\"", "0", "1", "2"]
            let status = (messy ? statuses : Array(statuses.prefix(2))).randomElement(using: &rng) ?? "0"
            members.append(("price_increase_status", value(&rng, typed: status, nullable: true)))
        }
        if Bool.random(using: &rng) {
            let environments = ["\"production\"", "\"Sandbox\"", "\"XCODE\"", "\"staging\""]
            let environment = (messy ? environments : Array(environments.prefix(3))).randomElement(using: &rng) ?? ""
            members.append(("environment", value(&rng, typed: environment, nullable: true)))
        }
        return object(&rng, members: members)
    }

    static func body(_ rng: inout SeededGenerator) -> String {
        $messy.withValue(Bool.random(using: &rng)) { messyBody(&rng) }
    }

    private static func messyBody(_ rng: inout SeededGenerator) -> String {
        var members: [(String, String)] = []
        if !messy || Int.random(in: 0..<20, using: &rng) != 0 { members.append(("device", device(&rng))) }
        if !messy || Int.random(in: 0..<20, using: &rng) != 0 {
            let reports = (0..<Int.random(in: 0...4, using: &rng)).map { _ in report(&rng) }
            members.append(("reports", "[\(reports.joined(separator: ",\(space(&rng))"))]"))
        }
        let body = space(&rng) + object(&rng, members: members) + space(&rng)
        switch Int.random(in: 0..<(messy ? 25 : 1000), using: &rng) {
        case 0: return body + "x"
        case 1: return String(body.dropLast(2))
        default: return body
        }
    }
}

/// A count shared with a property's closure.
private final class Counter: Sendable {
    private let count = NIOLockedValueBox(0)
    var value: Int { count.withLockedValue { $0 } }
    func increment() { count.withLockedValue { $0 += 1 } }
}
