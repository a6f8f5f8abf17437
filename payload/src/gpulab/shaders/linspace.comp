#version 450
#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require
// np.linspace(start, stop, total).astype(np.float32), bit for bit: numpy computes
// i * step + start in double (two roundings, no fused multiply-add) and sets the last
// element to stop. This dispatch writes elements first .. first + n - 1.

#include "float64_to_32.glsl"

layout(local_size_x_id = 0) in;

layout(std430, set = 0, binding = 0) writeonly buffer Out { uint result[]; };

layout(push_constant) uniform Params {
    uvec2 start;      // a double's words, lowest first
    uvec2 step;
    uvec2 first;      // a uint64
    uint n;
    uint last;        // the element (from `first`) that is stop; n or more when none is
    uint stop_bits;   // float32(stop)
};

void main() {
    uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    double origin = packDouble2x32(start);
    double increment = packDouble2x32(step);
    uint64_t offset = packUint2x32(first);
    for (uint i = gl_GlobalInvocationID.x; i < n; i += stride) {
        precise double value = double(offset + uint64_t(i)) * increment + origin;
        result[i] = i == last ? stop_bits : float32_bits(value);
    }
}
