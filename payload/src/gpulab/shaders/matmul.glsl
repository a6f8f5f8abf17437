// C = A B for A (m x k) and B (k x n), row-major, register-blocked.
//
// A workgroup of TX x TY invocations computes a BM x BN block of C (BM = 8 TY, BN = 8 TX);
// each invocation holds 8 x 8 outputs in registers, as 2 x 2 sub-blocks of 4 x 4 that lie
// half a block apart (rows ty*4 and BM/2 + ty*4, likewise for columns), so that neighbouring
// invocations read neighbouring vec4s of shared memory (no bank conflicts in the inner loop).
// k advances in panels of BK. Each panel of A (BM x BK, stored transposed: a_panel[d][row])
// and of B (BK x BN: b_panel[d][col]) sits in one of two shared buffers: while the panel in
// one buffer is multiplied, the next one is loaded into registers, then stored into the other
// buffer, so one barrier per panel suffices. Every invocation stages one vec4 of A's panel
// (four rows at one depth: four scalar loads, BK invocations in a row reading BK consecutive
// floats of each row) and one of B's, so the staging costs few registers and no invocation
// waits on another's larger share. A's rows are padded by one vec4, which spreads the stores
// over more banks.
//
// With SUBGROUP_TILES, the invocations of each 32-wide subgroup take an 8 x 4 patch of the
// TX x TY grid instead of two rows of it, so that a subgroup's shared loads are fewer distinct
// vec4s. It costs registers: the host sets it only where the workgroup is so large that the
// register limit per invocation is already what the device allows (kernels/matmul_tiles.py).
//
// Loads of B and stores of C are vec4 where the panel lies inside the matrix and the rows are
// vec4-aligned (flags, from the host); otherwise scalar with zeros outside, so any shape is
// exact. TX, TY, BK and SUBGROUP_TILES are specialization constants chosen by the host from
// the device's limits and the size of C.
//
// Four builds: matmul.comp as above, and matmul_split.comp (MATMUL_SPLIT 1) for the variants
// the host picks per shape regime (kernels/matmul_tiles.py). In that build, workgroup z takes
// depths [z k_chunk, min(k, (z + 1) k_chunk)) and writes its m x n result slice_stride floats
// after slice z - 1's (split-K; matmul_sum.comp adds the slices), and with STAGED_STORES each
// invocation's rows of C pass through shared memory (B's panels, free by then) first, so that
// neighbouring invocations write neighbouring floats whatever n's alignment (rows of C that
// are not whole vec4s). NC (4 instead of 2) widens each invocation's outputs to 8 x 16, as 2 x
// NC sub-blocks of 4 x 4, column group h at h BN / NC + 4 tx, so a block is 8 TY x 16 TX:
// twice the FMAs per shared load, and about 170 registers, for workgroups of up to 256.
// matmul.comp's code is unchanged by the split build's lines (#if MATMUL_SPLIT).
// matmul_unrolled.comp and matmul_split_unrolled.comp are those two with MATMUL_UNROLL (below).

#if defined(MATMUL_UNROLL)
// The unrolled builds (plan part `unrolled`): the loops over an invocation's registers (acc,
// a_next, b_next; in matmul_unrolled.comp those of the k loop) carry [[unroll]], so that no
// index into them can stay dynamic, and the k loop takes panels two at a time
// (PAIRED_PANELS). NVIDIA's compiler left those loops rolled, acc in local memory: the wide
// and staged variants ran at 1-2 TFLOP/s, and 15-20 times faster unrolled (H100, 7 Dec,
// docs/benchmarks.md); paired, the plain kernel runs 5% faster than rolled.
#extension GL_EXT_control_flow_attributes : require
#define UNROLL [[unroll]]
#else
#define UNROLL
#endif

layout(local_size_x_id = 0, local_size_y_id = 1) in;
layout(constant_id = 2) const uint BK = 8;
layout(constant_id = 3) const bool SUBGROUP_TILES = false;
#if MATMUL_SPLIT
layout(constant_id = 4) const bool STAGED_STORES = false;
layout(constant_id = 5) const uint NC = 2;  // column groups of 4 per invocation: 2 or 4
#endif

