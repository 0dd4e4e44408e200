/// The transfers the loop has not started yet, queued by host, and how many each host has in
/// flight: the loop's own limit of connections per host.
///
/// Not libcurl's `CURLMOPT_MAX_HOST_CONNECTIONS`, which parks the transfers beyond it inside the
/// multi handle: libcurl 7.88 (Debian 12) does not always wake a parked transfer when a
/// connection comes free, so a round waits for the loop's one-second poll (docs/PERFORMANCE.md,
/// *In the code*), and a parked transfer's `CURLOPT_TIMEOUT` runs while it waits. Here a transfer
/// starts only when its host has a free slot, so libcurl never parks one, and its timeouts start
/// when it does. Hosts take turns, so one busy receiver does not hold up the others.
///
/// Not Sendable: owned and used by the loop thread alone.
struct CurlWaitingTransfers {
    /// First in, first out, in an array read from a moving head (compacted once half of it is
    /// read), so taking the first is O(1).
    struct Queue<Element> {
        private var elements: [Element] = []
        private var head = 0

        var isEmpty: Bool { head >= elements.count }

        mutating func append(_ element: Element) {
            elements.append(element)
        }

        mutating func popFirst() -> Element? {
            guard !isEmpty else { return nil }
            let element = elements[head]
            head += 1
            if head >= 64 && head * 2 >= elements.count {
                elements.removeFirst(head)
                head = 0
            }
            return element
        }

        /// Every element, the queue left empty.
        mutating func removeAll() -> [Element] {
            let rest = Array(elements[head...])
            elements.removeAll()
            head = 0
            return rest
        }
    }

    private struct Host {
        var waiting = Queue<CurlTransfer>()
        var active = 0
        /// Whether the host is in `ready`.
        var isReady = false

        var hasWaiting: Bool { !waiting.isEmpty }
    }

    /// In-flight transfers per host at most (libcurl bundles connections by host and port).
    let perHostLimit: Int
    private var hosts: [String: Host] = [:]
    /// Hosts with a waiting transfer and a free slot, in turn.
    private var ready = Queue<String>()

    /// `perHostLimit` 0 means no limit.
    init(perHostLimit: Int) {
        self.perHostLimit = perHostLimit > 0 ? perHostLimit : .max
    }

    /// Whether a transfer can start now.
    var hasStartable: Bool { !ready.isEmpty }

    /// Queues `transfer` behind the others of its host.
    mutating func append(_ transfer: CurlTransfer) {
        let key = transfer.hostKey
        hosts[key, default: Host()].waiting.append(transfer)
        markReadyIfStartable(key)
    }

    /// The next transfer to start, counted as in flight for its host until ``finished(_:)``.
    mutating func next() -> CurlTransfer? {
        while let key = ready.popFirst() {
            guard var host = hosts[key] else { continue }
            host.isReady = false
            guard host.active < perHostLimit, let transfer = host.waiting.popFirst() else {
                hosts[key] = host
                continue
            }
            host.active += 1
            hosts[key] = host
            markReadyIfStartable(key)
            return transfer
        }
        return nil
    }

    /// A transfer that ``next()`` returned is done (finished, cancelled, or never started).
    mutating func finished(_ transfer: CurlTransfer) {
        let key = transfer.hostKey
        guard var host = hosts[key] else { return }
        host.active -= 1
        if host.active <= 0 && !host.hasWaiting && !host.isReady {
            hosts[key] = nil
            return
        }
        hosts[key] = host
        markReadyIfStartable(key)
    }

    /// Every waiting transfer, removed (for shutdown).
    mutating func removeAll() -> [CurlTransfer] {
        var all: [CurlTransfer] = []
        for var host in hosts.values {
            all += host.waiting.removeAll()
        }
        hosts.removeAll()
        ready = Queue()
        return all
    }

    private mutating func markReadyIfStartable(_ key: String) {
        guard var host = hosts[key], !host.isReady, host.hasWaiting, host.active < perHostLimit else { return }
        host.isReady = true
        hosts[key] = host
        ready.append(key)
    }
}

extension CurlTransfer {
    /// The scheme, host and port of `url` (lowercased, without user information, without the
    /// scheme's default port): what libcurl shares connections by, and what the per-host limit
    /// counts.
    static func hostKey(of url: String) -> String {
        let bytes = Array(url.utf8)
        var authorityStart = 0
        var index = 0
        while index + 2 < bytes.count {
            if bytes[index] == UInt8(ascii: ":") && bytes[index + 1] == UInt8(ascii: "/") && bytes[index + 2] == UInt8(ascii: "/") {
                authorityStart = index + 3
                break
            }
            index += 1
        }
        var authorityEnd = authorityStart
        scan: while authorityEnd < bytes.count {
            switch bytes[authorityEnd] {
            case UInt8(ascii: "/"), UInt8(ascii: "?"), UInt8(ascii: "#"): break scan
            default: authorityEnd += 1
            }
        }
        var hostStart = authorityStart
        for position in authorityStart..<authorityEnd where bytes[position] == UInt8(ascii: "@") {
            hostStart = position + 1
        }
        let key = String(
            decoding: (bytes[..<authorityStart] + bytes[hostStart..<authorityEnd]).map {
                $0 >= UInt8(ascii: "A") && $0 <= UInt8(ascii: "Z") ? $0 + 32 : $0
            }, as: UTF8.self)
        // The scheme's own port, or an empty one, is the same host as none: one queue, as libcurl
        // shares one connection pool between them.
        for (scheme, port) in [("https://", ":443"), ("http://", ":80")] where key.hasPrefix(scheme) {
            for suffix in [port, ":"] where key.hasSuffix(suffix) {
                return String(key.dropLast(suffix.count))
            }
        }
        return key
    }
}
