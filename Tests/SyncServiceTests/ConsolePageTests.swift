import Foundation
import Hummingbird
import HummingbirdTesting
import SyncService
import Testing
import TestSupport

/// `GET /console`: served from the binary with a strict CSP, only when the admin key is set.
@Suite("Operator console page")
struct ConsolePageTests {
    static let assets = [
        ("/console", "text/html; charset=utf-8"),
        ("/console/console.js", "text/javascript; charset=utf-8"),
        ("/console/console.css", "text/css; charset=utf-8"),
    ]

    @Test("the page and its assets come with a strict Content-Security-Policy, nosniff and no-referrer; no credential needed for the page itself")
    func servedWithSecurityHeaders() async throws {
        try await TestEnvironment.withFresh { env in
            try await env.application(workers: 0).test(.router) { client in
                var bodies: [String: String] = [:]
                for (path, type) in Self.assets {
                    try await client.execute(uri: path, method: .get) { response in
                        #expect(response.status == .ok, "\(path)")
                        #expect(response.headers[.contentType] == type)
                        let csp = response.headers[.contentSecurityPolicy] ?? ""
                        #expect(csp.contains("default-src 'none'"))
                        #expect(csp.contains("script-src 'self'"))
                        #expect(csp.contains("style-src 'self'"))
                        #expect(csp.contains("frame-ancestors 'none'"))
                        #expect(csp.contains("form-action 'none'"))
                        #expect(!csp.contains("unsafe"))
                        #expect(response.headers[.xContentTypeOptions] == "nosniff")
                        #expect(response.headers.first { $0.name.rawName.lowercased() == "referrer-policy" }?.value == "no-referrer")
                        #expect(response.headers[.cacheControl] == "no-store")
                        bodies[path] = String(buffer: response.body)
                    }
                }
                let html = try #require(bodies["/console"])
                #expect(html.contains("<script src=\"/console/console.js\" defer></script>"))
                // Nothing inline for the CSP to refuse: no inline script, style or handler.
                #expect(html.components(separatedBy: "<script").count == 2)
                #expect(!html.contains("<style"))
                #expect(!html.contains(" style="))
                #expect(html.range(of: #" on[a-z]+="#, options: .regularExpression) == nil)
                #expect(!html.contains("http://") && !html.contains("https://"), "the page loads nothing from elsewhere")
                let script = try #require(bodies["/console/console.js"])
                // Data is put in the page as text only.
                #expect(!script.contains("innerHTML") && !script.contains("outerHTML") && !script.contains("insertAdjacentHTML"))
                #expect(!script.contains("document.write") && !script.contains("eval("))
                #expect(!script.contains("localStorage") && !script.contains("document.cookie"), "the key stays in sessionStorage")
                #expect(script.contains("sessionStorage"))
            }
        }
    }

    @Test("without an admin key the console is not served: 404")
    func offWithoutAdminKey() async throws {
        try await TestEnvironment.withFresh { env in
            let authenticator = await Authenticator(adminKey: nil, tokenSecret: TestCredentials.tokenSecret)
            try await env.application(workers: 0, authenticator: authenticator).test(.router) { client in
                for (path, _) in Self.assets {
                    let (status, json) = try await client.getJSON(path, credential: nil)
                    #expect(status == .notFound, "\(path)")
                    #expect(json.errorCode == "not_found")
                }
                // And the admin routes refuse every credential.
                let (status, _) = try await client.getJSON("/v1/admin/stats", credential: TestCredentials.adminKey)
                #expect(status == .unauthorized)
            }
        }
    }
}
