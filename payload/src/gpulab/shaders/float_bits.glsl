// NaN and infinity by their bits: compilers may fold isnan() away under fast-math.

bool is_nan(float v) {
    return (floatBitsToUint(v) & 0x7fffffffu) > 0x7f800000u;
}

bool any_nan(vec4 v) {
    return any(greaterThan(floatBitsToUint(v) & 0x7fffffffu, uvec4(0x7f800000u)));
}

float quiet_nan() {
    return uintBitsToFloat(0x7fc00000u);
}

float infinity() {
    return uintBitsToFloat(0x7f800000u);
}
