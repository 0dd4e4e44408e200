import Crypto
import Foundation

/// Comparisons whose duration does not depend on where the inputs differ.
enum ConstantTime {
    /// Whether `a` and `b` are equal. Both are hashed first, so neither the position of the first
    /// difference nor the length of the secret shows in the timing.
    static func equals(_ a: String, _ b: String) -> Bool {
        let left = Array(SHA256.hash(data: Data(a.utf8)))
        let right = Array(SHA256.hash(data: Data(b.utf8)))
        var difference: UInt8 = 0
        for index in 0..<left.count {
            difference |= left[index] ^ right[index]
        }
        return difference == 0
    }
}
