/// The rows of a multi-row `VALUES` list with typed parameters. On Citus an insert of one
/// account's rows as a `VALUES` list goes to that account's shard and commits there in one
/// phase, where `INSERT … SELECT FROM unnest(…)` goes through the coordinator and commits in two
/// (docs/CITUS.md, "Scale-out: the plan").
enum ValuesList {
    /// `(leading, $n::type, …), …` for `rows` rows of `types`, the parameters numbered from
    /// `firstParameter`, one row after another; `leading` (say `$1`, the account) opens each row.
    static func rows(_ rows: Int, of types: [String], from firstParameter: Int, leading: String? = nil) -> String {
        (0..<rows).map { row in
            let values = types.enumerated().map { "$\(firstParameter + row * types.count + $0.offset)::\($0.element)" }
            return "(" + ((leading.map { [$0] } ?? []) + values).joined(separator: ", ") + ")"
        }.joined(separator: ", ")
    }

    /// The smallest power of two at least `count`: a list padded to it (by repeating its last row
    /// where the insert skips a repeated key) has one statement text per power, not per count.
    static func paddedCount(_ count: Int) -> Int {
        var padded = 1
        while padded < count { padded *= 2 }
        return padded
    }
}
