#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// A value behind a pthread mutex.
///
/// A pthread mutex rather than `Synchronization.Mutex`: ThreadSanitizer intercepts pthread locks,
/// so a `-sanitize=thread` run checks the threading of this module (it cannot see inside the
/// toolchain's uninstrumented `Mutex` and reports false races on Linux).
///
/// `@unchecked Sendable`: `value` is only read or written inside `withLock`, under `mutex`.
final class CurlLock<Value: Sendable>: @unchecked Sendable {
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    private var value: Value

    init(_ value: Value) {
        self.value = value
        mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        let created = pthread_mutex_init(mutex, nil)
        precondition(created == 0, "pthread_mutex_init failed: \(created)")
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deinitialize(count: 1)
        mutex.deallocate()
    }

    func withLock<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body(&value)
    }
}
