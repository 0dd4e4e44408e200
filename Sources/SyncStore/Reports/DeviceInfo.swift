/// The device a sync request came from.
public struct DeviceInfo: Sendable, Hashable, Codable {
    public var id: String
    public var platform: String?
    public var appVersion: String?

    public init(id: String, platform: String? = nil, appVersion: String? = nil) {
        self.id = id
        self.platform = platform
        self.appVersion = appVersion
    }

    enum CodingKeys: String, CodingKey {
        case id
        case platform
        case appVersion = "app_version"
    }
}
