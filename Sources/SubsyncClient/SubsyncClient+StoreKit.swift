#if canImport(StoreKit)
import StoreKit

// The thin StoreKit 2 adapter: compiled only where StoreKit exists (Apple platforms); everything
// it feeds (`sync`, the outbox, the cache) is plain Swift and tested on Linux.

@available(iOS 15.0, macOS 12.0, tvOS 15.0, watchOS 8.0, visionOS 1.0, *)
extension Purchase {
    /// A purchase from StoreKit's verification results: the transaction's JWS and, for a
    /// subscription, the renewal info's. The service verifies both; an unverified result is sent
    /// too (the service refuses what it cannot verify, and the error reaches ``SubsyncClient/errors``).
    public init(
        _ transaction: VerificationResult<Transaction>,
        renewalInfo: VerificationResult<Product.SubscriptionInfo.RenewalInfo>? = nil
    ) {
        self.init(signedTransaction: transaction.jwsRepresentation, signedRenewalInfo: renewalInfo?.jwsRepresentation)
    }
}

@available(iOS 15.0, macOS 12.0, tvOS 15.0, watchOS 8.0, visionOS 1.0, *)
extension SubsyncClient {
    /// Feeds every transaction StoreKit reports (renewals, refunds, purchases made on other
    /// devices, Ask to Buy approvals) to ``sync(_:)`` until the task is cancelled. A transaction
    /// is finished once its report is in the outbox on disk, so StoreKit stops re-delivering it
    /// only when the client can no longer lose it. Start it once, early:
    /// `Task { await client.observeTransactionUpdates() }`.
    public func observeTransactionUpdates() async {
        for await result in Transaction.updates {
            // In the outbox, then finished; ``run()`` sends it (the network never holds StoreKit up).
            do {
                try enqueue([Purchase(result, renewalInfo: await Self.renewalInfo(of: result))])
            } catch {
                continue  // storage failed: left unfinished, StoreKit delivers it again
            }
            if case .verified(let transaction) = result { await transaction.finish() }
        }
    }

    /// Re-sends every current entitlement (`Transaction.currentEntitlements`), with renewal info,
    /// and reads the state back: call it after `AppStore.sync()` when the user taps Restore.
    @discardableResult
    public func restoreCurrentEntitlements() async throws -> FlushOutcome {
        var purchases: [Purchase] = []
        for await result in Transaction.currentEntitlements {
            purchases.append(Purchase(result, renewalInfo: await Self.renewalInfo(of: result)))
        }
        return try await restore(purchases)
    }

    /// Reports one verification result (a purchase's `PurchaseResult.success`): written to the
    /// outbox, the transaction finished once the report is durable, then sent now so the state
    /// answers with the purchase.
    @discardableResult
    public func report(_ result: VerificationResult<Transaction>) async -> FlushOutcome? {
        do {
            try enqueue([Purchase(result, renewalInfo: await Self.renewalInfo(of: result))])
        } catch {
            // Only a storage failure throws: keep the transaction unfinished so StoreKit delivers it again.
            return nil
        }
        if case .verified(let transaction) = result { await transaction.finish() }
        return await flush()
    }

    private static func renewalInfo(of result: VerificationResult<Transaction>) async -> VerificationResult<Product.SubscriptionInfo.RenewalInfo>? {
        guard case .verified(let transaction) = result, transaction.productType == .autoRenewable else { return nil }
        if #available(iOS 17.0, macOS 14.0, tvOS 17.0, watchOS 10.0, *) {
            return await transaction.subscriptionStatus?.renewalInfo
        }
        guard let group = transaction.subscriptionGroupID,
            let statuses = try? await Product.SubscriptionInfo.status(for: group)
        else { return nil }
        return statuses.first { status in
            if case .verified(let renewal) = status.renewalInfo { return renewal.originalTransactionID == transaction.originalID }
            return false
        }?.renewalInfo
    }
}
#endif
