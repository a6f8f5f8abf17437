// NaN and infinity by their bits: compilers may fold isnan() away under fast-math.

// The bits without the sign: above infinity's (0x7f800000) exactly for NaN, so the largest
// of them over many values tells whether any was NaN (one AND and one max per value).
uvec4 magnitude_bits(vec4 v) {
    return floatBitsToUint(v) & 0x7fffffffu;
}

uint magnitude_bits(float v) {
    return floatBitsToUint(v) & 0x7fffffffu;
}

bool is_nan_magnitude(uint magnitude) {
    return magnitude > 0x7f800000u;
}

bool is_nan(float v) {
    return is_nan_magnitude(magnitude_bits(v));
}

float quiet_nan() {
    return uintBitsToFloat(0x7fc00000u);
}

float infinity() {
    return uintBitsToFloat(0x7f800000u);
}