const uint TX = gl_WorkGroupSize.x;
const uint TY = gl_WorkGroupSize.y;
const uint THREADS = TX * TY;
const uint BM = 8 * TY;
#if MATMUL_SPLIT
const uint BN = 4 * NC * TX;
#else
const uint BN = 8 * TX;
#endif
const uint A_STRIDE = BM / 4 + 1;  // vec4s per row of a_panel (one of padding)
const uint B_STRIDE = BN / 4;      // vec4s per row of b_panel
const uint A_UNITS = (BM / 4) * BK;  // vec4s of A per panel: 4 rows at one depth
const uint B_UNITS = BK * (BN / 4);        // vec4s of B per panel
const uint A_LOADS = (A_UNITS + THREADS - 1) / THREADS;  // units per invocation, at most
const uint B_LOADS = (B_UNITS + THREADS - 1) / THREADS;  // MAX_UNITS (the host sees to it)
const uint MAX_UNITS = 4;

// flags: bit 1 B's rows are vec4-aligned, bit 2 C's (bit 0, A's, is no longer read)
const uint B_VEC4 = 2u;
const uint C_VEC4 = 4u;

layout(std430, set = 0, binding = 0) readonly buffer A { float a[]; };
layout(std430, set = 0, binding = 1) readonly buffer B { float b[]; };
layout(std430, set = 0, binding = 1) readonly buffer B4 { vec4 b4[]; };
layout(std430, set = 0, binding = 2) writeonly buffer C { float c[]; };
layout(std430, set = 0, binding = 2) writeonly buffer C4 { vec4 c4[]; };

layout(push_constant) uniform Params {
    uint m;
    uint k;
    uint n;
    uint flags;
#if MATMUL_SPLIT
    uint k_chunk;       // depths per slice, a multiple of BK
    uint slice_stride;  // floats between two slices' results in C (a multiple of 4)
#endif
};

#if MATMUL_SPLIT
uint k_end;   // this slice's last depth + 1
uint c_base;  // this slice's first float in C
#define K_END k_end
#define C_AT(i) (c_base + (i))
#else
#define K_END k
#define C_AT(i) (i)
#endif

shared vec4 a_panel[2 * BK * A_STRIDE];
shared vec4 b_panel[2 * BK * B_STRIDE];
#if MATMUL_SPLIT
// Staged stores: one row of each invocation's 8 (TY rows of BN floats) in b_panel, which
// holds 4 BK TX vec4s, enough while TY <= 2 BK (the host sees to it).
#define C_ROWS(e) b_panel[(e) / 4][(e) % 4]
#endif

vec4 a_next[MAX_UNITS];  // per A unit: 4 rows at one depth
vec4 b_next[MAX_UNITS];

float a_at(uint row, uint depth) {
    return (row < m && depth < K_END) ? a[row * k + depth] : 0.0;
}

float b_at(uint depth, uint col) {
    return (depth < K_END && col < n) ? b[depth * n + col] : 0.0;
}

// Load panel d0 into registers: vec4 when the whole panel lies inside the matrix.
void load_panel(uint lid, uint row0, uint col0, uint d0) {
    bool a_inside = row0 + BM <= m && d0 + BK <= K_END;
    bool b_inside = (flags & B_VEC4) != 0 && col0 + BN <= n && d0 + BK <= K_END;
    UNROLL for (uint s = 0; s < A_LOADS; ++s) {
        uint unit = lid + s * THREADS;
        if (unit < A_UNITS) {
            // BK invocations in a row read BK consecutive floats of each of 4 rows of A.
            uint row = row0 + (unit / BK) * 4;
            uint depth = d0 + unit % BK;
            if (a_inside) {
                uint at = row * k + depth;
                a_next[s] = vec4(a[at], a[at + k], a[at + 2 * k], a[at + 3 * k]);
            } else {
                a_next[s] = vec4(
                    a_at(row, depth), a_at(row + 1, depth), a_at(row + 2, depth), a_at(row + 3, depth)
                );
            }
        }
    }
    UNROLL for (uint s = 0; s < B_LOADS; ++s) {
        uint unit = lid + s * THREADS;
        if (unit < B_UNITS) {
            uint depth = d0 + unit / B_STRIDE;
            uint col = col0 + (unit % B_STRIDE) * 4;
            if (b_inside) {
                b_next[s] = b4[(depth * n + col) / 4];
            } else {
                b_next[s] = vec4(
                    b_at(depth, col), b_at(depth, col + 1), b_at(depth, col + 2), b_at(depth, col + 3)
                );
            }
        }
    }
}

// Store the registers into shared buffer `slot`, A transposed (4 x 4 in registers).
void store_panel(uint lid, uint slot) {
    UNROLL for (uint s = 0; s < A_LOADS; ++s) {
        uint unit = lid + s * THREADS;
        if (unit < A_UNITS) {
            a_panel[(slot * BK + unit % BK) * A_STRIDE + unit / BK] = a_next[s];
        }
    }
    UNROLL for (uint s = 0; s < B_LOADS; ++s) {
        uint unit = lid + s * THREADS;
        if (unit < B_UNITS) {
            b_panel[(slot * BK + unit / B_STRIDE) * B_STRIDE + unit % B_STRIDE] = b_next[s];
        }
    }
}

