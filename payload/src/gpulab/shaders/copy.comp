#version 450
// out = in, as vec4s (the bandwidth ceiling bench measures other kernels against).
// The host binds 16-byte aligned ranges and n4 = number of whole vec4s; it copies any tail itself.

layout(local_size_x_id = 0) in;

layout(std430, set = 0, binding = 0) readonly buffer In { vec4 source[]; };
layout(std430, set = 0, binding = 1) writeonly buffer Out { vec4 target[]; };

layout(push_constant) uniform Params { uint n4; };

void main() {
    uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    for (uint i = gl_GlobalInvocationID.x; i < n4; i += stride) {
        target[i] = source[i];
    }
}
