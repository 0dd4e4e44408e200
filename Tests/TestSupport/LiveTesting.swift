import Hummingbird
// @testable for TestApplication and the live client type, which HummingbirdTesting keeps
// internal: what this file changes is only the read timeout.
@testable import HummingbirdTesting
import ServiceLifecycle

extension ApplicationProtocol {
    /// HummingbirdTesting's `test(.live)`, with the client's read timeout at ten minutes instead
    /// of its fixed 20 s. A request answers late on a busy core (one third of one core under
    /// `scripts/test --stress`), and the read timeout is no part of what the tests check: they
    /// wait on conditions with generous deadlines, as every bound in this suite does.
    public func testLive<Value>(_ test: @Sendable (LiveTestFramework<Self>.Client) async throws -> Value) async throws -> Value {
        let application = TestApplication(base: self)
        return try await withThrowingTaskGroup(of: Void.self) { group in
            let serviceGroup = ServiceGroup(
                configuration: .init(services: [application], gracefulShutdownSignals: [.sigterm, .sigint], logger: application.logger))
            group.addTask { try await serviceGroup.run() }
            let port = await application.portPromise.wait()
            let client = TestClient(host: "localhost", port: port, configuration: .init(timeout: .seconds(600)))
            client.connect()
            do {
                let value = try await test(LiveTestFramework<Self>.Client(client: client))
                try await client.shutdown()
                await serviceGroup.triggerGracefulShutdown()
                return value
            } catch {
                try await client.shutdown()
                await serviceGroup.triggerGracefulShutdown()
                throw error
            }
        }
    }
}
