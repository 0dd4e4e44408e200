/// PostgreSQL's own hash of a value, computed here as the server computes it: `hashtext(text)`
/// for a column with a deterministic collation, which Citus uses to place a row's distribution
/// key in a shard (docs/CITUS.md, "Scale-out: the plan"). A client that knows the shard map can
/// then send an account's statements to the node that holds it; a wrong guess is never wrong,
/// only slower (the node routes the statement on), and `PostgresHashTests` holds it to the
/// server's answer.
public enum PostgresHash {
    /// `hashtext(value)`: `hash_bytes` over the UTF-8 bytes, as the signed 32-bit integer SQL shows.
    public static func text(_ value: String) -> Int32 {
        Int32(bitPattern: bytes(Array(value.utf8)))
    }

    /// `hash_bytes` of `src/common/hashfn.c`: Bob Jenkins's lookup3 with PostgreSQL's seed, over
    /// little-endian words (PostgreSQL on a little-endian machine, which Citus's shard ranges are
    /// computed on).
    public static func bytes(_ key: [UInt8]) -> UInt32 {
        var a: UInt32 = 0x9e37_79b9 &+ UInt32(truncatingIfNeeded: key.count) &+ 3_923_095
        var b = a
        var c = a
        func word(_ index: Int) -> UInt32 {
            UInt32(key[index]) | UInt32(key[index + 1]) << 8 | UInt32(key[index + 2]) << 16 | UInt32(key[index + 3]) << 24
        }
        var offset = 0
        var remaining = key.count
        while remaining >= 12 {
            a &+= word(offset)
            b &+= word(offset + 4)
            c &+= word(offset + 8)
            mix(&a, &b, &c)
            offset += 12
            remaining -= 12
        }
        // The last 0 to 11 bytes; the lowest byte of c is left for the length, as in lookup3.
        if remaining >= 11 { c &+= UInt32(key[offset + 10]) << 24 }
        if remaining >= 10 { c &+= UInt32(key[offset + 9]) << 16 }
        if remaining >= 9 { c &+= UInt32(key[offset + 8]) << 8 }
        if remaining >= 8 { b &+= UInt32(key[offset + 7]) << 24 }
        if remaining >= 7 { b &+= UInt32(key[offset + 6]) << 16 }
        if remaining >= 6 { b &+= UInt32(key[offset + 5]) << 8 }
        if remaining >= 5 { b &+= UInt32(key[offset + 4]) }
        if remaining >= 4 { a &+= UInt32(key[offset + 3]) << 24 }
        if remaining >= 3 { a &+= UInt32(key[offset + 2]) << 16 }
        if remaining >= 2 { a &+= UInt32(key[offset + 1]) << 8 }
        if remaining >= 1 { a &+= UInt32(key[offset]) }
        final(&a, &b, &c)
        return c
    }

    private static func rotate(_ x: UInt32, _ k: UInt32) -> UInt32 { (x << k) | (x >> (32 - k)) }

    private static func mix(_ a: inout UInt32, _ b: inout UInt32, _ c: inout UInt32) {
        a &-= c; a ^= rotate(c, 4); c &+= b
        b &-= a; b ^= rotate(a, 6); a &+= c
        c &-= b; c ^= rotate(b, 8); b &+= a
        a &-= c; a ^= rotate(c, 16); c &+= b
        b &-= a; b ^= rotate(a, 19); a &+= c
        c &-= b; c ^= rotate(b, 4); b &+= a
    }

    private static func final(_ a: inout UInt32, _ b: inout UInt32, _ c: inout UInt32) {
        c ^= b; c &-= rotate(b, 14)
        a ^= c; a &-= rotate(c, 11)
        b ^= a; b &-= rotate(a, 25)
        c ^= b; c &-= rotate(b, 16)
        a ^= c; a &-= rotate(c, 4)
        b ^= a; b &-= rotate(a, 14)
        c ^= b; c &-= rotate(b, 24)
    }
}
