import Foundation
import PropertyBased
@testable import SyncStore
import Testing

/// `RandomUUID` writes what Foundation writes for the same 16 bytes, sets the version 4 and RFC
/// 4122 variant bits, and draws ids that do not repeat across many blocks.
@Suite struct RandomUUIDTests {
    /// Foundation's lowercase text of the bytes `high` then `low` (most significant first),
    /// with the version and variant bits set as a random UUID has them.
    static func foundationText(high: UInt64, low: UInt64) -> String {
        var bytes = [UInt8](repeating: 0, count: 16)
        for index in 0..<8 {
            bytes[index] = UInt8(truncatingIfNeeded: high >> (UInt64(7 - index) * 8))
            bytes[8 + index] = UInt8(truncatingIfNeeded: low >> (UInt64(7 - index) * 8))
        }
        bytes[6] = bytes[6] & 0x0F | 0x40
        bytes[8] = bytes[8] & 0x3F | 0x80
        let uuid = UUID(uuid: (bytes[0], bytes[1], bytes[2], bytes[3], bytes[4], bytes[5], bytes[6], bytes[7],
                               bytes[8], bytes[9], bytes[10], bytes[11], bytes[12], bytes[13], bytes[14], bytes[15]))
        return uuid.uuidString.lowercased()
    }

    @Test func textIsFoundationsForTheSameBytes() async {
        await propertyCheck(count: 3000, input: Gen.uint64(), Gen.uint64()) { high, low in
            #expect(RandomUUID.format(high: high, low: low) == Self.foundationText(high: high, low: low))
        }
        for (high, low) in [(UInt64.min, UInt64.min), (.max, .max), (0x0123_4567_89AB_CDEF, 0xFEDC_BA98_7654_3210)] {
            #expect(RandomUUID.format(high: high, low: low) == Self.foundationText(high: high, low: low))
        }
        #expect(RandomUUID.format(high: 0, low: 0) == "00000000-0000-4000-8000-000000000000")
        #expect(RandomUUID.format(high: .max, low: .max) == "ffffffff-ffff-4fff-bfff-ffffffffffff")
    }

    @Test func idsAreVersionFourAndDoNotRepeat() throws {
        // 20,000 ids: about 78 blocks, so refills and the blocks' boundaries are crossed.
        var seen = Set<String>()
        var versions = Set<Character>(), variants = Set<Character>()
        for _ in 0..<20_000 {
            let id = RandomUUID.lowercaseString()
            let parsed = try #require(UUID(uuidString: id))
            #expect(parsed.uuidString.lowercased() == id)
            let characters = Array(id)
            versions.insert(characters[14])
            variants.insert(characters[19])
            seen.insert(id)
        }
        #expect(seen.count == 20_000)
        #expect(versions == ["4"])
        // Each variant digit turns up among 20,000 draws unless the bits are not random.
        #expect(variants == ["8", "9", "a", "b"])
    }

    @Test func idsFromConcurrentTasksDoNotRepeat() async {
        let ids = await withTaskGroup(of: [String].self) { group in
            for _ in 0..<8 {
                group.addTask { (0..<2_000).map { _ in RandomUUID.lowercaseString() } }
            }
            return await group.reduce(into: [String]()) { $0 += $1 }
        }
        #expect(ids.count == 16_000)
        #expect(Set(ids).count == 16_000)
    }

    @Test func aFilledBufferIsNotLeftAsItWas() {
        // The kernel's answer lands in every word of a block (a block left at zero would still
        // make valid-looking, repeating ids).
        var words = [UInt64](repeating: 0, count: 512)
        words.withUnsafeMutableBytes { RandomUUID.fill($0) }
        #expect(words.filter { $0 == 0 }.count <= 1)
        #expect(Set(words).count >= 511)
    }
}
