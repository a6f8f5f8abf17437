#version 450
// out = s * x (+ y), or x / s (+ y) with DIVIDE: add, scale, saxpy, normalize's division.
// s is the push constant `a`, or element `a_index` of the scalar buffer with A_FROM_BUFFER
// (a scalar a reduction produced stays on the device). Grid-stride over vec4s when the host
// says the bindings are 16-byte aligned, then the n % 4 tail; scalar loop otherwise.

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const bool HAS_Y = false;
layout(constant_id = 2) const bool DIVIDE = false;
layout(constant_id = 3) const bool A_FROM_BUFFER = false;

// Each binding is declared as floats and as vec4s (aliases of the same range).
layout(std430, set = 0, binding = 0) readonly buffer X { float x[]; };
layout(std430, set = 0, binding = 0) readonly buffer X4 { vec4 x4[]; };
layout(std430, set = 0, binding = 1) readonly buffer Y { float y[]; };
layout(std430, set = 0, binding = 1) readonly buffer Y4 { vec4 y4[]; };
layout(std430, set = 0, binding = 2) writeonly buffer Out { float result[]; };
layout(std430, set = 0, binding = 2) writeonly buffer Out4 { vec4 result4[]; };
layout(std430, set = 0, binding = 3) readonly buffer Scalar { float scalar[]; };

layout(push_constant) uniform Params {
    uint n;
    uint vec4_ok;
    float a;
    uint a_index;
};

vec4 apply(vec4 xv, vec4 yv, float s) {
    vec4 scaled = DIVIDE ? xv / s : s * xv;
    return HAS_Y ? scaled + yv : scaled;
}

void main() {
    float s = A_FROM_BUFFER ? scalar[a_index] : a;
    uint gid = gl_GlobalInvocationID.x;
    uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    uint first_scalar = 0;
    if (vec4_ok != 0) {
        uint n4 = n / 4;
        for (uint i = gid; i < n4; i += stride) {
            result4[i] = apply(x4[i], HAS_Y ? y4[i] : vec4(0.0), s);
        }
        first_scalar = 4 * n4;
    }
    for (uint i = first_scalar + gid; i < n; i += stride) {
        result[i] = apply(vec4(x[i]), vec4(HAS_Y ? y[i] : 0.0), s).x;
    }
}
