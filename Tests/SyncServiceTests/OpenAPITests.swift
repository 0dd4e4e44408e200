import Foundation
import Hummingbird
import HummingbirdTesting
import Testing
import TestSupport

@Suite("OpenAPI document and metrics")
struct OpenAPITests {
    /// `(method, path)` of every operation in the document, read from its text.
    static func documentedOperations(_ yaml: String) -> [(String, String)] {
        var operations: [(String, String)] = []
        var currentPath: String?
        var inPaths = false
        for line in yaml.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.hasPrefix("paths:") { inPaths = true; continue }
            if inPaths, !line.hasPrefix(" "), !line.isEmpty { inPaths = false }
            guard inPaths else { continue }
            if line.hasPrefix("  /"), line.hasSuffix(":") {
                currentPath = String(line.dropFirst(2).dropLast())
            } else if let currentPath, line.hasPrefix("    "), !line.hasPrefix("     ") {
                let method = line.trimmingCharacters(in: .whitespaces).dropLast()
                if ["get", "post", "put", "patch", "delete"].contains(String(method)) {
                    operations.append((String(method), currentPath))
                }
            }
        }
        return operations
    }

    /// Whether the router found no route: 405, or 404 with the generic `not_found` code (our
    /// handlers' own 404s name what was missing, such as `endpoint_not_found`).
    static func isRouterMiss(_ response: TestResponse) -> Bool {
        let body = String(buffer: response.body)
        return response.status == .methodNotAllowed
            || (response.status == .notFound && (!body.contains("\"code\"") || body.contains("\"not_found\"")))
    }

    @Test("GET /openapi.yaml serves the document, and every documented route exists")
    func everyDocumentedRouteExists() async throws {
        try await TestEnvironment.withFresh { env in
            try await env.application(workers: 0).test(.router) { client in
                let yaml = try await client.execute(uri: "/openapi.yaml", method: .get) { response in
                    #expect(response.status == .ok)
                    return String(buffer: response.body)
                }
                #expect(yaml.hasPrefix("openapi: 3"))
                // A real YAML parser (PyYAML, in the project's .venv/) reads it:
                // a stray `key: value` inside a plain scalar breaks every client generator.
                let parser = Process()
                parser.executableURL = URL(fileURLWithPath: "/usr/bin/env")
                parser.arguments = [try TestPackage.python(), "-c", "import sys, yaml; d = yaml.safe_load(sys.stdin); print(len(d['paths']))"]
                let input = Pipe()
                let output = Pipe()
                parser.standardInput = input
                parser.standardOutput = output
                parser.standardError = output
                try parser.run()
                input.fileHandleForWriting.write(Data(yaml.utf8))
                try input.fileHandleForWriting.close()
                let parsed = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
                parser.waitUntilExit()
                #expect(parser.terminationStatus == 0, "openapi.yaml is not valid YAML: \(parsed)")
                let operations = Self.documentedOperations(yaml)
                #expect(operations.count >= 13)
                // The check itself can fail: an undocumented path is a router miss.
                try await client.execute(uri: "/v1/no-such-route", method: .get, headers: [.authorization: "Bearer \(TestCredentials.adminKey)"]) { response in
                    #expect(Self.isRouterMiss(response))
                }
                for (method, path) in operations {
                    let uri = path.replacingOccurrences(of: "{account_id}", with: "acct-1")
                        .replacingOccurrences(of: "{feature}", with: "video_calling")
                        .replacingOccurrences(of: "{endpoint_id}", with: UUID().uuidString)
                    let httpMethod: HTTPRequest.Method = switch method {
                    case "post": .post
                    case "patch": .patch
                    case "delete": .delete
                    default: .get
                    }
                    try await client.execute(uri: uri, method: httpMethod, headers: [.authorization: "Bearer \(TestCredentials.adminKey)"], body: ByteBuffer(string: "{}")) { response in
                        // The router's own 404/405 (no JSON error body) means the route is missing;
                        // our handlers' 404s name what was not found.
                        #expect(!Self.isRouterMiss(response), "\(method.uppercased()) \(path) → \(response.status)")
                    }
                }
            }
        }
    }

    @Test("GET /metrics exposes request, queue and resolution metrics in Prometheus format")
    func metrics() async throws {
        try await TestEnvironment.withFresh { env in
            try await env.application(workers: 1).testLive { client in
                _ = try await client.sync(account: "m1", body: try SyncBody(device: "iphone", reports: [TestReports.report("r1")]).data)
                try await client.execute(uri: "/metrics", method: .get) { response in
                    #expect(response.status == .ok)
                    #expect(response.headers[.contentType]?.hasPrefix("text/plain") == true)
                    let text = String(buffer: response.body)
                    for name in ["subsync_reports_accepted_total", "subsync_reports_resolved_total", "subsync_resolution_batch_reports", "hb_requests"] {
                        #expect(text.contains(name), "missing \(name)")
                    }
                }
            }
        }
    }
}
