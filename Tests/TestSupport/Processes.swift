import Foundation

/// Runs a program to its end with output in files (no pipe a background child could hold open).
public func runProcess(_ path: String, _ arguments: [String], directory: URL? = nil) async throws -> (status: Int32, stdout: String, output: String) {
    let base = FileManager.default.temporaryDirectory.appendingPathComponent("subsync-run-\(UUID().uuidString)")
    let outFile = base.appendingPathExtension("out"), errFile = base.appendingPathExtension("err")
    _ = FileManager.default.createFile(atPath: outFile.path, contents: nil)
    _ = FileManager.default.createFile(atPath: errFile.path, contents: nil)
    defer {
        try? FileManager.default.removeItem(at: outFile)
        try? FileManager.default.removeItem(at: errFile)
    }
    let process = Process()
    process.executableURL = URL(fileURLWithPath: path)
    process.arguments = arguments
    if let directory { process.currentDirectoryURL = directory }
    let out = try FileHandle(forWritingTo: outFile), err = try FileHandle(forWritingTo: errFile)
    process.standardOutput = out
    process.standardError = err
    process.standardInput = FileHandle.nullDevice
    try process.run()
    try out.close()
    try err.close()
    _ = await waitUntil(seconds: 3600) { !process.isRunning }
    let stdout = try String(contentsOf: outFile, encoding: .utf8)
    return (process.terminationStatus, stdout, stdout + (try String(contentsOf: errFile, encoding: .utf8)))
}
