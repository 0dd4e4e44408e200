import Foundation
import Postgres
import TestSupport
import Testing

/// `PostgresHash.text` gives what the server's `hashtext` gives: the hash Citus places an
/// account's rows by.
@Suite struct PostgresHashTests {
    /// Random text of every length around lookup3's 12-byte blocks, in one to four UTF-8 bytes per
    /// character (no NUL: text cannot hold it).
    static func randomTexts(count: Int, seed: UInt64) -> [String] {
        var generator = SeededGenerator(seed: seed)
        let ranges: [ClosedRange<UInt32>] = [0x01...0x7F, 0x80...0x7FF, 0x800...0xD7FF, 0xE000...0xFFFD, 0x10000...0x10FFFF]
        return (0..<count).map { index in
            let length = index < 64 ? index : Int(generator.next() % 200)
            var scalars = String.UnicodeScalarView()
            for _ in 0..<length {
                let range = generator.next() % 4 == 0 ? ranges[Int(generator.next() % UInt64(ranges.count))] : ranges[0]
                let value = range.lowerBound + UInt32(generator.next() % UInt64(range.upperBound - range.lowerBound + 1))
                if let scalar = Unicode.Scalar(value) { scalars.append(scalar) }
            }
            return String(scalars)
        }
    }

    @Test func textHashIsTheServersHashtext() async throws {
        let texts = Self.randomTexts(count: 3000, seed: 62) + ParameterTests.trickyStrings.compactMap { $0 }
            + ["acct-104", "usage-1", "a0", String(repeating: "x", count: 100_000)]
        try await TestDatabase.withConnection { connection in
            let rows = try await connection.query("SELECT hashtext(t) FROM unnest(\(texts)::text[]) WITH ORDINALITY AS u(t, n) ORDER BY n")
            #expect(rows.count == texts.count)
            var mismatches: [String] = []
            for (text, row) in zip(texts, rows) where try row.decode(Int32.self, at: 0) != PostgresHash.text(text) {
                mismatches.append("\(text.prefix(40).debugDescription) (\(text.utf8.count) bytes)")
            }
            #expect(mismatches.isEmpty, "\(mismatches.count) differ, e.g. \(mismatches.prefix(5))")
        }
    }
}
