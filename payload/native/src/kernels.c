/* Float32 kernels. Loops are kept simple with `restrict` pointers and explicit
 * independent accumulator lanes so that GCC and Clang vectorize them at -O3 without
 * -ffast-math (which would let the compiler reorder sums and change results). */
#include "gpulab_kernels.h"

#include <math.h>
#include <string.h>

/* On x86-64, each loop is also compiled for AVX2 (x86-64-v3) and picked at load time, so
 * the package stays portable to any x86-64 while using the wider vectors where they exist. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define VECTOR_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define VECTOR_CLONES
#endif

/* Accumulator lanes per reduction loop: enough independent chains to fill SIMD registers. */
#define LANES 8
/* Elements summed by one leaf of the pairwise recursion. */
#define LEAF 1024
/* Matmul cache blocks (elements): rows of A, depth, and columns of B per tile. */
#define BLOCK_M 32
#define BLOCK_K 128
#define BLOCK_N 256

uint32_t gpulab_kernels_abi_version(void) { return GPULAB_KERNELS_ABI_VERSION; }

VECTOR_CLONES
void gpulab_add(const float *restrict x, const float *restrict y, float *restrict out, size_t n) {
    for (size_t i = 0; i < n; i++) out[i] = x[i] + y[i];
}

VECTOR_CLONES
void gpulab_scale(float a, const float *restrict x, float *restrict out, size_t n) {
    for (size_t i = 0; i < n; i++) out[i] = a * x[i];
}

VECTOR_CLONES
void gpulab_saxpy(float a, const float *restrict x, const float *restrict y, float *restrict out,
                  size_t n) {
    for (size_t i = 0; i < n; i++) out[i] = a * x[i] + y[i];
}

