import CCurl

/// Process-wide libcurl state.
///
/// `curl_global_init` is not thread-safe and must run once before any other libcurl call;
/// a Swift `static let` is initialised exactly once, atomically, on first use.
public enum CurlLibrary {
    private static let initialization: CURLcode = curl_global_init(Int(CURL_GLOBAL_DEFAULT))

    /// A write to a socket whose peer has gone raises SIGPIPE, which kills the process by default.
    /// libcurl is told not to touch signals (`CURLOPT_NOSIGNAL`), so the process ignores SIGPIPE once
    /// and such writes fail with EPIPE instead.
    private static let sigpipeIgnored: Void = subsync_ignore_sigpipe()

    /// Initialises libcurl if that has not happened yet. Cheap after the first call.
    public static func ensureInitialized() {
        _ = initialization
        _ = sigpipeIgnored
    }

    /// The libcurl version string, such as `libcurl/7.88.1 OpenSSL/3.0.15`.
    public static var version: String {
        ensureInitialized()
        return String(cString: curl_version())
    }
}
