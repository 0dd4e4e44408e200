import Foundation

/// The App Store Server API settings as the environment gives them (docs/STORE.md,
/// "Configuration"); ``configuration(bundleID:)`` reads the key when the service starts.
public struct AppStoreAPISettings: Sendable, Equatable {
    /// `SUBSYNC_APPSTORE_KEY_FILE`: the in-app purchase key (`.p8`) from App Store Connect.
    public var keyFile: String
    /// `SUBSYNC_APPSTORE_KEY_ID`: the key's id.
    public var keyID: String
    /// `SUBSYNC_APPSTORE_ISSUER_ID`: the team's issuer id.
    public var issuerID: String
    /// `SUBSYNC_APPSTORE_ENVIRONMENT`: `production` (default) or `sandbox`.
    public var environment: AppStoreAPIConfiguration.Environment
    /// `SUBSYNC_APPSTORE_BASE_URL`: another base URL (a test double, a proxy): `https://`, or
    /// `http://` to a loopback address only (the bearer token must never cross a network in clear).
    public var baseURL: String?

    /// The settings in `environment`; `nil` when `SUBSYNC_APPSTORE_KEY_FILE` is unset or empty.
    public init?(environment: [String: String]) throws(ConfigurationError) {
        guard let keyFile = environment["SUBSYNC_APPSTORE_KEY_FILE"], !keyFile.isEmpty else {
            for name in ["SUBSYNC_APPSTORE_KEY_ID", "SUBSYNC_APPSTORE_ISSUER_ID", "SUBSYNC_APPSTORE_BASE_URL"]
            where !(environment[name] ?? "").isEmpty {
                throw ConfigurationError(variable: name, message: "is set but SUBSYNC_APPSTORE_KEY_FILE is not: the App Store Server API needs its key")
            }
            return nil
        }
        func required(_ name: String) throws(ConfigurationError) -> String {
            guard let value = environment[name]?.trimmingCharacters(in: .whitespaces), !value.isEmpty else {
                throw ConfigurationError(variable: name, message: "is required with SUBSYNC_APPSTORE_KEY_FILE")
            }
            guard value.count <= 128, value.allSatisfy({ $0.isASCII && !$0.isWhitespace }) else {
                throw ConfigurationError(variable: name, message: "must be the id App Store Connect shows (ASCII, no spaces)")
            }
            return value
        }
        self.keyFile = keyFile
        keyID = try required("SUBSYNC_APPSTORE_KEY_ID")
        issuerID = try required("SUBSYNC_APPSTORE_ISSUER_ID")
        let name = environment["SUBSYNC_APPSTORE_ENVIRONMENT"].map { $0.lowercased() } ?? "production"
        guard let parsed = AppStoreAPIConfiguration.Environment(rawValue: name.isEmpty ? "production" : name) else {
            throw ConfigurationError(variable: "SUBSYNC_APPSTORE_ENVIRONMENT", message: "must be production or sandbox, got \"\(name.prefix(40))\"")
        }
        self.environment = parsed
        if let url = environment["SUBSYNC_APPSTORE_BASE_URL"], !url.isEmpty {
            guard let reason = Self.problem(withBaseURL: url) else {
                baseURL = url.hasSuffix("/") ? String(url.dropLast()) : url
                return
            }
            throw ConfigurationError(variable: "SUBSYNC_APPSTORE_BASE_URL", message: reason)
        }
    }

    /// Why `url` cannot be the API's base URL, if it cannot.
    static func problem(withBaseURL url: String) -> String? {
        guard let components = URLComponents(string: url), let scheme = components.scheme?.lowercased(), let host = components.host, !host.isEmpty,
            components.query == nil, components.fragment == nil, components.user == nil, components.password == nil
        else { return "must be a URL such as https://api.storekit.apple.com, got \"\(url.prefix(80))\"" }
        switch scheme {
        case "https": return nil
        case "http" where isLoopback(host): return nil
        case "http": return "http:// is allowed to a loopback address only (the request carries the API key's token); use https://"
        default: return "must be an https:// URL, got \"\(url.prefix(80))\""
        }
    }

    /// Whether `host` is a loopback address: `localhost`, `::1`, or four decimal octets from
    /// 127.0.0.0/8 (a name that merely starts with `127.` is not).
    static func isLoopback(_ host: String) -> Bool {
        let host = host.lowercased().trimmingCharacters(in: CharacterSet(charactersIn: "[]"))
        if host == "localhost" || host == "::1" { return true }
        let octets = host.split(separator: ".", omittingEmptySubsequences: false)
        guard octets.count == 4, octets.allSatisfy({ !$0.isEmpty && $0.count <= 3 && $0.allSatisfy(\.isASCII) && $0.allSatisfy(\.isNumber) }) else {
            return false
        }
        let values = octets.compactMap { Int($0) }
        return values.count == 4 && values[0] == 127 && values.allSatisfy { $0 <= 255 }
    }

    /// Reads the key and builds the client configuration.
    public func configuration(bundleID: String?) throws(ConfigurationError) -> AppStoreAPIConfiguration {
        guard let bundleID, !bundleID.isEmpty else {
            throw ConfigurationError(variable: "SUBSYNC_BUNDLE_ID", message: "is required with SUBSYNC_APPSTORE_KEY_FILE (the token's bid)")
        }
        let text: String
        do {
            text = try String(contentsOf: URL(fileURLWithPath: keyFile), encoding: .utf8)
        } catch {
            throw ConfigurationError(variable: "SUBSYNC_APPSTORE_KEY_FILE", message: "cannot read \(keyFile): \(error.localizedDescription)")
        }
        do {
            let key = try AppStoreAPIConfiguration.privateKey(pem: text, source: keyFile)
            return AppStoreAPIConfiguration(
                keyID: keyID, issuerID: issuerID, bundleID: bundleID, privateKey: key, environment: environment, baseURL: baseURL)
        } catch {
            throw ConfigurationError(variable: "SUBSYNC_APPSTORE_KEY_FILE", message: error.description)
        }
    }
}
