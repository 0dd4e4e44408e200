import Foundation
import Postgres
import PropertyBased
import SyncCore
import SyncStore
import Testing
import TestSupport

/// The hand-written readers of the stored domain types (``JSONReadable``, SyncStore/JSON) give
/// what Foundation's `JSONDecoder.postgres` decodes from the same text: the service's own compact
/// text, the text PostgreSQL prints back from `jsonb` (keys reordered, spaces added), escapes
/// of every kind; and ``JSONColumn`` falls back to `JSONDecoder` for a text a reader refuses.
@Suite struct JSONReadableTests {
    @Test func readersMatchFoundationOnTheServiceText() async {
        await propertyCheck(count: 500, input: Gen.uint64()) { seed in
            var rng = SeededGenerator(seed: seed)
            let state = JSONWritableTests.accountState(&rng)
            Self.expectSameValue(state)
            for entitlement in state.entitlements { Self.expectSameValue(entitlement) }
            Self.expectSameValue(JSONWritableTests.aggregate(&rng))
        }
    }

    @Test func anAggregateStoredBeforeUnrevokesNamedWhatTheySawLiftsByTime() throws {
        var rng = SeededGenerator(seed: 42)
        var aggregate = JSONWritableTests.aggregate(&rng)
        let reinstated = Date(timeIntervalSince1970: 1_780_000_000)
        aggregate.operatorReinstatedAt = reinstated
        aggregate.operatorLiftsStoreBefore = nil
        let text = try PostgresJSONEncoder.string(aggregate)
        #expect(!text.contains("operator_lifts_store_before"))
        #expect(Self.read(TransactionAggregate.self, text: text)?.operatorLiftsStoreBefore == reinstated)
        #expect(try JSONDecoder.postgres.decode(TransactionAggregate.self, from: Data(text.utf8)).operatorLiftsStoreBefore == reinstated)
    }

    @Test func readersMatchFoundationOnJSONBText() async throws {
        try await TestDatabase.withConnection { connection in
            var rng = SeededGenerator(seed: 20261125)
            for _ in 0..<150 {
                let state = try PostgresJSONEncoder.string(JSONWritableTests.accountState(&rng))
                let aggregate = try PostgresJSONEncoder.string(JSONWritableTests.aggregate(&rng))
                let rows = try await connection.query("SELECT \(state)::jsonb::text, \(aggregate)::jsonb::text")
                let jsonbState = try rows[0].decode(String.self, at: 0)
                let jsonbAggregate = try rows[0].decode(String.self, at: 1)
                #expect(jsonbState.contains(": "), "PostgreSQL prints jsonb with spaces")
                Self.expectSame(AccountState.self, text: jsonbState)
                Self.expectSame(TransactionAggregate.self, text: jsonbAggregate)
            }
        }
    }

    /// An account's device list as the snapshot's statement prints it (`json_agg` of
    /// `json_build_object`, PostgreSQL's own date text), with nulls, escapes and an empty list.
    @Test func deviceListsMatchFoundationOnPostgreSQLsText() async throws {
        try await TestDatabase.withConnection { connection in
            var rng = SeededGenerator(seed: 20261126)
            var lists = 0
            for round in 0..<60 {
                let count = round == 0 ? 0 : Int.random(in: 1...4, using: &rng)
                let ids = (0..<count).map { "device-\(round)-\($0)" + (Bool.random(using: &rng) ? "\"é\\\n" : "") }
                let platforms = (0..<count).map { _ in Bool.random(using: &rng) ? "ios" : nil }
                let versions = (0..<count).map { _ in Int.random(in: 0..<3, using: &rng) == 0 ? nil : "2.\(Int.random(in: 0..<10, using: &rng)) \u{1F600}" }
                let seconds = (0..<count).map { _ in Double(Int.random(in: 0..<4_000_000_000, using: &rng)) / 1000 }
                let rows = try await connection.query(
                    """
                    SELECT COALESCE(json_agg(json_build_object(
                        'id', d.id, 'platform', d.platform, 'app_version', d.v,
                        'first_seen_at', to_timestamp(d.s), 'last_seen_at', to_timestamp(d.s) + interval '1 day')
                        ORDER BY d.id), '[]')::text
                    FROM unnest(\(ids)::text[], \(platforms)::text[], \(versions)::text[], \(seconds)::float8[]) AS d(id, platform, v, s)
                    """)
                let text = try rows[0].decode(String.self, at: 0)
                Self.expectSame([AccountReader.Device].self, text: text)
                #expect(Self.read([AccountReader.Device].self, text: text)?.count == count, "\(text)")
                lists += 1
            }
            #expect(lists == 60)
        }
    }