static double combine_lanes(const double acc[LANES]) {
    return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

/* Where to split n elements for pairwise recursion: half, rounded down to whole lanes. */
static size_t split_point(size_t n) { return (n / 2) / LANES * LANES; }

/* The three reductions share one shape: a leaf with LANES double accumulators, and a
 * pairwise recursion above it, so the error grows with log(n) rather than n. */
VECTOR_CLONES
static double sum_leaf(const float *restrict x, size_t n) {
    double acc[LANES] = {0};
    size_t i = 0;
    for (; i + LANES <= n; i += LANES)
        for (size_t j = 0; j < LANES; j++) acc[j] += (double)x[i + j];
    for (; i < n; i++) acc[0] += (double)x[i];
    return combine_lanes(acc);
}

static double sum_pairwise(const float *x, size_t n) {
    if (n <= LEAF) return sum_leaf(x, n);
    size_t half = split_point(n);
    return sum_pairwise(x, half) + sum_pairwise(x + half, n - half);
}

VECTOR_CLONES
static double dot_leaf(const float *restrict x, const float *restrict y, size_t n) {
    double acc[LANES] = {0};
    size_t i = 0;
    for (; i + LANES <= n; i += LANES)
        for (size_t j = 0; j < LANES; j++) acc[j] += (double)x[i + j] * (double)y[i + j];
    for (; i < n; i++) acc[0] += (double)x[i] * (double)y[i];
    return combine_lanes(acc);
}

static double dot_pairwise(const float *x, const float *y, size_t n) {
    if (n <= LEAF) return dot_leaf(x, y, n);
    size_t half = split_point(n);
    return dot_pairwise(x, y, half) + dot_pairwise(x + half, y + half, n - half);
}

VECTOR_CLONES
static double sumsq_leaf(const float *restrict x, size_t n) {
    double acc[LANES] = {0};
    size_t i = 0;
    for (; i + LANES <= n; i += LANES)
        for (size_t j = 0; j < LANES; j++) acc[j] += (double)x[i + j] * (double)x[i + j];
    for (; i < n; i++) acc[0] += (double)x[i] * (double)x[i];
    return combine_lanes(acc);
}

static double sumsq_pairwise(const float *x, size_t n) {
    if (n <= LEAF) return sumsq_leaf(x, n);
    size_t half = split_point(n);
    return sumsq_pairwise(x, half) + sumsq_pairwise(x + half, n - half);
}

float gpulab_sum(const float *x, size_t n) { return (float)sum_pairwise(x, n); }

float gpulab_dot(const float *x, const float *y, size_t n) { return (float)dot_pairwise(x, y, n); }

/* Squares of float32 values cannot overflow a double, so no rescaling is needed. */
float gpulab_l2_norm(const float *x, size_t n) { return (float)sqrt(sumsq_pairwise(x, n)); }

/* min and max work on integer keys that order like the floats (a total order with NaN
 * beyond the infinities): integer min/max vectorizes without -ffinite-math-only, and the
 * same pass spots NaN by its magnitude bits, so NaN propagates like numpy's. */
static int32_t float_bits(float v) {
    int32_t bits;
    memcpy(&bits, &v, sizeof bits);
    return bits;
}

/* Negative floats get their magnitude bits flipped; the mapping is its own inverse. */
static int32_t flip_negative(int32_t bits) { return bits ^ (int32_t)((uint32_t)(bits >> 31) >> 1); }

static float from_order_key(int32_t key) {
    int32_t bits = flip_negative(key);
    float v;
    memcpy(&v, &bits, sizeof v);
    return v;
}

static const int32_t MAGNITUDE_MASK = 0x7fffffff;
static const int32_t INFINITY_BITS = 0x7f800000;

VECTOR_CLONES
float gpulab_min(const float *restrict x, size_t n) {
    int32_t lowest = INT32_MAX, largest_magnitude = 0;
    for (size_t i = 0; i < n; i++) {
        int32_t bits = float_bits(x[i]), key = flip_negative(bits);
        lowest = key < lowest ? key : lowest;
        int32_t magnitude = bits & MAGNITUDE_MASK;
        largest_magnitude = magnitude > largest_magnitude ? magnitude : largest_magnitude;
    }
    return largest_magnitude > INFINITY_BITS ? NAN : from_order_key(lowest);
}

VECTOR_CLONES
float gpulab_max(const float *restrict x, size_t n) {
    int32_t highest = INT32_MIN, largest_magnitude = 0;
    for (size_t i = 0; i < n; i++) {
        int32_t bits = float_bits(x[i]), key = flip_negative(bits);
        highest = key > highest ? key : highest;
        int32_t magnitude = bits & MAGNITUDE_MASK;
        largest_magnitude = magnitude > largest_magnitude ? magnitude : largest_magnitude;
    }
    return largest_magnitude > INFINITY_BITS ? NAN : from_order_key(highest);
}

void gpulab_matvec(const float *a, const float *x, float *restrict out, size_t m, size_t n) {
    for (size_t i = 0; i < m; i++) out[i] = (float)dot_pairwise(a + i * n, x, n);
}

static size_t min_size(size_t a, size_t b) { return a < b ? a : b; }

/* Tiles keep a BLOCK_K x BLOCK_N panel of b in cache while BLOCK_M rows of c are updated;
 * the innermost loop runs along a row of b and c, contiguous, and vectorizes. */
VECTOR_CLONES
void gpulab_matmul(const float *restrict a, const float *restrict b, float *restrict c, size_t m,
                   size_t k, size_t n) {
    for (size_t i = 0; i < m * n; i++) c[i] = 0.0f;
    for (size_t i0 = 0; i0 < m; i0 += BLOCK_M) {
        size_t i1 = min_size(i0 + BLOCK_M, m);
        for (size_t p0 = 0; p0 < k; p0 += BLOCK_K) {
            size_t p1 = min_size(p0 + BLOCK_K, k);
            for (size_t j0 = 0; j0 < n; j0 += BLOCK_N) {
                size_t j1 = min_size(j0 + BLOCK_N, n);
                for (size_t i = i0; i < i1; i++) {
                    float *restrict c_row = c + i * n;
                    for (size_t p = p0; p < p1; p++) {
                        const float a_ip = a[i * k + p];
                        const float *restrict b_row = b + p * n;
                        for (size_t j = j0; j < j1; j++) c_row[j] += a_ip * b_row[j];
                    }
                }
            }
        }
    }
}

float gpulab_jacobi_step(const float *a, const float *b, const float *x, float *restrict x_next,
                         size_t n) {
    float max_update = 0.0f;
    for (size_t i = 0; i < n; i++) {
        const float *row = a + i * n;
        double off_diagonal = dot_pairwise(row, x, n) - (double)row[i] * (double)x[i];
        float next = (float)(((double)b[i] - off_diagonal) / (double)row[i]);
        float update = fabsf(next - x[i]);
        /* A NaN update sticks, so a diverging or singular system is seen by the caller. */
        max_update = (update > max_update || isnan(update)) ? update : max_update;
        x_next[i] = next;
    }
    return max_update;
}
