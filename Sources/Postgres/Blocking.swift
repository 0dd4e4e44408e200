import Dispatch

/// Runs blocking work (a process, the file system, a C call that waits) on a Dispatch thread,
/// off Swift's cooperative pool, and returns its result to the awaiting task.
public func runBlocking<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        DispatchQueue.global().async {
            continuation.resume(with: Result { try body() })
        }
    }
}
