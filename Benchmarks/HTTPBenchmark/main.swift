// HTTPBenchmark URL BODY_FILE [LOOPS] [SECONDS]
//
// The webhook sender's HTTP side alone (scripts/bench/http): LOOPS clients, each with its own
// libcurl loop as every delivery loop of `serve` has, send rounds of 500 POSTs of BODY_FILE to URL
// (headers shaped like a delivery's) through `CurlClient.executeAll`, for SECONDS. No database,
// no signing: what the Curl module costs per request, to set beside libcurl driven from C and
// wrk against the same receiver in the same run. Prints one line, `HTTPBENCH done=N failed=N`,
// as the C baseline prints its own; scripts/bench/http times both and reads the machine's CPU
// around both the same way.
import Curl
import Foundation

let arguments = CommandLine.arguments
guard arguments.count >= 3 else {
    FileHandle.standardError.write(Data("usage: HTTPBenchmark URL BODY_FILE [LOOPS] [SECONDS]\n".utf8))
    exit(2)
}
let url = arguments[1]
let body: [UInt8]
do {
    body = Array(try Data(contentsOf: URL(fileURLWithPath: arguments[2])))
} catch {
    FileHandle.standardError.write(Data("HTTPBenchmark: cannot read \(arguments[2]): \(error)\n".utf8))
    exit(2)
}
let loops = arguments.count > 3 ? Int(arguments[3]) ?? 4 : 4
let seconds = arguments.count > 4 ? Double(arguments[4]) ?? 5 : 5
let allowLoopback: AddressGuard
do {
    allowLoopback = try AddressGuard(allow: ["127.0.0.0/8", "::1/128"])
} catch {
    FileHandle.standardError.write(Data("HTTPBenchmark: \(error)\n".utf8))
    exit(2)
}

let deadline = ContinuousClock.now + .seconds(seconds)
let (succeeded, failed) = await withTaskGroup(of: (Int, Int).self) { group in
    for loop in 0..<loops {
        group.addTask {
            let client = CurlClient(configuration: .init(addressGuard: allowLoopback))
            defer { client.shutdown() }
            var succeeded = 0
            var failed = 0
            var sent = 0
            while ContinuousClock.now < deadline {
                let timestamp = String(Int(Date().timeIntervalSince1970))
                let requests = (0..<500).map { index in
                    sent += 1
                    return CurlRequest(
                        url: url,
                        headers: [
                            ("content-type", "application/json"),
                            ("webhook-id", "msg_\(loop)_\(sent)"),
                            ("webhook-timestamp", timestamp),
                            ("webhook-signature", "v1,K5oZfzN95Z9UVu1EsfQmfVNQhnkZ2pj9o9NDN/H/pI\(index % 10)="),
                        ],
                        body: body,
                        maximumResponseBytes: 4096)
                }
                for outcome in await client.executeAll(requests) {
                    if case .success(let response) = outcome.result, (200..<300).contains(response.status) {
                        succeeded += 1
                    } else {
                        failed += 1
                    }
                }
            }
            return (succeeded, failed)
        }
    }
    var total = (0, 0)
    for await (succeeded, failed) in group {
        total.0 += succeeded
        total.1 += failed
    }
    return total
}
print("HTTPBENCH done=\(succeeded) failed=\(failed)")
exit(failed == 0 ? 0 : 1)
