/* Unit tests of gpulab_kernels against straightforward double-precision references. */
#include <math.h>
#include <stdlib.h>

#include "check.h"
#include "gpulab_kernels.h"

#define N 10007 /* odd, so every loop has a remainder */

static float rnd(unsigned *state) {
    *state = *state * 1664525u + 1013904223u;
    return (float)((*state >> 8) * (1.0 / 16777216.0)) * 2.0f - 1.0f;
}

static int close_to(double got, double want, double scale) {
    return fabs(got - want) <= 2.0 * 1.2e-7 * scale;
}

static void test_elementwise(const float *x, const float *y, float *out) {
    gpulab_add(x, y, out, N);
    int ok = 1;
    for (int i = 0; i < N; i++) ok &= out[i] == x[i] + y[i];
    CHECK(ok);
    gpulab_scale(2.5f, x, out, N);
    ok = 1;
    for (int i = 0; i < N; i++) ok &= out[i] == 2.5f * x[i];
    CHECK(ok);
    gpulab_saxpy(-3.0f, x, y, out, N);
    ok = 1;
    for (int i = 0; i < N; i++) ok &= close_to(out[i], -3.0 * x[i] + y[i], 3.0 * fabs(x[i]) + fabs(y[i]));
    CHECK(ok);
}

static void test_reductions(const float *x, const float *y) {
    double sum = 0, sum_abs = 0, dot = 0, dot_abs = 0, sq = 0, lo = x[0], hi = x[0];
    for (int i = 0; i < N; i++) {
        sum += x[i];
        sum_abs += fabs(x[i]);
        dot += (double)x[i] * y[i];
        dot_abs += fabs((double)x[i] * y[i]);
        sq += (double)x[i] * x[i];
        lo = x[i] < lo ? x[i] : lo;
        hi = x[i] > hi ? x[i] : hi;
    }
    CHECK(close_to(gpulab_sum(x, N), sum, sum_abs));
    CHECK(close_to(gpulab_dot(x, y, N), dot, dot_abs));
    CHECK(close_to(gpulab_l2_norm(x, N), sqrt(sq), sqrt(sq)));
    CHECK(gpulab_min(x, N) == (float)lo);
    CHECK(gpulab_max(x, N) == (float)hi);
    CHECK(gpulab_sum(x, 0) == 0.0f);
    CHECK(isnan(gpulab_min(x, 0)));
}

static void test_special_values(void) {
    float v[11] = {1, -2, 3, -INFINITY, 5, 6, 7, 8, 9, INFINITY, -0.0f};
    CHECK(gpulab_min(v, 11) == -INFINITY);
    CHECK(gpulab_max(v, 11) == INFINITY);
    v[6] = -NAN;
    CHECK(isnan(gpulab_min(v, 11)) && isnan(gpulab_max(v, 11)));
    /* A sum float32 accumulation gets wrong: 2^24 + 1 + 1 ... */
    float big[3] = {16777216.0f, 1.0f, 1.0f};
    CHECK(gpulab_sum(big, 3) == 16777218.0f);
    /* Squares of large values must not overflow. */
    float large[2] = {2e38f, 1e38f};
    CHECK(isfinite(gpulab_l2_norm(large, 2)));
}

static void test_matrices(unsigned *state) {
    enum { M = 37, K = 300, P = 261 }; /* not multiples of the block sizes */
    float *a = malloc(sizeof(float) * M * K), *b = malloc(sizeof(float) * K * P);
    float *c = malloc(sizeof(float) * M * P), *v = malloc(sizeof(float) * K);
    float *w = malloc(sizeof(float) * M);
    for (int i = 0; i < M * K; i++) a[i] = rnd(state);
    for (int i = 0; i < K * P; i++) b[i] = rnd(state);
    for (int i = 0; i < K; i++) v[i] = rnd(state);
    gpulab_matmul(a, b, c, M, K, P);
    int ok = 1;
    for (int i = 0; i < M; i++)
        for (int j = 0; j < P; j++) {
            double want = 0, scale = 0;
            for (int p = 0; p < K; p++) {
                want += (double)a[i * K + p] * b[p * P + j];
                scale += fabs((double)a[i * K + p] * b[p * P + j]);
            }
            ok &= fabs(c[i * P + j] - want) <= K * 1.2e-7 * scale;
        }
    CHECK(ok);
    gpulab_matvec(a, v, w, M, K);
    ok = 1;
    for (int i = 0; i < M; i++) {
        double want = 0, scale = 0;
        for (int p = 0; p < K; p++) {
            want += (double)a[i * K + p] * v[p];
            scale += fabs((double)a[i * K + p] * v[p]);
        }
        ok &= close_to(w[i], want, scale);
    }
    CHECK(ok);
    free(a), free(b), free(c), free(v), free(w);
}

static void test_jacobi(void) {
    /* A diagonally dominant system with the solution (1, 2, 3). */
    const float a[9] = {10, 1, 2, 1, 8, -1, 2, -1, 9};
    const float b[3] = {10 + 2 + 6, 1 + 16 - 3, 2 - 2 + 27};
    float x[3] = {0, 0, 0}, next[3];
    float update = 1;
    for (int it = 0; it < 100 && update > 1e-6f; it++) {
        update = gpulab_jacobi_step(a, b, x, next, 3);
        for (int i = 0; i < 3; i++) x[i] = next[i];
    }
    CHECK(fabsf(x[0] - 1) < 1e-5f && fabsf(x[1] - 2) < 1e-5f && fabsf(x[2] - 3) < 1e-5f);
    CHECK(update <= 1e-6f);
    /* A zero diagonal: the first step is infinite, the second NaN, and the update says so. */
    const float singular[4] = {0, 1, 1, 0};
    float y[2] = {0, 0}, following[2];
    for (int it = 0; it < 2; it++) {
        update = gpulab_jacobi_step(singular, b, y, following, 2);
        y[0] = following[0], y[1] = following[1];
    }
    CHECK(!isfinite(update));
}

int main(void) {
    unsigned state = 12345;
    float *x = malloc(sizeof(float) * N), *y = malloc(sizeof(float) * N);
    float *out = malloc(sizeof(float) * N);
    for (int i = 0; i < N; i++) x[i] = rnd(&state), y[i] = rnd(&state);
    CHECK(gpulab_kernels_abi_version() == GPULAB_KERNELS_ABI_VERSION);
    test_elementwise(x, y, out);
    test_reductions(x, y);
    test_special_values();
    test_matrices(&state);
    test_jacobi();
    free(x), free(y), free(out);
    return report_and_exit_status("test_kernels", checks_run, checks_failed);
}
