import Curl
import Testing

@Suite("libcurl")
struct CurlLibraryTests {
    @Test("libcurl initialises and reports its version")
    func version() {
        #expect(CurlLibrary.version.hasPrefix("libcurl/"))
    }
}
