#version 450
// C = A B for A (m x k) and B (k x n), row-major. Each workgroup of TILE x TILE invocations
// computes a (TILE * 4) x (TILE * 4) block of C, each invocation 4 x 4 outputs held in
// registers. The k dimension advances in steps of DEPTH, staging the A and B panels through
// shared memory (A transposed, so the inner loop reads both panels along rows). TILE and DEPTH
// are specialization constants, chosen by the host from the device's shared memory and
// workgroup limits. Edges of awkward shapes are padded with zeros in shared memory.

layout(local_size_x_id = 0, local_size_y_id = 0) in;
layout(constant_id = 1) const uint DEPTH = 16;

const uint WORK = 4;  // outputs per invocation along each dimension
const uint BLOCK = gl_WorkGroupSize.x * WORK;

layout(std430, set = 0, binding = 0) readonly buffer A { float a[]; };
layout(std430, set = 0, binding = 1) readonly buffer B { float b[]; };
layout(std430, set = 0, binding = 2) writeonly buffer C { float c[]; };

layout(push_constant) uniform Params {
    uint m;
    uint k;
    uint n;
};

shared float a_panel[DEPTH * BLOCK];  // a_panel[d * BLOCK + row]
shared float b_panel[DEPTH * BLOCK];  // b_panel[d * BLOCK + col]

void main() {
    uint tx = gl_LocalInvocationID.x;
    uint ty = gl_LocalInvocationID.y;
    uint tile = gl_WorkGroupSize.x;
    uint invocations = tile * tile;
    uint lid = ty * tile + tx;
    uint row0 = gl_WorkGroupID.y * BLOCK;
    uint col0 = gl_WorkGroupID.x * BLOCK;

    float acc[WORK][WORK];
    for (uint i = 0; i < WORK; ++i) {
        for (uint j = 0; j < WORK; ++j) {
            acc[i][j] = 0.0;
        }
    }

    for (uint d0 = 0; d0 < k; d0 += DEPTH) {
        // Consecutive invocations read consecutive addresses of A's rows and B's rows.
        for (uint e = lid; e < DEPTH * BLOCK; e += invocations) {
            uint r = e / DEPTH;
            uint d = e % DEPTH;
            uint row = row0 + r;
            uint depth = d0 + d;
            a_panel[d * BLOCK + r] = (row < m && depth < k) ? a[row * k + depth] : 0.0;
        }
        for (uint e = lid; e < DEPTH * BLOCK; e += invocations) {
            uint d = e / BLOCK;
            uint col_in_block = e % BLOCK;
            uint col = col0 + col_in_block;
            uint depth = d0 + d;
            b_panel[d * BLOCK + col_in_block] = (col < n && depth < k) ? b[depth * n + col] : 0.0;
        }
        memoryBarrierShared();
        barrier();
        for (uint d = 0; d < DEPTH; ++d) {
            float a_reg[WORK];
            float b_reg[WORK];
            for (uint i = 0; i < WORK; ++i) {
                a_reg[i] = a_panel[d * BLOCK + ty + i * tile];
                b_reg[i] = b_panel[d * BLOCK + tx + i * tile];
            }
            for (uint i = 0; i < WORK; ++i) {
                for (uint j = 0; j < WORK; ++j) {
                    acc[i][j] = fma(a_reg[i], b_reg[j], acc[i][j]);
                }
            }
        }
        barrier();
    }

    for (uint i = 0; i < WORK; ++i) {
        uint row = row0 + ty + i * tile;
        for (uint j = 0; j < WORK; ++j) {
            uint col = col0 + tx + j * tile;
            if (row < m && col < n) {
                c[row * n + col] = acc[i][j];
            }
        }
    }
}
