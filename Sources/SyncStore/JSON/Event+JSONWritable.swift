import Postgres
import SyncCore

extension Event: JSONWritable {
    /// The bytes of `encode(to:)` (keys sorted), written directly.
    public func write(to writer: inout JSONWriter) throws {
        try write(to: &writer) { w in try state.write(to: &w) }
    }

    /// The bytes of `encode(to:state:)`: `state` writes the account's state (the store passes
    /// the text it encoded for the state's row).
    func write(to writer: inout JSONWriter, state: (inout JSONWriter) throws -> Void) throws {
        try writer.object { w in
            w.key("account_id")
            w.string(accountID)
            if let credit {
                w.key("credit")
                try w.value(credit)
            }
            w.key("current")
            try w.optional(current)
            w.key("entitlement_id")
            w.string(entitlementID)
            w.key("id")
            w.string(id)
            w.key("occurred_at")
            w.date(occurredAt)
            w.key("previous")
            try w.optional(previous)
            w.key("previous_tier")
            w.string(previousTier)
            w.key("sequence")
            w.int(sequence)
            w.key("state")
            try state(&w)
            if let transfer {
                w.key("transfer")
                try w.value(transfer)
            }
            w.key("type")
            w.string(type.rawValue)
            if let usage {
                w.key("usage")
                try w.value(usage)
            }
        }
    }
}
