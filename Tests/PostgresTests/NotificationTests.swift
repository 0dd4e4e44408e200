import Foundation
import Postgres
import TestSupport
import Testing

/// LISTEN/NOTIFY through `NotificationListener` and `Connection.notify`.
@Suite struct NotificationTests {
    /// A channel name that needs quoting: mixed case, a space, a quote and non-ASCII.
    static func channel() -> String {
        "Pgt \"Chan\" ü " + String(UUID().uuidString.prefix(8))
    }

    @Test func deliversANotification() async throws {
        let channel = Self.channel()
        let listener = NotificationListener(configuration: try TestDatabase.configuration(), channels: [channel])
        // The first wait connects and LISTENs.
        #expect(try await listener.wait(timeout: .milliseconds(10)).isEmpty)
        let payload = "payload 'with' \"quotes\" \\ and ünïcode 😀"
        try await TestDatabase.withConnection { sender in
            try await sender.notify(channel: channel, payload: payload)
            try await sender.notify(channel: "pgt_some_other_channel", payload: "ignored")
        }
        // One wait with a long timeout: it returns with the notification, so before the timeout.
        let start = ContinuousClock.now
        let received = try await listener.wait(timeout: .seconds(600))
        #expect(secondsSince(start) < 600, "wait returned as soon as the notification arrived")
        #expect(received.count == 1)
        #expect(received.first?.channel == channel)
        #expect(received.first?.payload == payload)
        await listener.close()
    }

    @Test func returnsEmptyAfterTheTimeout() async throws {
        let listener = NotificationListener(configuration: try TestDatabase.configuration(), channels: [Self.channel()])
        _ = try await listener.wait(timeout: .milliseconds(10))
        let start = ContinuousClock.now
        let received = try await listener.wait(timeout: .milliseconds(400))
        let elapsed = secondsSince(start)
        #expect(received.isEmpty)
        #expect(elapsed >= 0.39, "returned after \(elapsed) s")
        #expect(elapsed < 20, "returned after \(elapsed) s")
        await listener.close()
    }

    @Test func rolledBackNotificationIsNotDelivered() async throws {
        struct Abort: Error {}
        let channel = Self.channel()
        let listener = NotificationListener(configuration: try TestDatabase.configuration(), channels: [channel])
        _ = try await listener.wait(timeout: .milliseconds(10))
        try await TestDatabase.withConnection { sender in
            let error = await thrownError {
                try await sender.withTransaction { connection in
                    try await connection.notify(channel: channel, payload: "rolled back")
                    throw Abort()
                }
            }
            #expect(error is Abort)
            #expect(try await listener.wait(timeout: .milliseconds(300)).isEmpty)
            try await sender.withTransaction { connection in
                try await connection.notify(channel: channel, payload: "committed")
            }
        }
        var received: [PostgresNotification] = []
        let start = ContinuousClock.now
        while received.isEmpty, secondsSince(start) < 300 {
            received += try await listener.wait(timeout: .seconds(2))
        }
        #expect(received.map(\.payload) == ["committed"])
        await listener.close()
    }
}
