#version 450
// C = the sum of matmul_split.comp's slices (split-K): c[i] = p[i] + p[stride + i] + ..., the
// slices added in order. vec4 over the whole vec4s when the host says the bindings start
// 16-byte aligned (stride is a multiple of 4), then the tail (or everything) by scalars.

layout(local_size_x_id = 0) in;

layout(std430, set = 0, binding = 0) readonly buffer P { float p[]; };
layout(std430, set = 0, binding = 0) readonly buffer P4 { vec4 p4[]; };
layout(std430, set = 0, binding = 1) writeonly buffer C { float c[]; };
layout(std430, set = 0, binding = 1) writeonly buffer C4 { vec4 c4[]; };

layout(push_constant) uniform Params {
    uint count;   // floats of C
    uint slices;
    uint stride;  // floats between slices
    uint vec4_ok;
};

void main() {
    uint step = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    uint first = 0;
    if (vec4_ok != 0) {
        uint count4 = count / 4;
        uint stride4 = stride / 4;
        for (uint i = gl_GlobalInvocationID.x; i < count4; i += step) {
            vec4 sum = p4[i];
            for (uint s = 1; s < slices; ++s) {
                sum += p4[s * stride4 + i];
            }
            c4[i] = sum;
        }
        first = count4 * 4;
    }
    for (uint i = first + gl_GlobalInvocationID.x; i < count; i += step) {
        float sum = p[i];
        for (uint s = 1; s < slices; ++s) {
            sum += p[s * stride + i];
        }
        c[i] = sum;
    }
}
