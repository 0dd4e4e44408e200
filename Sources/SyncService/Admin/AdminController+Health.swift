import Foundation
import Hummingbird
import SyncStore

/// `/v1/admin/stats` (`subsync stats`) and `/v1/admin/metrics/history` (the console's chart).
extension AdminController {
    func addHealthRoutes(to admin: RouterGroup<SubsyncRequestContext>) {
        admin.get("stats") { request, _ in
            try await requireAdmin(request)
            let window: TimeInterval
            if let text = request.uri.queryParameters.get("window_seconds") {
                guard let seconds = Int(text), (60...2_592_000).contains(seconds) else {
                    throw APIError(.badRequest, code: "invalid_request", message: "window_seconds: an integer from 60 to 2592000 (30 days)")
                }
                window = TimeInterval(seconds)
            } else {
                window = 3600
            }
            return try JSONResponse.make(try await OperationsStats.read(pool: pool, window: window, now: clock.now()))
        }
        admin.get("metrics/history") { request, _ in
            try await requireAdmin(request)
            let interval = Double(sampleInterval.components.seconds) + Double(sampleInterval.components.attoseconds) / 1e18
            return try JSONResponse.make(
                HistoryAnswer(intervalSeconds: interval, spanSeconds: history.span, samples: history.samples()))
        }
    }

    struct HistoryAnswer: Encodable {
        var intervalSeconds: Double
        var spanSeconds: Double
        var samples: [MetricsHistory.Sample]

        enum CodingKeys: String, CodingKey {
            case intervalSeconds = "interval_seconds"
            case spanSeconds = "span_seconds"
            case samples
        }
    }
}
