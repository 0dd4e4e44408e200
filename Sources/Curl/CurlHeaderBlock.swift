/// The header lines of a response as libcurl hands them over, kept as bytes and parsed only
/// when someone reads them.
///
/// libcurl calls the header callback once per line, on the loop thread, and a 2xx answer needs
/// none of them: a delivery reads only `Retry-After`, and only from a 429 or 503. So the lines of
/// the final response are appended to one buffer, and ``fields`` parses them when read
/// (docs/PERFORMANCE.md, *In the code*).
struct CurlHeaderBlock: Sendable {
    /// The kept lines without their line endings, each followed by a `\n`.
    private var bytes: [UInt8] = []
    /// The kept lines' bytes (line endings and separators not counted), at most `limit`.
    private var counted = 0
    private let limit: Int

    init(limit: Int) {
        self.limit = limit
    }

    /// Takes one line from libcurl's header callback. A status line (`HTTP/...`) starts a new
    /// response, so a 1xx's lines are dropped; the blank line that ends a block is not kept;
    /// a line that would take the kept bytes past the limit is dropped.
    mutating func receive(_ data: UnsafeRawBufferPointer) {
        var line = data[...]
        while let last = line.last, last == UInt8(ascii: "\r") || last == UInt8(ascii: "\n") {
            line = line.dropLast()
        }
        if line.starts(with: "HTTP/".utf8) {
            bytes.removeAll(keepingCapacity: true)
            counted = 0
            return
        }
        guard !line.isEmpty, counted + line.count <= limit else { return }
        counted += line.count
        if bytes.isEmpty { bytes.reserveCapacity(256) }
        bytes.append(contentsOf: line)
        bytes.append(UInt8(ascii: "\n"))
    }

    /// The headers in order: names lowercased (they are ASCII tokens), values without the
    /// whitespace around them, an obs-fold continuation joined to the value before it with a
    /// space, and lines without a colon or without a name skipped.
    var fields: [(name: String, value: String)] {
        var fields: [(name: String, value: String)] = []
        for line in bytes.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: true) {
            if let first = line.first, first == UInt8(ascii: " ") || first == UInt8(ascii: "\t") {
                if let lastIndex = fields.indices.last {
                    let more = String(decoding: line, as: UTF8.self).trimmingASCIIWhitespace()
                    fields[lastIndex].value += " " + more
                }
                continue
            }
            guard let colon = line.firstIndex(of: UInt8(ascii: ":")) else { continue }
            let name = String(decoding: line[..<colon].map(\.asciiLowercased), as: UTF8.self)
                .trimmingASCIIWhitespace()
            let value = String(decoding: line[(colon + 1)...], as: UTF8.self).trimmingASCIIWhitespace()
            guard !name.isEmpty else { continue }
            fields.append((name: name, value: value))
        }
        return fields
    }
}
