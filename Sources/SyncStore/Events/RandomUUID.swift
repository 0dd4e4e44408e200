import NIOConcurrencyHelpers

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Random (version 4) UUIDs in the lowercase text form that event ids take, drawn from the
/// operating system's cryptographic generator a block at a time.
///
/// `UUID()` asks the kernel for 16 bytes at every call (one `getrandom`), and a worker's batch
/// writes two events an account, each id then lowercased in another copy (docs/PERFORMANCE.md,
/// "In the code"). Here the ids are taken from a block of 256, filled by 16 `getentropy` calls of
/// 256 bytes: as random as `UUID()`'s (the same source), only fetched together.
enum RandomUUID {
    /// Unused random bytes, shared by every task of the process (taken under the lock, a few
    /// nanoseconds an id).
    private static let source = NIOLockedValueBox(Block())

    /// A new random UUID, `xxxxxxxx-xxxx-4xxx-[89ab]xxx-xxxxxxxxxxxx` in lowercase hex.
    static func lowercaseString() -> String {
        let (high, low) = source.withLockedValue { $0.next() }
        return format(high: high, low: low)
    }

    /// The text form of the 16 bytes `high` (first 8, most significant first) and `low`, with
    /// the version (4) and variant (RFC 4122) bits set.
    static func format(high: UInt64, low: UInt64) -> String {
        let high = (high & ~0xF000) | 0x4000  // version 4: byte 6's high nibble
        let low = (low & ~(0xC0 << 56)) | (0x80 << 56)  // variant 10xx: byte 8's two high bits
        let digits: StaticString = "0123456789abcdef"
        return String(unsafeUninitializedCapacity: 36) { text in
            digits.withUTF8Buffer { digits in
                var at = 0
                func put(_ value: UInt64, bytes: ClosedRange<Int>) {
                    for index in bytes {
                        // Hyphens go before bytes 4, 6, 8 and 10.
                        if index == 4 || index == 6 || index == 8 || index == 10 {
                            text[at] = UInt8(ascii: "-")
                            at += 1
                        }
                        let byte = Int((value >> (UInt64(7 - index % 8) * 8)) & 0xFF)
                        text[at] = digits[byte >> 4]
                        text[at + 1] = digits[byte & 0xF]
                        at += 2
                    }
                }
                put(high, bytes: 0...7)
                put(low, bytes: 8...15)
                return at
            }
        }
    }

    /// A block of random bytes and how much of it is used.
    private struct Block {
        static let count = 256 * 2
        var words = [UInt64](repeating: 0, count: Block.count)
        var used = Block.count

        mutating func next() -> (UInt64, UInt64) {
            if used == words.count {
                words.withUnsafeMutableBytes { RandomUUID.fill($0) }
                used = 0
            }
            defer { used += 2 }
            return (words[used], words[used + 1])
        }
    }

    /// Fills `buffer` (whole words) from the kernel's generator: `getentropy`, the `getrandom`
    /// call in 256-byte pieces (`arc4random_buf` on Apple's systems). Should a call be refused,
    /// the standard library's generator fills the rest: the same source, 8 bytes a call.
    static func fill(_ buffer: UnsafeMutableRawBufferPointer) {
        guard let base = buffer.baseAddress else { return }
        #if canImport(Darwin)
        arc4random_buf(base, buffer.count)
        #else
        var filled = 0
        while filled < buffer.count {
            let piece = min(256, buffer.count - filled)
            guard getentropy(base + filled, piece) == 0 else { break }
            filled += piece
        }
        var generator = SystemRandomNumberGenerator()
        for offset in stride(from: filled, through: buffer.count - 8, by: 8) {
            buffer.storeBytes(of: generator.next() as UInt64, toByteOffset: offset, as: UInt64.self)
        }
        #endif
    }
}
