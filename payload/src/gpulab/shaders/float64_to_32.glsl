// numpy's astype(np.float32) of a double, as float32 bits: round to nearest even, subnormal
// results included. Done in integers, since a device may flush subnormal floats to zero.
// Needs GL_EXT_shader_explicit_arithmetic_types_int64.

uint float32_bits(double value) {
    uvec2 words = unpackDouble2x32(value);
    uint sign = words.y & 0x80000000u;
    uint exponent = (words.y >> 20) & 0x7ffu;
    uint64_t fraction = (uint64_t(words.y & 0xfffffu) << 32) | uint64_t(words.x);
    if (exponent == 0x7ffu) {
        return sign | 0x7f800000u | (fraction != 0ul ? 0x400000u : 0u);
    }
    if (exponent == 0u) {
        return sign;  // zero, or a double below every float32
    }
    int biased = int(exponent) - 1023 + 127;  // the float32 exponent field, if normal
    if (biased >= 255) {
        return sign | 0x7f800000u;
    }
    uint64_t significand = fraction | (1ul << 52);
    // Bits dropped: 29 for a normal float32, more for a subnormal one.
    int shift = biased > 0 ? 29 : 30 - biased;
    if (shift > 63) {
        return sign;
    }
    uint64_t kept = significand >> shift;
    uint64_t rest = significand & ((1ul << shift) - 1ul);
    uint64_t midpoint = 1ul << (shift - 1);
    if (rest > midpoint || (rest == midpoint && (kept & 1ul) != 0ul)) {
        kept += 1ul;
    }
    if (biased <= 0) {
        return sign | uint(kept);  // rounding up to 2^23 gives the smallest normal's bits
    }
    // kept holds the implicit bit: a carry to 2^24 moves into the exponent (up to infinity).
    return sign | ((uint(biased) << 23) + uint(kept - (1ul << 23)));
}
