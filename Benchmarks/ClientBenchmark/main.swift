// The client's cost (issue #14), run by scripts/bench/client against a running `subsync serve`:
//   1. baseline: the same reports POSTed in bodies of 100 by a bare URLSession loop;
//   2. SubsyncClient.sync, 100 purchases a call: encode, outbox write, send, outbox delete;
//   3. the outbox alone: 10,000 reports queued with the service unreachable;
//   4. recovery: a new client opening that outbox, then delivering it to the service.
// Usage: ClientBenchmark <base URL> <admin key> [reports]
import Foundation
import SubsyncClient
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

let arguments = CommandLine.arguments
guard arguments.count >= 3, let base = URL(string: arguments[1]) else {
    print("usage: ClientBenchmark <base URL> <admin key> [reports]")
    exit(64)
}
let key = arguments[2]
let count = arguments.count > 3 ? Int(arguments[3]) ?? 10_000 : 10_000
let session = URLSession(configuration: .ephemeral)
let start = Date(timeIntervalSince1970: Date().timeIntervalSince1970.rounded(.down))

func purchases(_ run: String) -> [Purchase] {
    (0..<count).map { index in
        Purchase(transaction: TransactionFields(
            productID: "voip.premium.monthly", originalTransactionID: "\(run)-\(index)", transactionID: "\(run)-\(index)",
            purchasedAt: start.addingTimeInterval(-3_600), expiresAt: start.addingTimeInterval(30 * 86_400)))
    }
}

func seconds(_ body: () async throws -> Void) async rethrows -> Double {
    let clock = ContinuousClock()
    let elapsed = try await clock.measure { try await body() }
    return Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
}

func folder(_ name: String) -> URL {
    let url = FileManager.default.temporaryDirectory.appendingPathComponent("subsync-bench-client-\(name)-\(UUID().uuidString)")
    return url
}

func client(_ url: URL, account: String, storage: URL) throws -> SubsyncClient {
    var configuration = SubsyncConfiguration(baseURL: url, accountID: account, storageDirectory: storage, session: session, tokenProvider: { key })
    configuration.waitMilliseconds = 0
    configuration.requestTimeout = 60
    return try SubsyncClient(configuration: configuration)
}

func rate(_ seconds: Double) -> String { String(format: "%.0f reports/s (%.1f µs a report)", Double(count) / seconds, seconds / Double(count) * 1e6) }

// 1. Baseline: bare URLSession, the same JSON the client sends, 100 reports a request.
let formatter = Date.ISO8601FormatStyle(includingFractionalSeconds: true)
let baselineReports = purchases("raw")
let baseline = try await seconds {
    for chunk in stride(from: 0, to: count, by: 100) {
        let reports: [[String: Any]] = baselineReports[chunk..<min(count, chunk + 100)].map { purchase in
            let fields = purchase.transaction!
            return [
                "report_id": purchase.reportID, "observed_at": Date().formatted(formatter), "product_id": fields.productID,
                "original_transaction_id": fields.originalTransactionID, "transaction_id": fields.transactionID,
                "purchased_at": fields.purchasedAt.formatted(formatter), "expires_at": fields.expiresAt!.formatted(formatter),
            ]
        }
        var request = URLRequest(url: base.appendingPathComponent("v1/accounts/bench-raw/sync"))
        request.httpMethod = "POST"
        request.setValue("Bearer \(key)", forHTTPHeaderField: "Authorization")
        request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        request.httpBody = try JSONSerialization.data(withJSONObject: ["device": ["id": "bench"], "reports": reports])
        let (_, response) = try await session.data(for: request)
        guard (response as? HTTPURLResponse)?.statusCode == 202 else { fatalError("baseline: \(response)") }
    }
}
print("baseline (URLSession, 100 reports a request): \(rate(baseline))")

// 2. Through the client: outbox write, send, delete.
let online = folder("online")
defer { try? FileManager.default.removeItem(at: online) }
let live = try client(base, account: "bench-client", storage: online)
let reports = purchases("client")
let through = try await seconds {
    for chunk in stride(from: 0, to: count, by: 100) {
        let outcome = try await live.sync(Array(reports[chunk..<min(count, chunk + 100)]))
        guard case .delivered = outcome else { fatalError("client: \(outcome)") }
    }
}
print("SubsyncClient.sync (100 purchases a call): \(rate(through))")
print(String(format: "client overhead: %.1f µs a report over the baseline; %.2fx the baseline's throughput",
             (through - baseline) / Double(count) * 1e6, baseline / through))

// 3. The outbox alone: the service unreachable.
let offlineFolder = folder("offline")
defer { try? FileManager.default.removeItem(at: offlineFolder) }
let offline = try client(URL(string: "http://127.0.0.1:9")!, account: "bench-recovery", storage: offlineFolder)
let queued = purchases("queued")
let enqueue = try await seconds { _ = try await offline.sync(queued) }
print("queue \(count) reports offline (encode + durable file write each): \(rate(enqueue))")

// 4. Recovery: a new client on the folder, then the outbox delivered.
var recovered: SubsyncClient?
let open = try await seconds { recovered = try client(base, account: "bench-recovery", storage: offlineFolder) }
guard let recovered, await recovered.pendingCount == count else { fatalError("recovery: outbox not loaded") }
let drain = await seconds {
    let outcome = await recovered.flush()
    guard case .delivered(count) = outcome else { fatalError("recovery: \(outcome)") }
}
print(String(format: "recovery of %d queued reports: open %.2f s, deliver %.2f s (%@), total %.2f s",
             count, open, drain, rate(drain), open + drain))