    @Test func escapesUnicodeAndUnknownMembers() {
        let text = #"""
            { "tier" : "\u00e9\ud83d\ude00\/x\"\\\b\f\n\r\t", "features":[ ], "limits": {"a\u0062": null, "calls": -12},
              "ads": false, "entitlements": [], "next_transition_at": null,
              "later": {"nested": [1, 2.5e3, -0.1, true, null, "s"]} }
            """#
        Self.expectSame(AccountState.self, text: text)
        let read = Self.read(AccountState.self, text: text)
        #expect(read?.tier == "é😀/x\"\\\u{8}\u{c}\n\r\t")
        #expect(read?.limits == ["ab": .unlimited, "calls": .limited(-12)])
    }

    @Test func textsTheReadersRefuseAreDecodedByFoundation() throws {
        // StoreKit's integer revocation code, a limit written as a decimal: JSONDecoder's job.
        let entitlement = #"{"id":"premium","tier":"premium","status":"revoked","product_id":"p","product_kind":"auto_renewable","source_transaction_id":"t","original_transaction_id":"o","purchased_at":"2026-01-01T00:00:00Z","will_renew":false,"revocation_reason":1}"#
        #expect(Self.read(EntitlementState.self, text: entitlement) == nil)
        #expect(try Self.column(EntitlementState.self, text: entitlement).revocationReason == .developerIssue)
        let state = #"{"tier":"free","features":[],"limits":{"minutes":100.0},"ads":true,"entitlements":[]}"#
        #expect(Self.read(AccountState.self, text: state) == nil)
        #expect(try Self.column(AccountState.self, text: state).limits == ["minutes": .limited(100)])
        // What JSONDecoder reads differently or refuses: a key twice (it keeps the first), a
        // limit's name twice, a leading zero, a control character in a key, a number starting
        // with +, nesting deeper than the reader goes.
        let base = #""features":[],"limits":{},"ads":true,"entitlements":[]"#
        let twice = #"{"tier":"first","tier":"second","# + base + "}"
        #expect(Self.read(AccountState.self, text: twice) == nil)
        #expect(try Self.column(AccountState.self, text: twice).tier == (try JSONDecoder.postgres.decode(AccountState.self, from: Data(twice.utf8))).tier)
        let nameTwice = #"{"tier":"free","features":[],"limits":{"m":1,"m":2},"ads":true,"entitlements":[]}"#
        #expect(Self.read(AccountState.self, text: nameTwice) == nil)
        #expect(try Self.column(AccountState.self, text: nameTwice) == (try JSONDecoder.postgres.decode(AccountState.self, from: Data(nameTwice.utf8))))
        let deep = #"{"tier":"free","# + base + #","later":"# + String(repeating: "[", count: 40) + String(repeating: "]", count: 40) + "}"
        #expect(Self.read(AccountState.self, text: deep) == nil)
        #expect(try Self.column(AccountState.self, text: deep).tier == "free")
        for refused in [
            #"{"tier":"free","features":[],"limits":{"m":01},"ads":true,"entitlements":[]}"#,
            "{\"tier\":\"free\",\"x\ty\":1," + base + "}",
            #"{"tier":"free","x":+1,"# + base + "}",
        ] {
            #expect(Self.read(AccountState.self, text: refused) == nil, "\(refused)")
            #expect(throws: PostgresError.self) { try Self.column(AccountState.self, text: refused) }
        }
        // Broken text is an error either way, JSONDecoder's.
        for broken in [#"{"tier":"free""#, #"{"tier":"free","features":[],"limits":{},"ads":true}"#, "[]", #"{"tier":"free"} x"#] {
            #expect(Self.read(AccountState.self, text: broken) == nil, "\(broken)")
            #expect(throws: PostgresError.self) { try Self.column(AccountState.self, text: broken) }
        }
    }

    // MARK: - Helpers

    static func read<T: JSONReadable>(_ type: T.Type, text: String) -> T? {
        var text = text
        return text.withUTF8 { try? JSONReader.read(T.self, from: $0) }
    }

    static func column<T: Decodable>(_ type: T.Type, text: String) throws -> T {
        var text = text
        return try text.withUTF8 { try JSONColumn<T>.decode(text: $0).value }
    }

    static func expectSame<T: JSONReadable & Decodable & Equatable>(_ type: T.Type, text: String, sourceLocation: SourceLocation = #_sourceLocation) {
        let expected = try? JSONDecoder.postgres.decode(T.self, from: Data(text.utf8))
        #expect(expected != nil, "Foundation decodes \(text)", sourceLocation: sourceLocation)
        #expect(read(T.self, text: text) == expected, "\(text)", sourceLocation: sourceLocation)
    }

    static func expectSameValue<T: JSONReadable & Codable & Equatable>(_ value: T, sourceLocation: SourceLocation = #_sourceLocation) {
        guard let text = try? PostgresJSONEncoder.string(value) else {
            Issue.record("encoding \(T.self) failed", sourceLocation: sourceLocation)
            return
        }
        expectSame(T.self, text: text, sourceLocation: sourceLocation)
    }
}
