#version 450
// out[i] = 2 * in[i] for i < n. A grid-stride loop, so any n fits whatever the
// workgroup count the host dispatches (bounded by maxComputeWorkGroupCount).

layout(local_size_x_id = 0) in;  // workgroup size: specialization constant 0

layout(std430, set = 0, binding = 0) readonly buffer Input { float values_in[]; };
layout(std430, set = 0, binding = 1) writeonly buffer Output { float values_out[]; };

layout(push_constant) uniform Params { uint n; };

void main() {
    uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    for (uint i = gl_GlobalInvocationID.x; i < n; i += stride) {
        values_out[i] = 2.0 * values_in[i];
    }
}
