// out = A x for A (m x n, row-major): one workgroup per row (grid-stride over rows), its
// invocations stride over the columns and sum through group_reduce. A is read exactly once;
// x is re-read per row from cache. vec4 loads when n % 4 == 0 and the bindings are aligned.

layout(local_size_x_id = 0) in;

layout(std430, set = 0, binding = 0) readonly buffer A { float a[]; };
layout(std430, set = 0, binding = 0) readonly buffer A4 { vec4 a4[]; };
layout(std430, set = 0, binding = 1) readonly buffer X { float x[]; };
layout(std430, set = 0, binding = 1) readonly buffer X4 { vec4 x4[]; };
layout(std430, set = 0, binding = 2) writeonly buffer Out { float result[]; };

layout(push_constant) uniform Params {
    uint m;
    uint n;
    uint vec4_ok;
};

#include "row_sum.glsl"

void main() {
    uint lid = gl_LocalInvocationID.x;
    for (uint row = gl_WorkGroupID.x; row < m; row += gl_NumWorkGroups.x) {
        float acc = 0.0;
        if (vec4_ok != 0) {
            uint n4 = n / 4;
            uint base = row * n4;
            vec4 acc4 = vec4(0.0);
            for (uint j = lid; j < n4; j += gl_WorkGroupSize.x) {
                acc4 += a4[base + j] * x4[j];
            }
            acc = (acc4.x + acc4.y) + (acc4.z + acc4.w);
        } else {
            uint base = row * n;
            for (uint j = lid; j < n; j += gl_WorkGroupSize.x) {
                acc += a[base + j] * x[j];
            }
        }
        float total = group_reduce(acc);
        if (lid == 0) {
            result[row] = total;
        }
    }
}
