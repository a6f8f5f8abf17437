// One pass of a hierarchical reduction (sum, min, max, dot, sum of squares), included by
// reduce_subgroup.comp and reduce_shared.comp. Each workgroup reduces a grid-stride share of
// the n inputs (4 independent vec4 loads in flight per iteration when the bindings are
// 16-byte aligned) and writes one partial to partial[out_index + workgroup]. The host repeats
// passes over the partials (OP sum/min/max) until one value is left; `finish` = 1 takes the
// square root of that last value (l2_norm).
//
// NaN: min and max return NaN when any input is NaN (numpy's np.min/np.max); sum and dot
// propagate NaN and infinities through IEEE arithmetic.

#include "float_bits.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint OP = 0;

const uint OP_SUM = 0;
const uint OP_MIN = 1;
const uint OP_MAX = 2;
const uint OP_DOT = 3;
const uint OP_SUM_OF_SQUARES = 4;
const bool EXTREME = OP == OP_MIN || OP == OP_MAX;

// A fused first pass (gpulab.kernels.fused) defines FUSED_TERMS, the term4 and term functions
// that replace x's (and y's) below, declares its own buffers (partial[] among them) before
// including this file, and may add push constants in FUSED_PARAMS.
#ifndef FUSED_TERMS
layout(std430, set = 0, binding = 0) readonly buffer X { float x[]; };
layout(std430, set = 0, binding = 0) readonly buffer X4 { vec4 x4[]; };
layout(std430, set = 0, binding = 1) readonly buffer Y { float y[]; };
layout(std430, set = 0, binding = 1) readonly buffer Y4 { vec4 y4[]; };
layout(std430, set = 0, binding = 2) buffer Out { float partial[]; };
#endif

layout(push_constant) uniform Params {
    uint n;
    uint vec4_ok;
    uint out_index;
    uint finish;
#ifdef FUSED_PARAMS
    FUSED_PARAMS
#endif
};

float identity() {
    return OP == OP_MIN ? infinity() : (OP == OP_MAX ? -infinity() : 0.0);
}

// NaN-oblivious, for the per-invocation accumulators (min/max track NaN by magnitude_bits).
vec4 accumulate(vec4 acc, vec4 v) {
    return OP == OP_MIN ? min(acc, v) : (OP == OP_MAX ? max(acc, v) : acc + v);
}

float accumulate(float acc, float v) {
    return accumulate(vec4(acc), vec4(v)).x;
}

float combine(float a, float b) {
    if (EXTREME) {
        if (is_nan(a) || is_nan(b)) {
            return quiet_nan();
        }
        return OP == OP_MIN ? min(a, b) : max(a, b);
    }
    return a + b;
}

#if USE_SUBGROUP
// An int that orders like the float (-0 just below +0); the mapping is its own inverse.
int order_key(int bits) {
    return bits >= 0 ? bits : bits ^ 0x7fffffff;
}

float subgroup_combine(float v) {
    if (EXTREME) {
        // Subgroup min/max are undefined for NaN: reduce integer keys instead, NaN given the
        // key that wins (its inverse is a NaN). One integer subgroup op carries both the
        // extreme and the NaN (a single instruction on many GPUs; float ones take shuffles).
        int nan_key = OP == OP_MIN ? int(0x80000000u) : 0x7fffffff;
        int key = is_nan(v) ? nan_key : order_key(floatBitsToInt(v));
        int extreme = OP == OP_MIN ? subgroupMin(key) : subgroupMax(key);
        return intBitsToFloat(order_key(extreme));
    }
    return subgroupAdd(v);
}
#endif

#include "group_reduce.glsl"

#ifdef FUSED_TERMS
FUSED_TERMS
#else
vec4 term4(uint i) {
    if (OP == OP_DOT) {
        return x4[i] * y4[i];
    }
    if (OP == OP_SUM_OF_SQUARES) {
        return x4[i] * x4[i];
    }
    return x4[i];
}

float term(uint i) {
    if (OP == OP_DOT) {
        return x[i] * y[i];
    }
    if (OP == OP_SUM_OF_SQUARES) {
        return x[i] * x[i];
    }
    return x[i];
}
#endif

void main() {
    uint gid = gl_GlobalInvocationID.x;
    uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    vec4 acc0 = vec4(identity());
    vec4 acc1 = acc0;
    uvec4 magnitude = uvec4(0u);  // min/max: the largest sign-less bits (NaN above infinity's)
    uint first_scalar = 0;
    if (vec4_ok != 0) {
        uint n4 = n / 4;
        uint i = gid;
        for (; i + 3 * stride < n4; i += 4 * stride) {
            vec4 t0 = term4(i);
            vec4 t1 = term4(i + stride);
            vec4 t2 = term4(i + 2 * stride);
            vec4 t3 = term4(i + 3 * stride);
            if (EXTREME) {
                uvec4 m01 = max(magnitude_bits(t0), magnitude_bits(t1));
                uvec4 m23 = max(magnitude_bits(t2), magnitude_bits(t3));
                magnitude = max(magnitude, max(m01, m23));
            }
            acc0 = accumulate(accumulate(acc0, t0), t1);
            acc1 = accumulate(accumulate(acc1, t2), t3);
        }
        for (; i < n4; i += stride) {
            vec4 t = term4(i);
            if (EXTREME) {
                magnitude = max(magnitude, magnitude_bits(t));
            }
            acc0 = accumulate(acc0, t);
        }
        first_scalar = 4 * n4;
    }
    for (uint i = first_scalar + gid; i < n; i += stride) {
        float t = term(i);
        if (EXTREME) {
            magnitude.x = max(magnitude.x, magnitude_bits(t));
        }
        acc0.x = accumulate(acc0.x, t);
    }
    acc0 = accumulate(acc0, acc1);
    float value = accumulate(accumulate(acc0.x, acc0.y), accumulate(acc0.z, acc0.w));
    uint largest = max(max(magnitude.x, magnitude.y), max(magnitude.z, magnitude.w));
    if (EXTREME && is_nan_magnitude(largest)) {
        value = quiet_nan();
    }
    float total = group_reduce(value);
    if (gl_LocalInvocationID.x == 0) {
        partial[out_index + gl_WorkGroupID.x] = finish != 0 ? sqrt(total) : total;
    }
}
