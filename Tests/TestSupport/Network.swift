import Foundation
import Postgres

/// The HTTP status of a GET, or 0 when nothing answers. Uses curl, so the check is independent
/// of our own HTTP stack. Callers poll it until it answers 200; each try may take a minute (a
/// busy core can keep an answer from coming within a few seconds).
public func httpStatus(_ url: String) async -> Int {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/curl")
    process.arguments = ["-s", "-o", "/dev/null", "-w", "%{http_code}", "--max-time", "60", url]
    let pipe = Pipe()
    process.standardOutput = pipe
    process.standardError = FileHandle.nullDevice
    guard (try? process.run()) != nil else { return 0 }
    // Off the cooperative pool: the read and the wait block until curl ends.
    let data = (try? await runBlocking { () -> Data in
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return data
    }) ?? Data()
    return Int(String(decoding: data, as: UTF8.self)) ?? 0
}

/// A TCP port on 127.0.0.1 that was free a moment ago, chosen below the kernel's ephemeral range
/// (32768-60999 here): a port the kernel hands out (to an outgoing connection, or to a bind to
/// port 0) can be taken by anything between this choice and the server's bind, which on a busy
/// core is a long moment; below the range only another test choosing the same way competes.
public func freeTCPPort() -> Int {
    for _ in 0..<64 {
        let port = Int.random(in: 20_000..<32_768)
        if portIsFree(port) { return port }
    }
    return LocalServer.freePort()
}

/// Whether a TCP socket can be bound to `port` on 127.0.0.1 now.
private func portIsFree(_ port: Int) -> Bool {
    withLoopbackSocket(port: port) { descriptor, address, length in bind(descriptor, address, length) == 0 }
}

/// Connections process `pid` holds on TCP port `port` (its listening socket included): its
/// descriptors that are sockets whose local port is that one (/proc/net/tcp*), not the database
/// pool's, nor those the kernel holds in the listen backlog, which the process has not accepted.
public func connectionsHeld(by pid: Int32, port: Int) -> Int {
    var inodes: Set<String> = []
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        // Read to the end: /proc files report a size of 0, and a read by size stops at a page.
        guard let handle = FileHandle(forReadingAtPath: table) else { continue }
        let text = String(decoding: handle.readDataToEndOfFile(), as: UTF8.self)
        try? handle.close()
        for line in text.split(separator: "\n").dropFirst() {
            let fields = line.split(separator: " ")
            guard fields.count > 9, let local = fields[1].split(separator: ":").last.flatMap({ Int($0, radix: 16) }), local == port
            else { continue }
            inodes.insert(String(fields[9]))
        }
    }
    let directory = "/proc/\(pid)/fd"
    let entries = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
    return entries.filter { entry in
        guard let target = try? FileManager.default.destinationOfSymbolicLink(atPath: directory + "/" + entry), target.hasPrefix("socket:[")
        else { return false }
        return inodes.contains(String(target.dropFirst(8).dropLast()))
    }.count
}
