import CCurl
import Logging

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// The multi handle's address, for `curl_multi_wakeup` from other threads.
///
/// `@unchecked Sendable`: libcurl documents `curl_multi_wakeup` as callable from any thread; that is
/// the only use of this value off the loop thread, and it happens under `CurlSubmissionQueue`'s lock
/// while the queue is open, i.e. strictly before the loop thread can call `curl_multi_cleanup`.
struct CurlMultiHandle: @unchecked Sendable {
    let pointer: UnsafeMutableRawPointer
}

/// What callers hand to the loop thread: new transfers, cancelled transfers, and shutdown.
final class CurlSubmissionQueue: Sendable {
    struct Batch {
        var submitted: [CurlTransfer] = []
        var cancelled: [CurlTransfer] = []
        var isShutDown = false

        /// Nothing queued since the loop last took the batch. Only the first transfer queued
        /// after a `take` wakes the loop: the loop takes everything queued before it sleeps
        /// again, and a wake-up raised while it is awake makes its next poll return at once,
        /// so one `curl_multi_wakeup` (a write to the handle's wake-up pipe) per batch is enough.
        var isEmpty: Bool { submitted.isEmpty && cancelled.isEmpty }
    }

    private struct State {
        /// Present while the loop runs; cleared by `shutDown`, after which nothing wakes the handle.
        var multi: CurlMultiHandle?
        var batch = Batch()
    }

    private let state: CurlLock<State>

    init(multi: CurlMultiHandle?) {
        state = CurlLock(State(multi: multi, batch: Batch(isShutDown: multi == nil)))
    }

    /// Queues a transfer for the loop. False when the client is shut down.
    func submit(_ transfer: CurlTransfer) -> Bool {
        submit(contentsOf: CollectionOfOne(transfer))
    }

    /// Queues transfers for the loop, in one hand-over. False when the client is shut down (then
    /// none is queued).
    func submit(contentsOf transfers: some Collection<CurlTransfer>) -> Bool {
        state.withLock { state in
            guard !state.batch.isShutDown, let multi = state.multi else { return false }
            guard !transfers.isEmpty else { return true }
            let wake = state.batch.isEmpty
            state.batch.submitted.append(contentsOf: transfers)
            if wake { curl_multi_wakeup(multi.pointer) }
            return true
        }
    }

    /// Asks the loop to drop a transfer. After shutdown the loop fails it with `.shutDown` anyway.
    func cancel(_ transfer: CurlTransfer) {
        cancel(contentsOf: CollectionOfOne(transfer))
    }

    /// Asks the loop to drop transfers, in one hand-over.
    func cancel(contentsOf transfers: some Collection<CurlTransfer>) {
        state.withLock { state in
            guard !state.batch.isShutDown, let multi = state.multi, !transfers.isEmpty else { return }
            let wake = state.batch.isEmpty
            state.batch.cancelled.append(contentsOf: transfers)
            if wake { curl_multi_wakeup(multi.pointer) }
        }
    }

    func shutDown() {
        state.withLock { state in
            guard !state.batch.isShutDown else { return }
            state.batch.isShutDown = true
            if let multi = state.multi {
                curl_multi_wakeup(multi.pointer)
            }
            state.multi = nil
        }
    }

    /// Everything queued since the last call (loop thread).
    func take() -> Batch {
        state.withLock { state in
            let batch = state.batch
            state.batch.submitted.removeAll()
            state.batch.cancelled.removeAll()
            return batch
        }
    }
}

/// The loop thread's own state: the multi handle and the transfers it drives.
/// Not Sendable: created by `start`, then used by the loop thread alone.
final class CurlLoop {
    private let multi: UnsafeMutableRawPointer
    private let queue: CurlSubmissionQueue
    private let maximumConcurrentTransfers: Int
    private let logger: Logger
    /// Transfers added to the multi handle, by easy handle.
    private var active: [UnsafeMutableRawPointer: CurlTransfer] = [:]
    /// Transfers waiting for a free slot, by host.
    private var waiting: CurlWaitingTransfers
    /// Easy handles of finished transfers, reset, for the next ones (at most 32; the rest are
    /// freed).
    private var spareHandles: [UnsafeMutableRawPointer] = []

    private init(multi: UnsafeMutableRawPointer, queue: CurlSubmissionQueue, configuration: CurlClient.Configuration) {
        self.multi = multi
        self.queue = queue
        self.maximumConcurrentTransfers = configuration.maximumConcurrentTransfers
        self.waiting = CurlWaitingTransfers(perHostLimit: configuration.maximumConnectionsPerHost)
        self.logger = configuration.logger
    }

