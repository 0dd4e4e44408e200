/// The purchase an `entitlement.transferred` event moved from one account to another
/// (`data.transfer`).
public struct WebhookTransfer: Sendable, Hashable, Codable {
    /// The store's original transaction id: the purchase and all its renewals.
    public var originalTransactionID: String
    /// The account that had the purchase.
    public var fromAccountID: String
    /// The account that has it now.
    public var toAccountID: String

    /// A transfer of `originalTransactionID` from `fromAccountID` to `toAccountID`.
    public init(originalTransactionID: String, fromAccountID: String, toAccountID: String) {
        self.originalTransactionID = originalTransactionID
        self.fromAccountID = fromAccountID
        self.toAccountID = toAccountID
    }

    /// The JSON keys.
    public enum CodingKeys: String, CodingKey {
        case originalTransactionID = "original_transaction_id"
        case fromAccountID = "from_account_id"
        case toAccountID = "to_account_id"
    }
}
