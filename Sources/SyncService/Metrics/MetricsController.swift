import Hummingbird
import NIOCore
import Prometheus

/// `GET /metrics`: Prometheus's text format, behind `SUBSYNC_METRICS_TOKEN` when it is set.
struct MetricsController: Sendable {
    let registry: PrometheusCollectorRegistry
    let token: String?

    func addRoutes(to router: Router<SubsyncRequestContext>) {
        router.get("metrics") { request, _ in
            if let token {
                let credential = request.headers[.authorization].flatMap { $0.hasPrefix("Bearer ") ? String($0.dropFirst(7)) : nil }
                guard let credential, ConstantTime.equals(credential, token) else {
                    throw APIError(.unauthorized, code: "unauthenticated", message: "GET /metrics needs Authorization: Bearer <SUBSYNC_METRICS_TOKEN>",
                                   headers: [.wwwAuthenticate: "Bearer"])
                }
            }
            var buffer: [UInt8] = []
            registry.emit(into: &buffer)
            return Response(
                status: .ok,
                headers: [.contentType: "text/plain; version=0.0.4; charset=utf-8"],
                body: .init(byteBuffer: ByteBuffer(bytes: buffer))
            )
        }
    }
}