void store_row(uint row, uint col, vec4 value, bool vec4_ok) {
    if (row >= m) {
        return;
    }
    if (vec4_ok && col + 4 <= n) {
        c4[C_AT(row * n + col) / 4] = value;
        return;
    }
    UNROLL for (uint j = 0; j < 4; ++j) {
        if (col + j < n) {
            c[C_AT(row * n + col + j)] = value[j];
        }
    }
}

// This invocation's (tx, ty) in the TX x TY grid of the tile: its local id, or with
// SUBGROUP_TILES each subgroup of 32 on an 8 x 4 block of it.
uvec2 tile_position(uint lid) {
    if (SUBGROUP_TILES && TX % 8 == 0 && TY % 4 == 0) {
        uint subgroup = lid / 32;
        uint lane = lid % 32;
        return uvec2((subgroup % (TX / 8)) * 8 + lane % 8, (subgroup / (TX / 8)) * 4 + lane / 8);
    }
    return gl_LocalInvocationID.xy;
}

// Column groups H0 and H1 of the invocation's 8 rows, from one depth's a_lo, a_hi and B0, B1.
#define FMA_COLUMNS(H0, B0, H1, B1) \
    UNROLL for (uint i = 0; i < 4; ++i) { \
        acc[i][H0] = fma(vec4(a_lo[i]), B0, acc[i][H0]); \
        acc[i][H1] = fma(vec4(a_lo[i]), B1, acc[i][H1]); \
        acc[i + 4][H0] = fma(vec4(a_hi[i]), B0, acc[i + 4][H0]); \
        acc[i + 4][H1] = fma(vec4(a_hi[i]), B1, acc[i + 4][H1]); \
    }
// One panel's depths from shared buffer SLOT into acc (the invocation's tx, ty in scope): four
// vec4 loads feed 64 FMAs per depth (with NC 4, six feed 128).
#if MATMUL_SPLIT
#define MULTIPLY_WIDE(b_row) \
        if (NC == 4) { \
            vec4 b_2 = b_panel[b_row + 2 * TX + tx]; \
            vec4 b_3 = b_panel[b_row + 3 * TX + tx]; \
            FMA_COLUMNS(2, b_2, 3, b_3) \
        }
#else
#define MULTIPLY_WIDE(b_row)
#endif
#define MULTIPLY_PANEL(SLOT) \
    UNROLL for (uint d = 0; d < BK; ++d) { \
        uint a_row = ((SLOT) * BK + d) * A_STRIDE; \
        uint b_row = ((SLOT) * BK + d) * B_STRIDE; \
        vec4 a_lo = a_panel[a_row + ty]; \
        vec4 a_hi = a_panel[a_row + TY + ty]; \
        vec4 b_lo = b_panel[b_row + tx]; \
        vec4 b_hi = b_panel[b_row + TX + tx]; \
        FMA_COLUMNS(0, b_lo, 1, b_hi) \
        MULTIPLY_WIDE(b_row) \
    }

// The unrolled builds' k loop from depth D_BEGIN (panels, lid, row0, col0 in scope): panels
// two at a time, buffer 0 then 1, so that every shared address is a constant offset (with
// p % 2 in them, NVIDIA's compiler kept the unrolled loops 10% slower than the rolled kernel:
// H100, docs/benchmarks.md).
#define PAIRED_PANELS(D_BEGIN) \
    load_panel(lid, row0, col0, D_BEGIN); \
    for (uint p = 0; p < panels; p += 2) { \
        PANEL_STEP(0u, p + 1, D_BEGIN) \
        if (p + 1 == panels) { \
            break; \
        } \
        PANEL_STEP(1u, p + 2, D_BEGIN) \
    }
// One panel through buffer SLOT: its registers stored, panel NEXT loaded while it is multiplied.
#define PANEL_STEP(SLOT, NEXT, D_BEGIN) \
    store_panel(lid, SLOT); \
    barrier(); \
    if (NEXT < panels) { \
        load_panel(lid, row0, col0, D_BEGIN + (NEXT) * BK); \
    } \
    MULTIPLY_PANEL(SLOT)

