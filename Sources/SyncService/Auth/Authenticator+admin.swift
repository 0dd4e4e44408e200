import Hummingbird

extension Authenticator {
    /// Authenticates `request` and requires the admin key: 401 without a valid credential, 403
    /// `forbidden` for a device token (`what` names the routes in the message).
    func requireAdmin(_ request: Request, for what: String) async throws {
        guard try await authenticate(request) == .admin else {
            throw APIError(.forbidden, code: "forbidden", message: "\(what) need the admin key")
        }
    }
}
