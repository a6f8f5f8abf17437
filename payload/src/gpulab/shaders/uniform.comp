#version 450
#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require
// numpy's default_rng(seed).uniform(low, high, n).astype(np.float32), bit for bit.
// numpy's PCG64 is a 128-bit LCG (state = state * M + increment mod 2^128) stepped before
// each draw, whose draw is the XSL-RR output of the new state; uniform is
// low + range * ((draw >> 11) * 2^-53) in double, two roundings (no fused multiply-add).
// The invocation for element i jumps ahead i + 1 steps, then strides over the whole grid.

#include "float64_to_32.glsl"

layout(local_size_x_id = 0) in;

layout(std430, set = 0, binding = 0) writeonly buffer Out { uint result[]; };

layout(push_constant) uniform Params {
    uvec4 state;      // before this dispatch's first element; 32-bit words, lowest first
    uvec4 increment;
    uvec2 low;        // a double's words
    uvec2 range;      // high - low, as numpy computes it
    uint n;
};

struct U128 {
    uint64_t lo;
    uint64_t hi;
};

const U128 MULTIPLIER = U128(0x4385df649fccf645ul, 0x2360ed051fc65da4ul);

U128 from_words(uvec4 words) {
    return U128(packUint2x32(words.xy), packUint2x32(words.zw));
}

uint64_t mul_high(uint64_t a, uint64_t b) {
    uint64_t a0 = a & 0xfffffffful, a1 = a >> 32, b0 = b & 0xfffffffful, b1 = b >> 32;
    uint64_t p00 = a0 * b0, p01 = a0 * b1, p10 = a1 * b0, p11 = a1 * b1;
    uint64_t middle = (p00 >> 32) + (p01 & 0xfffffffful) + (p10 & 0xfffffffful);
    return p11 + (p01 >> 32) + (p10 >> 32) + (middle >> 32);
}

U128 mul(U128 a, U128 b) {
    return U128(a.lo * b.lo, mul_high(a.lo, b.lo) + a.lo * b.hi + a.hi * b.lo);
}

U128 add(U128 a, U128 b) {
    uint64_t lo = a.lo + b.lo;
    return U128(lo, a.hi + b.hi + (lo < a.lo ? 1ul : 0ul));
}

// `steps` LCG steps at once: state * mult + plus (Brown's jump-ahead by repeated squaring).
void jump(uint steps, U128 inc, out U128 mult, out U128 plus) {
    mult = U128(1ul, 0ul);
    plus = U128(0ul, 0ul);
    U128 cur_mult = MULTIPLIER;
    U128 cur_plus = inc;
    while (steps > 0u) {
        if ((steps & 1u) != 0u) {
            mult = mul(mult, cur_mult);
            plus = add(mul(plus, cur_mult), cur_plus);
        }
        cur_plus = mul(add(cur_mult, U128(1ul, 0ul)), cur_plus);
        cur_mult = mul(cur_mult, cur_mult);
        steps >>= 1;
    }
}

uint64_t xsl_rr(U128 s) {
    uint64_t folded = s.hi ^ s.lo;
    uint rotation = uint(s.hi >> 58);
    return (folded >> rotation) | (folded << ((64u - rotation) & 63u));
}

void main() {
    uint first = gl_GlobalInvocationID.x;
    if (first >= n) {
        return;
    }
    uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    U128 inc = from_words(increment);
    U128 mult, plus, stride_mult, stride_plus;
    jump(first + 1u, inc, mult, plus);
    jump(stride, inc, stride_mult, stride_plus);
    U128 s = add(mul(mult, from_words(state)), plus);
    double lower = packDouble2x32(low);
    double width = packDouble2x32(range);
    for (uint i = first; i < n; i += stride) {
        double unit = double(xsl_rr(s) >> 11) * (1.0lf / 9007199254740992.0lf);
        precise double value = lower + width * unit;
        result[i] = float32_bits(value);
        s = add(mul(stride_mult, s), stride_plus);
    }
}
