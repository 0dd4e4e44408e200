import Foundation
import Hummingbird
import SyncCore
import SyncStore

/// `/v1/webhook-endpoints`: the app's backend registers where events go. Admin key only.
///
/// Every change (create, update, enable, disable, delete, rotate) is recorded in
/// `operator_actions` with who made it (`actor`, default `admin`) and why (`reason`), both
/// optional in each body, in the transaction that makes it; `GET .../{id}` shows the latest.
struct EndpointController: Sendable {
    let store: EndpointStore
    let authenticator: Authenticator
    let clock: any ServiceClock

    /// Who and why, in any change's body.
    struct Who: Decodable {
        var actor: String?
        var reason: String?
    }

    struct CreateRequest: Decodable {
        var url: String
        var description: String?
        var eventTypes: [String]?
        var actor: String?
        var reason: String?

        enum CodingKeys: String, CodingKey {
            case url, description, actor, reason
            case eventTypes = "event_types"
        }
    }

    struct UpdateRequest: Decodable {
        var url: String?
        var description: String?
        /// Present and null: all events; absent: unchanged.
        var eventTypes: [String]??
        var enabled: Bool?
        var actor: String?
        var reason: String?

        enum CodingKeys: String, CodingKey {
            case url, description, enabled, actor, reason
            case eventTypes = "event_types"
        }

        init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            actor = try container.decodeIfPresent(String.self, forKey: .actor)
            reason = try container.decodeIfPresent(String.self, forKey: .reason)
            url = try container.decodeIfPresent(String.self, forKey: .url)
            description = try container.decodeIfPresent(String.self, forKey: .description)
            enabled = try container.decodeIfPresent(Bool.self, forKey: .enabled)
            if container.contains(.eventTypes) {
                eventTypes = .some(try container.decodeIfPresent([String].self, forKey: .eventTypes))
            }
        }
    }

    struct ListBody: Encodable {
        var data: [WebhookEndpointView]
    }

    func addRoutes(to router: Router<SubsyncRequestContext>) {
        let endpoints = router.group("v1/webhook-endpoints")
        endpoints.post { request, context in
            let key = try await requireAdmin(request)
            let body: CreateRequest = try await decode(request, context: context)
            let audit = try audit(actor: body.actor, reason: body.reason, key: key)
            let (endpoint, secret) = try await validated {
                try await store.create(url: body.url, description: body.description ?? "", eventTypes: body.eventTypes, audit: audit)
            }
            return try JSONResponse.make(WebhookEndpointView(endpoint, secret: secret), status: .created)
        }
        endpoints.get { request, _ in
            try await requireAdmin(request)
            return try JSONResponse.make(ListBody(data: try await store.list().map { WebhookEndpointView($0) }))
        }
        endpoints.get(":endpoint_id") { request, context in
            try await requireAdmin(request)
            guard let endpoint = try await store.get(try endpointID(context)) else { throw Self.notFound }
            var view = WebhookEndpointView(endpoint)
            view.audit = try await store.audit(of: endpoint.id)
            return try JSONResponse.make(view)
        }
        endpoints.patch(":endpoint_id") { request, context in
            let key = try await requireAdmin(request)
            let id = try endpointID(context)
            let body: UpdateRequest = try await decode(request, context: context)
            let audit = try audit(actor: body.actor, reason: body.reason, key: key)
            let updated = try await validated {
                try await store.update(
                    id, url: body.url, description: body.description, eventTypes: body.eventTypes, enabled: body.enabled, audit: audit)
            }
            guard let updated else { throw Self.notFound }
            return try JSONResponse.make(WebhookEndpointView(updated))
        }
        endpoints.delete(":endpoint_id") { request, context in
            let key = try await requireAdmin(request)
            let id = try endpointID(context)
            let who = try await request.decodeJSON(Who.self, emptyIsObject: true, context: context)
            guard try await store.delete(id, audit: try audit(actor: who.actor, reason: who.reason, key: key)) else { throw Self.notFound }
            return Response(status: .noContent)
        }
        endpoints.post(":endpoint_id/rotate-secret") { request, context in
            let key = try await requireAdmin(request)
            let id = try endpointID(context)
            let who = try await request.decodeJSON(Who.self, emptyIsObject: true, context: context)
            let audit = try audit(actor: who.actor, reason: who.reason, key: key)
            guard let (endpoint, secret) = try await store.rotateSecret(id, now: clock.now(), audit: audit) else { throw Self.notFound }
            return try JSONResponse.make(WebhookEndpointView(endpoint, secret: secret))
        }
    }

    /// The record of a change: `actor` (default `admin`) and `reason` checked as for the other
    /// audited admin actions (400 `invalid_request`), at the service's clock.
    private func audit(actor: String?, reason: String?, key: String) throws -> EndpointStore.Audit {
        EndpointStore.Audit(actor: try AdminController.actor(actor, key: key, namedKeys: authenticator.hasNamedAdminKeys), reason: try AdminController.reason(reason), at: clock.now())
    }

    static let notFound = APIError(.notFound, code: "endpoint_not_found", message: "no webhook endpoint with that id")

    @discardableResult
    private func requireAdmin(_ request: Request) async throws -> String {
        try await authenticator.requireAdmin(request, for: "webhook endpoints")
    }

    private func endpointID(_ context: some RequestContext) throws -> UUID {
        try Self.endpointID(context.parameters.get("endpoint_id"))
    }

    /// An endpoint id from a path or a body: 400 `invalid_endpoint_id` unless it is a UUID.
    static func endpointID(_ text: String?) throws -> UUID {
        guard let text, let id = UUID(uuidString: text) else {
            throw APIError(.badRequest, code: "invalid_endpoint_id", message: "endpoint_id must be a UUID")
        }
        return id
    }

    private func decode<T: Decodable>(_ request: Request, context: SubsyncRequestContext) async throws -> T {
        try await request.decodeJSON(T.self, context: context)
    }

    private func validated<T>(_ body: () async throws -> T) async throws -> T {
        do {
            return try await body()
        } catch let error as EndpointStore.ValidationError {
            throw APIError(.unprocessableContent, code: "invalid_endpoint", message: error.description)
        }
    }
}
