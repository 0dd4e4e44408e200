import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import SubsyncClient
import Testing

/// SubsyncClient's base URL (docs/SECURITY.md, *The client libraries*): a URL in clear to
/// another machine is refused, since every request carries the account token.
@Suite("SubsyncClient: the base URL")
struct ClientTransportTests {
    static func configuration(_ url: String, folder: URL) throws -> SubsyncConfiguration {
        var configuration = SubsyncConfiguration(
            baseURL: try #require(URL(string: url)), accountID: "a-1", storageDirectory: folder, session: URLSession(configuration: .ephemeral),
            tokenProvider: { "token" })
        configuration.requestTimeout = 120
        return configuration
    }

    static func folder() -> URL {
        FileManager.default.temporaryDirectory.appendingPathComponent("transport-\(UUID().uuidString)")
    }

    @Test("an http:// base URL to another machine is refused unless allowed; loopback and https are taken")
    func insecureBaseURL() throws {
        let folder = Self.folder()
        defer { try? FileManager.default.removeItem(at: folder) }
        for url in ["http://sync.example.com", "http://127.0.0.1.example.com", "http://10.0.0.7:8080", "ftp://sync.example.com"] {
            #expect(throws: SubsyncClientError.self, "\(url)") { try SubsyncClient(configuration: try Self.configuration(url, folder: folder)) }
        }
        for url in ["https://sync.example.com", "http://127.0.0.1:8080", "http://localhost:8080", "http://[::1]:8080"] {
            _ = try SubsyncClient(configuration: try Self.configuration(url, folder: folder.appendingPathComponent(UUID().uuidString)))
        }
        var allowed = try Self.configuration("http://10.0.0.7:8080", folder: folder.appendingPathComponent("allowed"))
        allowed.allowsInsecureHTTP = true
        _ = try SubsyncClient(configuration: allowed)
    }
}
