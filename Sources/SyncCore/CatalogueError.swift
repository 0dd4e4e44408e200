/// A catalogue that cannot be used, naming the entry at fault, e.g.
/// `products[4] 'voip.gold.monthly': unknown entitlement 'gold'`.
public struct CatalogueError: Error, Sendable, Equatable, CustomStringConvertible {
    /// Where the problem is: `tiers[2] 'premium'`, `products[4] 'voip.gold.monthly'`, or `catalogue`.
    public let entry: String
    /// What is wrong with it.
    public let problem: String

    public init(entry: String, problem: String) {
        self.entry = entry
        self.problem = problem
    }

    public var description: String { "\(entry): \(problem)" }
}