#if MATMUL_SPLIT
// The split build's main: matmul.comp's, with the slice of k, NC column groups and staged
// stores.
void main() {
    uint lid = gl_LocalInvocationIndex;
    uvec2 tile = tile_position(lid);
    uint tx = tile.x;
    uint ty = tile.y;
    uint row0 = gl_WorkGroupID.y * BM;
    uint col0 = gl_WorkGroupID.x * BN;
    uint d_begin = gl_WorkGroupID.z * k_chunk;
    k_end = min(k, d_begin + k_chunk);
    c_base = gl_WorkGroupID.z * slice_stride;

    // acc[i][h]: row i of this invocation's 8 (as in matmul.comp), columns h BN / NC + tx * 4
    // .. +3 (h < NC; with NC 2, acc[i][2] and [3] are never used, so cost nothing).
    vec4 acc[8][4];
    UNROLL for (uint i = 0; i < 8; ++i) {
        UNROLL for (uint h = 0; h < NC; ++h) {
            acc[i][h] = vec4(0.0);
        }
    }

    uint panels = (k_end - d_begin + BK - 1) / BK;
#if defined(MATMUL_UNROLL)
    PAIRED_PANELS(d_begin)
#else
    load_panel(lid, row0, col0, d_begin);
    for (uint p = 0; p < panels; ++p) {
        uint slot = p % 2;
        store_panel(lid, slot);
        barrier();
        if (p + 1 < panels) {
            load_panel(lid, row0, col0, d_begin + (p + 1) * BK);
        }
        MULTIPLY_PANEL(slot)
    }
#endif

    if (STAGED_STORES) {
        // Pass i: row i of every invocation's 8 (TY rows of BN floats) through b_panel, then
        // written a float per invocation, neighbours to neighbouring addresses.
        UNROLL for (uint i = 0; i < 8; ++i) {
            barrier();  // the last panel, then the previous pass, has been read
            uint at = ty * BN + tx * 4;
            UNROLL for (uint h = 0; h < NC; ++h) {
                UNROLL for (uint j = 0; j < 4; ++j) {
                    C_ROWS(at + h * (BN / NC) + j) = acc[i][h][j];
                }
            }
            barrier();
            for (uint e = lid; e < TY * BN; e += THREADS) {
                uint r = e / BN;
                uint row = row0 + (i < 4 ? r * 4 + i : BM / 2 + r * 4 + i - 4);
                uint col = col0 + e % BN;
                if (row < m && col < n) {
                    c[C_AT(row * n + col)] = C_ROWS(e);
                }
            }
        }
        return;
    }
    bool vec4_ok = (flags & C_VEC4) != 0;
    UNROLL for (uint i = 0; i < 8; ++i) {
        uint row = row0 + (i < 4 ? ty * 4 + i : BM / 2 + ty * 4 + i - 4);
        UNROLL for (uint h = 0; h < NC; ++h) {
            store_row(row, col0 + h * (BN / NC) + tx * 4, acc[i][h], vec4_ok);
        }
    }
}
#else
void main() {
    uint lid = gl_LocalInvocationIndex;
    uvec2 tile = tile_position(lid);
    uint tx = tile.x;
    uint ty = tile.y;
    uint row0 = gl_WorkGroupID.y * BM;
    uint col0 = gl_WorkGroupID.x * BN;

    // acc[i][h]: row i of this invocation's 8 (i < 4: ty*4 + i, else BM/2 + ty*4 + i - 4),
    // columns tx*4 .. +3 (h = 0) and BN/2 + tx*4 .. +3 (h = 1).
    vec4 acc[8][2];
    for (uint i = 0; i < 8; ++i) {
        acc[i][0] = vec4(0.0);
        acc[i][1] = vec4(0.0);
    }

    uint panels = (k + BK - 1) / BK;
#if defined(MATMUL_UNROLL)
    PAIRED_PANELS(0u)
#else
    load_panel(lid, row0, col0, 0);
    for (uint p = 0; p < panels; ++p) {
        // Buffer `slot` was last read for panel p - 2, before the previous barrier.
        uint slot = p % 2;
        store_panel(lid, slot);
        barrier();
        if (p + 1 < panels) {
            load_panel(lid, row0, col0, (p + 1) * BK);  // in flight while panel p is multiplied
        }
        MULTIPLY_PANEL(slot)
    }
#endif

    bool vec4_ok = (flags & C_VEC4) != 0;
    for (uint i = 0; i < 8; ++i) {
        uint row = row0 + (i < 4 ? ty * 4 + i : BM / 2 + ty * 4 + i - 4);
        store_row(row, col0 + tx * 4, acc[i][0], vec4_ok);
        store_row(row, col0 + BN / 2 + tx * 4, acc[i][1], vec4_ok);
    }
}
#endif
