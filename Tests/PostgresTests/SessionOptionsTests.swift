import Postgres
import TestSupport
import Testing

/// The settings every subsync session runs with, and which of them a user's `options` may change.
@Suite struct SessionOptionsTests {
    private func setting(_ name: String, on connection: Connection) async throws -> String {
        try await connection.query("SELECT current_setting(\(name))")[0].decode(String.self, at: 0)
    }

    @Test func sessionsRunInUTCWithoutJIT() async throws {
        try await TestDatabase.withConnection { connection in
            let timeZone = try await setting("TimeZone", on: connection)
            let dateStyle = try await setting("DateStyle", on: connection)
            let jit = try await setting("jit", on: connection)
            #expect(timeZone == "UTC")
            #expect(dateStyle == "ISO, YMD")
            #expect(jit == "off")
        }
    }

    @Test func theUsersOptionsMayTurnJITOnButNotChangeTheTimeZone() async throws {
        var configuration = try TestDatabase.configuration()
        configuration["options"] = "-c jit=on -c TimeZone=Europe/Paris"
        try await TestDatabase.withConnection(configuration) { connection in
            let jit = try await setting("jit", on: connection)
            let timeZone = try await setting("TimeZone", on: connection)
            #expect(jit == "on")
            #expect(timeZone == "UTC", "decoding relies on UTC")
        }
    }
}
