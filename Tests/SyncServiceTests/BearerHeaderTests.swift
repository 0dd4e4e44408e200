import Foundation
@testable import SyncService
import Testing
import TestSupport

/// The `Authorization` header's credential, taken on bytes (docs/PERFORMANCE.md, *In the code*),
/// is what the String and Foundation reference below takes.
@Suite struct BearerHeaderTests {
    /// The previous implementation, kept here as the reference.
    private func reference(_ header: String) -> String? {
        let prefix = "Bearer "
        guard header.count > prefix.count, header.lowercased().hasPrefix(prefix.lowercased()) else { return nil }
        return String(header.dropFirst(prefix.count)).trimmingCharacters(in: .whitespaces)
    }

    @Test func credentialsAreTakenAsBefore() {
        var headers = [
            "Bearer abc", "bearer abc", "BEARER abc", "BeArEr  abc  ", "Bearer \tabc\t", "Bearer ", "Bearer", "Bearer  ",
            "Bearerabc", "Basic abc", "Bearer\u{0}abc", "Bearer a b", "Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ4In0.sig",
            "Bearer \u{00A0}abc\u{2003}", "Bearer é", "Bëarer abc", "", " Bearer abc", "Bearer\tabc",
        ]
        var rng = SystemRandomNumberGenerator()
        let alphabet = Array("Bbearer Rr\t\u{0}é\u{A0}xyz.-_".unicodeScalars)
        for _ in 0..<2_000 {
            var text = Bool.random(using: &rng) ? "Bearer " : ""
            for _ in 0..<Int.random(in: 0...12, using: &rng) { text.unicodeScalars.append(alphabet.randomElement(using: &rng) ?? "x") }
            headers.append(text)
        }
        for header in headers {
            #expect(Authenticator.bearerCredential(header) == reference(header), "\(header.debugDescription)")
        }
    }
}
