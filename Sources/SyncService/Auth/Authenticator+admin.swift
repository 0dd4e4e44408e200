import Hummingbird

extension Authenticator {
    /// Authenticates `request` and requires an admin key: 401 without a valid credential, 403
    /// `forbidden` for a device token (`what` names the routes in the message). Returns the
    /// key's name, which audit records carry as the actor.
    @discardableResult
    func requireAdmin(_ request: Request, for what: String) async throws -> String {
        guard case .admin(let name) = try await authenticate(request) else {
            throw APIError(.forbidden, code: "forbidden", message: "\(what) need the admin key")
        }
        return name
    }
}
