import Foundation
import Postgres

/// One disagreement between what is persisted for an account and what `subsync reconcile`
/// recomputes from the account's resolved reports.
///
/// `field` names what differs:
/// - a key of the persisted JSON (`expires_at`, `revocation`, `tier`, `status`, ...) for the
///   transaction aggregate (`transactions.aggregate`), the account state (`account_states.state`)
///   or an entitlement inside that state;
/// - `table.column` for the copies kept beside the JSON for queries (`transactions.revoked`,
///   `account_states.next_transition_at`, `entitlements.status`, ...); a copy is reported only
///   when it differs from the recomputed value *and* from its JSON, so one wrong value is one
///   difference;
/// - `row` when a whole row is missing (`stored` is nil) or should not exist (`recomputed` nil).
///
/// `stored` and `recomputed` are display text: RFC 3339 for times, JSON for composite values,
/// nil for absent.
public struct Difference: Sendable, Hashable, Codable, CustomStringConvertible {
    /// What kind of thing differs.
    public enum Scope: String, Sendable, Hashable, Codable {
        case account, entitlement, transaction
        /// A ledger entry that follows from the transactions (a consumable's credit or refund) and
        /// is missing from `usage_entries`.
        case usage
    }

    public var accountID: String
    public var scope: Scope
    /// For ``Scope/entitlement``.
    public var entitlementID: String?
    /// For ``Scope/transaction``.
    public var transactionID: String?
    public var field: String
    public var stored: String?
    public var recomputed: String?

    public init(
        accountID: String, scope: Scope, entitlementID: String? = nil, transactionID: String? = nil,
        field: String, stored: String?, recomputed: String?
    ) {
        self.accountID = accountID
        self.scope = scope
        self.entitlementID = entitlementID
        self.transactionID = transactionID
        self.field = field
        self.stored = stored
        self.recomputed = recomputed
    }

    enum CodingKeys: String, CodingKey {
        case accountID = "account_id"
        case scope
        case entitlementID = "entitlement_id"
        case transactionID = "transaction_id"
        case field, stored, recomputed
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(accountID, forKey: .accountID)
        try c.encode(scope, forKey: .scope)
        try c.encode(entitlementID, forKey: .entitlementID)
        try c.encode(transactionID, forKey: .transactionID)
        try c.encode(field, forKey: .field)
        try c.encode(stored, forKey: .stored)
        try c.encode(recomputed, forKey: .recomputed)
    }

    /// One line for people: `acct-1  entitlement premium  expires_at  stored X  recomputed Y`.
    public var description: String {
        let subject: String
        switch scope {
        case .account: subject = "account"
        case .entitlement: subject = "entitlement \(entitlementID ?? "?")"
        case .transaction: subject = "transaction \(transactionID ?? "?")"
        case .usage: subject = "usage of transaction \(transactionID ?? "?")"
        }
        return "\(accountID)  \(subject)  \(field)  stored \(stored ?? "(none)")  recomputed \(recomputed ?? "(none)")"
    }
}

/// Field-by-field comparison of two encodable values through their JSON (the form they are
/// persisted in), so a difference is named by its stored key and shown as stored text.
enum FieldComparison {
    /// The JSON object of `value`, as `JSONEncoder.postgres` writes it.
    static func object(_ value: some Encodable) throws -> [String: Any] {
        let data = try JSONEncoder.postgres.encode(value)
        return (try JSONSerialization.jsonObject(with: data) as? [String: Any]) ?? [:]
    }

    /// The keys whose values differ, sorted, with both values as display text.
    static func differences(stored: [String: Any], recomputed: [String: Any], ignoring: Set<String> = []) -> [(key: String, stored: String?, recomputed: String?)] {
        let keys = Set(stored.keys).union(recomputed.keys).subtracting(ignoring).sorted()
        var result: [(String, String?, String?)] = []
        for key in keys {
            let before = render(stored[key])
            let after = render(recomputed[key])
            if before != after { result.append((key, before, after)) }
        }
        return result
    }

    /// Display text of a JSON value: strings as they are, null/absent as nil, anything else as
    /// compact JSON with sorted keys.
    static func render(_ value: Any?) -> String? {
        guard let value, !(value is NSNull) else { return nil }
        if let text = value as? String { return text }
        guard let data = try? JSONSerialization.data(withJSONObject: [value], options: [.sortedKeys, .withoutEscapingSlashes]) else {
            return "\(value)"
        }
        let text = String(decoding: data, as: UTF8.self)
        return String(text.dropFirst().dropLast())
    }

    /// Display text of a date (RFC 3339, microseconds), or nil.
    static func render(_ date: Date?) -> String? {
        date.map(RFC3339.format)
    }
}
