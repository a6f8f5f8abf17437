#version 450
// Leaky ReLU: o = x where x > 0, else alpha * x (alpha a push constant). The reference on cpu
// and native: gpulab.ops.example_kernels:leaky_relu.
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) writeonly buffer Out { float o[]; };
layout(push_constant) uniform Push { float alpha; } p;
void main() {
    // Rows of workgroups along y past the device's count along x (docs/cli.md).
    uint i = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    if (i < o.length()) o[i] = x[i] > 0.0 ? x[i] : p.alpha * x[i];
}