    /// Creates the multi handle and its thread. If either fails, the returned queue is already shut
    /// down, so every request fails with `.shutDown` (and the failure is logged).
    static func start(configuration: CurlClient.Configuration) -> CurlSubmissionQueue {
        guard let multi = curl_multi_init() else {
            configuration.logger.error("curl_multi_init failed; the HTTP client cannot send anything")
            return CurlSubmissionQueue(multi: nil)
        }
        // No CURLMOPT_MAX_HOST_CONNECTIONS: the loop keeps to the per-host limit itself, so that
        // libcurl never parks a transfer (see `CurlWaitingTransfers`).
        // The connection cache keeps up to this many idle connections for reuse.
        _ = subsync_curl_multi_setopt_long(multi, CURLMOPT_MAXCONNECTS, configuration.maximumConcurrentTransfers)

        let queue = CurlSubmissionQueue(multi: CurlMultiHandle(pointer: multi))
        let loop = CurlLoop(multi: multi, queue: queue, configuration: configuration)
        // The thread owns the loop: this +1 is taken back by `takeRetainedValue` in the thread's
        // entry point, or right below if the thread cannot be created.
        let context = Unmanaged.passRetained(loop).toOpaque()
        #if canImport(Darwin)
        var thread: pthread_t?
        #else
        var thread = pthread_t()
        #endif
        let created = pthread_create(&thread, nil, { context in
            #if canImport(Darwin)
            let loop = Unmanaged<CurlLoop>.fromOpaque(context).takeRetainedValue()
            #else
            guard let context else { return nil }
            let loop = Unmanaged<CurlLoop>.fromOpaque(context).takeRetainedValue()
            #endif
            loop.run()
            return nil
        }, context)
        guard created == 0 else {
            configuration.logger.error("could not start the HTTP client thread", metadata: ["errno": "\(created)"])
            Unmanaged<CurlLoop>.fromOpaque(context).release()
            queue.shutDown()
            curl_multi_cleanup(multi)
            return queue
        }
        #if canImport(Darwin)
        if let thread { pthread_detach(thread) }
        #else
        pthread_detach(thread)
        #endif
        return queue
    }

    private func run() {
        subsync_set_thread_name("subsync-curl")
        logger.debug("HTTP client loop started")
        while true {
            let batch = queue.take()
            for transfer in batch.submitted {
                waiting.append(transfer)
            }
            for transfer in batch.cancelled {
                cancel(transfer)
            }
            if batch.isShutDown {
                break
            }
            startWaiting()
            var running: Int32 = 0
            let performed = curl_multi_perform(multi, &running)
            if performed != CURLM_OK {
                logger.error("curl_multi_perform failed: \(String(cString: curl_multi_strerror(performed)))")
            }
            if readFinished() && waiting.hasStartable && active.count < maximumConcurrentTransfers {
                continue  // slots came free: start the next transfers before sleeping
            }
            // Sleeps until a socket is ready, libcurl's next timeout, or `curl_multi_wakeup`.
            var ready: Int32 = 0
            let polled = curl_multi_poll(multi, nil, 0, 1000, &ready)
            if polled != CURLM_OK {
                logger.error("curl_multi_poll failed: \(String(cString: curl_multi_strerror(polled)))")
            }
        }
        failEverything()
        logger.debug("HTTP client loop stopped")
    }

    private func startWaiting() {
        while active.count < maximumConcurrentTransfers, let transfer = waiting.next() {
            guard transfer.isWanted else {
                // Cancelled while it waited. Its caller is normally told by the loop's `cancel`,
                // which follows; told here too (only the first `finish` counts), in case a
                // shutdown comes between the cancellation and its hand-over to the loop.
                waiting.finished(transfer)
                transfer.finish(.failure(CancellationError()))
                continue
            }
            if let startBy = transfer.request.startBy, ContinuousClock.now > startBy {
                waiting.finished(transfer)
                transfer.finish(.failure(CurlError.notStarted))
                continue
            }
            let easy: UnsafeMutableRawPointer
            do {
                easy = try transfer.start(reusing: spareHandles.popLast())
            } catch {
                waiting.finished(transfer)
                transfer.finish(.failure(error))
                continue
            }
            let added = curl_multi_add_handle(multi, easy)
            guard added == CURLM_OK else {
                waiting.finished(transfer)
                transfer.cleanup()
                transfer.finish(
                    .failure(
                        CurlError.other(
                            code: Int(added.rawValue),
                            message: "curl_multi_add_handle failed: \(String(cString: curl_multi_strerror(added)))")))
                continue
            }
            active[easy] = transfer
        }
    }

    /// Handles every transfer libcurl reports done. Returns whether there was any.
    private func readFinished() -> Bool {
        var finishedAny = false
        var left: Int32 = 0
        while let message = curl_multi_info_read(multi, &left) {
            guard message.pointee.msg == CURLMSG_DONE, let easy = message.pointee.easy_handle else { continue }
            // Read before remove_handle, which invalidates the message.
            let code = subsync_curl_msg_result(message)
            guard let transfer = active.removeValue(forKey: easy) else { continue }
            let result = transfer.complete(code)
            curl_multi_remove_handle(multi, easy)
            recycle(transfer)
            transfer.finish(result)
            finishedAny = true
        }
        return finishedAny
    }

    /// Cleans up a transfer that is out of the multi handle, keeping its easy handle (reset)
    /// for the next transfer while there is room.
    private func recycle(_ transfer: CurlTransfer) {
        waiting.finished(transfer)
        let keep = spareHandles.count < min(32, maximumConcurrentTransfers)
        if let easy = transfer.cleanup(keepingHandle: keep) {
            spareHandles.append(easy)
        }
    }

    private func cancel(_ transfer: CurlTransfer) {
        if let easy = transfer.easy, active.removeValue(forKey: easy) != nil {
            curl_multi_remove_handle(multi, easy)
            recycle(transfer)
        }
        // A transfer still in `waiting` is skipped when it comes up (it is no longer wanted).
        transfer.finish(.failure(CancellationError()))
    }

    private func failEverything() {
        for (easy, transfer) in active {
            curl_multi_remove_handle(multi, easy)
            transfer.cleanup()
            transfer.finish(.failure(CurlError.shutDown))
        }
        active.removeAll()
        for transfer in waiting.removeAll() {
            transfer.finish(.failure(CurlError.shutDown))
        }
        for easy in spareHandles {
            curl_easy_cleanup(easy)
        }
        spareHandles.removeAll()
        // The queue is shut down, so nobody calls `curl_multi_wakeup` on the handle any more.
        curl_multi_cleanup(multi)
    }
}
