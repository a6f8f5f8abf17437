#version 450
// Softplus: o = log(1 + exp(x)), as max(x, 0) + log(1 + exp(-|x|)) so that no exp overflows.
// The reference on cpu and native: gpulab.ops.example_kernels:softplus.
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) writeonly buffer Out { float o[]; };
void main() {
    // Rows of workgroups along y past the device's count along x (docs/cli.md).
    uint i = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    if (i < o.length()) o[i] = max(x[i], 0.0) + log(1.0 + exp(-abs(x[i])));
}
