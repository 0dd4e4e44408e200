import CCurl

/// Process-wide libcurl state.
///
/// `curl_global_init` is not thread-safe and must run once before any other libcurl call;
/// a Swift `static let` is initialised exactly once, atomically, on first use.
public enum CurlLibrary {
    private static let initialization: CURLcode = curl_global_init(Int(CURL_GLOBAL_DEFAULT))

    /// Initialises libcurl if that has not happened yet. Cheap after the first call.
    public static func ensureInitialized() {
        _ = initialization
    }

    /// The libcurl version string, such as `libcurl/7.88.1 OpenSSL/3.0.15`.
    public static var version: String {
        ensureInitialized()
        return String(cString: curl_version())
    }
}
