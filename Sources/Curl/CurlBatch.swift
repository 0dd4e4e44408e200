/// The answers of an `executeAll` batch, collected slot by slot; its caller is resumed once,
/// when the last slot is filled.
///
/// One continuation for the batch instead of one per request: a webhook round sends hundreds of
/// requests at once, and resuming a task per answer costs a thread hop (and often a futex wake
/// of an idle pool thread) per delivery.
final class CurlBatch: Sendable {
    private struct State {
        var outcomes: [CurlOutcome?]
        var remaining: Int
        var continuation: CheckedContinuation<[CurlOutcome], Never>?
    }

    private let started: ContinuousClock.Instant
    private let state: CurlLock<State>

    init(count: Int, started: ContinuousClock.Instant) {
        self.started = started
        state = CurlLock(State(outcomes: Array(repeating: nil, count: count), remaining: count))
    }

    /// Stores the caller's continuation, resuming it at once when every slot is already filled.
    func attach(_ continuation: CheckedContinuation<[CurlOutcome], Never>) {
        let finished = state.withLock { state -> [CurlOutcome]? in
            guard state.remaining == 0 else {
                state.continuation = continuation
                return nil
            }
            return state.outcomes.map(Self.filled)
        }
        if let finished { continuation.resume(returning: finished) }
    }

    /// Fills slot `index` (the first time only) and resumes the caller when it was the last one.
    func complete(_ index: Int, with result: Result<CurlResponse, any Error>) {
        let elapsed = ContinuousClock.now - started
        let resume = state.withLock { state -> (CheckedContinuation<[CurlOutcome], Never>, [CurlOutcome])? in
            guard state.outcomes.indices.contains(index), state.outcomes[index] == nil else { return nil }
            state.outcomes[index] = CurlOutcome(result: result, elapsed: elapsed)
            state.remaining -= 1
            guard state.remaining == 0, let continuation = state.continuation else { return nil }
            state.continuation = nil
            return (continuation, state.outcomes.map(Self.filled))
        }
        if let (continuation, outcomes) = resume { continuation.resume(returning: outcomes) }
    }

    private static func filled(_ outcome: CurlOutcome?) -> CurlOutcome {
        // Only called once `remaining` is 0, when every slot holds its outcome.
        outcome ?? CurlOutcome(result: .failure(CurlError.shutDown), elapsed: .zero)
    }
}

/// One request's outcome in an `executeAll` batch.
public struct CurlOutcome: Sendable {
    /// The answer, or why there is none (as `execute` would have thrown it).
    public var result: Result<CurlResponse, any Error>
    /// From the batch's submission to this outcome (waiting for a free slot included).
    public var elapsed: Duration

    public init(result: Result<CurlResponse, any Error>, elapsed: Duration) {
        self.result = result
        self.elapsed = elapsed
    }
}
