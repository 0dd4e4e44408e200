/// Why a ``StoreKitVerifier`` could not be configured.
public enum StoreKitVerifierConfigurationError: Error, Sendable, Equatable, CustomStringConvertible {
    /// No trusted root certificate was given.
    case noRootCertificates
    /// A root certificate could not be read or parsed (DER or PEM).
    case unreadableCertificate(source: String, reason: String)
    /// The bundle id is empty.
    case emptyBundleID
    /// No environment is allowed.
    case noEnvironments

    /// A message for operators.
    public var description: String {
        switch self {
        case .noRootCertificates: "no trusted root certificate configured"
        case .unreadableCertificate(let source, let reason): "cannot read root certificate \(source): \(reason)"
        case .emptyBundleID: "the bundle id is empty"
        case .noEnvironments: "no StoreKit environment is allowed"
        }
    }
}
