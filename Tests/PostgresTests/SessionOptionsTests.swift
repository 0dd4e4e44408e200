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

    /// Text goes in and out as UTF-8 whatever the database's encoding and the user's
    /// `client_encoding`: in a LATIN1 database "é" is one character, and a character LATIN1
    /// cannot hold is refused by the server rather than stored as its UTF-8 bytes.
    @Test func textIsUTF8WhateverTheDatabaseEncoding() async throws {
        try await TestDatabase.withFreshDatabase(creating: "ENCODING 'LATIN1' LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0") { fresh in
            var configuration = fresh
            configuration["client_encoding"] = "LATIN1"
            try await TestDatabase.withConnection(configuration) { connection in
                #expect(try await setting("client_encoding", on: connection) == "UTF8")
                #expect(try await setting("server_encoding", on: connection) == "LATIN1")
                let row = try await connection.query("SELECT length(\("café")), \("café"), octet_length(\("café"))")[0]
                #expect(try row.decode(Int.self, at: 0) == 4)
                #expect(try row.decode(String.self, at: 1) == "café")
                #expect(try row.decode(Int.self, at: 2) == 4, "stored as LATIN1: one byte for é")
                do {
                    _ = try await connection.query("SELECT \("5 €")::text")
                    Issue.record("a character LATIN1 cannot hold was accepted")
                } catch let error as PostgresError {
                    #expect(error.sqlState == SQLState(rawValue: "22P05"), "\(error)")
                }
            }
        }
    }
}
