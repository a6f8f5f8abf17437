// One Jacobi step x_new = D^-1 (b - (A - D) x_old), one workgroup per row (grid-stride over
// rows). The host records every step into one command buffer, ping-ponging x_old and x_new.
// vec4 loads (as matvec.glsl) when n % 4 == 0 and the bindings are aligned; the diagonal's
// term is left out of the sum in both paths, so both add the same products.
//
// status (8 uints, zeroed before step 0) carries the solver's state: status[step % 3] collects
// max |x_new - x_old| of the step (atomicMax on the float bits, which order like the floats
// since they are not negative; a NaN's bits order above infinity's), read back as the
// residual. With a tolerance, every `check_every` steps, a step first
// reads the previous step's value and, once it is below the tolerance, sets status[3] and only
// carries x_old over (so the result lands in the same ping-pong buffer). status[4] counts the
// steps that ran. Every workgroup of a step reaches the same decision: the slot it reads is
// not written during the step, and status[3] is set only by steps that decided to stop.

layout(local_size_x_id = 0) in;

layout(std430, set = 0, binding = 0) readonly buffer A { float a[]; };
layout(std430, set = 0, binding = 0) readonly buffer A4 { vec4 a4[]; };
layout(std430, set = 0, binding = 1) readonly buffer B { float b[]; };
layout(std430, set = 0, binding = 2) readonly buffer XOld { float x_old[]; };
layout(std430, set = 0, binding = 2) readonly buffer XOld4 { vec4 x_old4[]; };
layout(std430, set = 0, binding = 3) writeonly buffer XNew { float x_new[]; };
layout(std430, set = 0, binding = 4) coherent buffer Status { uint status[]; };

layout(push_constant) uniform Params {
    uint n;
    uint step;
    uint check_every;
    uint use_tolerance;
    float tolerance;
    uint vec4_ok;
};

#include "row_sum.glsl"

bool stopped() {
    if (use_tolerance == 0) {
        return false;
    }
    if (status[3] != 0u) {
        return true;
    }
    return step > 0 && step % check_every == 0
        && uintBitsToFloat(status[(step - 1) % 3]) < tolerance;
}

void main() {
    uint lid = gl_LocalInvocationID.x;
    uint gid = gl_GlobalInvocationID.x;
    if (stopped()) {
        for (uint i = gid; i < n; i += gl_NumWorkGroups.x * gl_WorkGroupSize.x) {
            x_new[i] = x_old[i];
        }
        if (gid == 0) {
            status[3] = 1u;
        }
        return;
    }
    if (gid == 0) {
        status[(step + 1) % 3] = 0u;
        status[4] += 1u;
    }
    for (uint row = gl_WorkGroupID.x; row < n; row += gl_NumWorkGroups.x) {
        uint base = row * n;
        float acc = 0.0;
        if (vec4_ok != 0) {
            uint n4 = n / 4;
            uint diagonal4 = row / 4;
            vec4 acc4 = vec4(0.0);
            for (uint j = lid; j < n4; j += gl_WorkGroupSize.x) {
                vec4 products = a4[row * n4 + j] * x_old4[j];
                if (j == diagonal4) {
                    products[row % 4] = 0.0;
                }
                acc4 += products;
            }
            acc = (acc4.x + acc4.y) + (acc4.z + acc4.w);
        } else {
            for (uint j = lid; j < n; j += gl_WorkGroupSize.x) {
                if (j != row) {
                    acc += a[base + j] * x_old[j];
                }
            }
        }
        float sigma = group_reduce(acc);
        if (lid == 0) {
            float next = (b[row] - sigma) / a[base + row];
            x_new[row] = next;
            atomicMax(status[step % 3], floatBitsToUint(abs(next - x_old[row])));
        }
    }
}
