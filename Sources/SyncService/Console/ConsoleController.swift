import Hummingbird
import HTTPTypes
import NIOCore

/// `GET /console`: the operator console, one HTML page with its stylesheet and script, compiled
/// into the binary (no CDN, works offline). Served only when the admin key is configured (404
/// otherwise); the page itself holds no data: every call it makes is to the admin API with the
/// key the operator types, kept in the tab's `sessionStorage`.
///
/// Every answer carries a Content-Security-Policy that allows only this origin's script and
/// stylesheet (no inline code, no other origin, no framing, no form posts), `nosniff` and
/// `no-referrer`.
struct ConsoleController: Sendable {
    /// Whether the admin key is configured.
    let enabled: Bool

    static let contentSecurityPolicy =
        "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; "
        + "form-action 'none'; frame-ancestors 'none'; base-uri 'none'"

    func addRoutes(to router: Router<some RequestContext>) {
        router.get("console") { _, _ in
            try serve(PackageResources.console_html, type: "text/html; charset=utf-8")
        }
        router.get("console/console.js") { _, _ in
            try serve(PackageResources.console_js, type: "text/javascript; charset=utf-8")
        }
        router.get("console/console.css") { _, _ in
            try serve(PackageResources.console_css, type: "text/css; charset=utf-8")
        }
    }

    private func serve(_ bytes: [UInt8], type: String) throws -> Response {
        guard enabled else {
            throw APIError.notFound("the console is off: set SUBSYNC_ADMIN_KEY to serve it")
        }
        var headers = Self.securityHeaders
        headers[.contentType] = type
        return Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: bytes)))
    }

    static let securityHeaders: HTTPFields = {
        var fields: HTTPFields = [
            .contentSecurityPolicy: ConsoleController.contentSecurityPolicy,
            .xContentTypeOptions: "nosniff",
            .cacheControl: "no-store",
        ]
        // Names HTTPTypes has no constant for; both are valid tokens, so the names always exist.
        for (name, value) in [("Referrer-Policy", "no-referrer"), ("X-Frame-Options", "DENY")] {
            if let name = HTTPField.Name(name) { fields[name] = value }
        }
        return fields
    }()
}
