#version 450
// Every element the same 32-bit word: a float32 by its bits (-0.0 and subnormals kept).

layout(local_size_x_id = 0) in;

layout(std430, set = 0, binding = 0) writeonly buffer Out { uint result[]; };

layout(push_constant) uniform Params {
    uint n;
    uint word;
};

void main() {
    uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    for (uint i = gl_GlobalInvocationID.x; i < n; i += stride) {
        result[i] = word;
    }
}
