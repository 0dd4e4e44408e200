import Foundation
import Hummingbird
import Postgres
import SyncStore

/// `/v1/admin/deliveries`: list, retry and cancel webhook deliveries (`subsync deliveries ...`).
extension AdminController {
    func addDeliveryRoutes(to admin: RouterGroup<SubsyncRequestContext>) {
        admin.get("deliveries") { request, _ in
            try await requireAdmin(request)
            let parameters = request.uri.queryParameters
            let status = parameters.get("status")
            if let status, !Self.deliveryStatuses.contains(status) {
                throw APIError(.badRequest, code: "invalid_request", message: "status: one of \(Self.deliveryStatuses.sorted().joined(separator: ", "))")
            }
            let endpoint = try parameters.get("endpoint_id").map(EndpointController.endpointID)
            let limit = try Self.limit(parameters.get("limit"))
            return try JSONResponse.make(DeliveryList(data: try await deliveries.list(status: status, endpoint: endpoint, limit: limit)))
        }
        admin.post("deliveries/retry-dead") { request, context in
            let key = try await requireAdmin(request)
            let body = try await request.decodeJSON(RetryDeadRequest.self, emptyIsObject: true, context: context)
            let actor = try actor(body.actor, key: key)
            let reason = try Self.reason(body.reason)
            let endpoint = try body.endpointID.map(EndpointController.endpointID)
            let retried = try await deliveries.retry(deliveryID: nil, endpoint: endpoint)
            let audit = try await OperatorLog(pool: pool).record(
                at: clock.now(), actor: actor, action: "dead_deliveries_retry", target: endpoint.map { "endpoint \($0.uuidString.lowercased())" },
                reason: reason, outcome: "\(retried) dead deliveries retried")
            logger.notice("operator retried dead deliveries", metadata: ["actor": "\(actor)", "retried": "\(retried)"])
            return try JSONResponse.make(RetryDeadAnswer(retried: retried, endpointID: endpoint, actor: actor, at: audit.at, audit: audit))
        }
        admin.post("deliveries/:delivery_id/retry") { request, context in
            try await deliveryAction("retry", request: request, context: context) { delivery in
                guard delivery.status != "succeeded" else {
                    throw APIError(.conflict, code: "delivery_succeeded", message: "this delivery succeeded; replay its event instead")
                }
                _ = try await deliveries.retry(deliveryID: delivery.deliveryID)
            }
        }
        admin.post("deliveries/:delivery_id/cancel") { request, context in
            try await deliveryAction("cancel", request: request, context: context) { delivery in
                switch try await deliveries.cancel(deliveryID: delivery.deliveryID) {
                case .cancelled:
                    break
                case .notPending:
                    let status = try await deliveries.summary(deliveryID: delivery.deliveryID)?.status ?? delivery.status
                    throw APIError(.conflict, code: "delivery_not_pending", message: "only a pending delivery can be cancelled (this one is \(status))")
                case .beingSent(let until):
                    throw APIError(
                        .conflict, code: "delivery_being_sent",
                        message: "a delivery loop has this delivery out (claimed, maybe on the wire; its lease ends by \(RFC3339.format(until))); "
                            + "cancel it once that loop has recorded its attempt")
                }
            }
        }
    }

    /// Finds the delivery of the path (404 `delivery_not_found`), runs `act` on it, and answers
    /// with the delivery as it is afterwards and who did what when.
    private func deliveryAction(
        _ action: String, request: Request, context: SubsyncRequestContext,
        _ act: (DeliveryStore.Summary) async throws -> Void
    ) async throws -> Response {
        let key = try await requireAdmin(request)
        guard let text = context.parameters.get("delivery_id"), let id = Int64(text), id > 0 else {
            throw APIError(.badRequest, code: "invalid_delivery_id", message: "delivery_id must be a positive integer")
        }
        let body = try await request.decodeJSON(ActionRequest.self, emptyIsObject: true, context: context)
        let actor = try actor(body.actor, key: key)
        let reason = try Self.reason(body.reason)
        guard let delivery = try await deliveries.summary(deliveryID: id) else {
            throw APIError(.notFound, code: "delivery_not_found", message: "no delivery with that id")
        }
        try await act(delivery)
        let after = try await deliveries.summary(deliveryID: id) ?? delivery
        let audit = try await OperatorLog(pool: pool).record(
            at: clock.now(), actor: actor, action: "delivery_\(action)", accountID: delivery.accountID, target: "delivery \(id)",
            reason: reason, outcome: "delivery #\(id) of event #\(delivery.eventSequence): \(delivery.status) → \(after.status)")
        logger.notice(
            "operator delivery action",
            metadata: ["action": "\(action)", "delivery": "\(id)", "account": "\(delivery.accountID)", "actor": "\(actor)"])
        return try JSONResponse.make(DeliveryActionAnswer(action: action, delivery: after, actor: actor, at: audit.at, audit: audit))
    }

    static let deliveryStatuses: Set<String> = ["pending", "succeeded", "dead", "cancelled"]

    /// `limit` of a list: 1–500, default 100.
    static func limit(_ text: String?) throws -> Int {
        guard let text else { return 100 }
        guard let limit = Int(text), (1...500).contains(limit) else {
            throw APIError(.badRequest, code: "invalid_request", message: "limit: an integer from 1 to 500")
        }
        return limit
    }

    struct DeliveryList: Encodable {
        var data: [DeliveryStore.Summary]
    }

    struct ActionRequest: Decodable {
        var actor: String?
        var reason: String?
    }

    struct RetryDeadRequest: Decodable {
        var endpointID: String?
        var actor: String?
        var reason: String?

        enum CodingKeys: String, CodingKey {
            case endpointID = "endpoint_id"
            case actor, reason
        }
    }

    struct RetryDeadAnswer: Encodable {
        var retried: Int
        var endpointID: UUID?
        var actor: String
        var at: Date
        /// The audit record written (sql/0015).
        var audit: OperatorLog.Action

        enum CodingKeys: String, CodingKey {
            case retried
            case endpointID = "endpoint_id"
            case actor, at, audit
        }
    }

    struct DeliveryActionAnswer: Encodable {
        var action: String
        var delivery: DeliveryStore.Summary
        var actor: String
        var at: Date
        /// The audit record written (sql/0015).
        var audit: OperatorLog.Action
    }
}
