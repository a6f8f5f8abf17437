/* gpulab_kernels: float32 CPU kernels for the `native` backend.
 *
 * This header is the single source of the library's ABI. The Python bindings read the
 * declarations between the cdef markers at load time and hand them to cffi, so that part
 * must stay plain C that cffi can parse: no macros other than integer #defines, no
 * `restrict` (it belongs to the definitions, where it changes nothing in the ABI).
 *
 * Conventions: arrays are contiguous, row-major; `n` counts elements; outputs may not
 * overlap inputs. Reductions accumulate in double over pairwise blocks, so they are at
 * least as accurate as numpy's float32 pairwise summation.
 */
#ifndef GPULAB_KERNELS_H
#define GPULAB_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* gpulab:cdef-begin */
#define GPULAB_KERNELS_ABI_VERSION 1

/* The ABI version the library was built with; compare with GPULAB_KERNELS_ABI_VERSION. */
uint32_t gpulab_kernels_abi_version(void);

/* out[i] = x[i] + y[i] */
void gpulab_add(const float *x, const float *y, float *out, size_t n);
/* out[i] = a * x[i] */
void gpulab_scale(float a, const float *x, float *out, size_t n);
/* out[i] = a * x[i] + y[i] */
void gpulab_saxpy(float a, const float *x, const float *y, float *out, size_t n);

/* Sum of x; 0 when n is 0. */
float gpulab_sum(const float *x, size_t n);
/* Smallest / largest element; NaN if any element is NaN, or when n is 0. */
float gpulab_min(const float *x, size_t n);
float gpulab_max(const float *x, size_t n);
/* Sum of x[i] * y[i]. */
float gpulab_dot(const float *x, const float *y, size_t n);
/* sqrt(sum of x[i]^2), without overflow for any finite float32 input. */
float gpulab_l2_norm(const float *x, size_t n);

/* out (m) = A (m x n) * x (n) */
void gpulab_matvec(const float *a, const float *x, float *out, size_t m, size_t n);
/* c (m x n) = a (m x k) * b (k x n), cache-blocked */
void gpulab_matmul(const float *a, const float *b, float *c, size_t m, size_t k, size_t n);
/* One Jacobi step for A (n x n) x = b: x_next[i] = (b[i] - sum_{j != i} A[i][j] x[j]) / A[i][i].
 * Returns the max-norm of x_next - x. */
float gpulab_jacobi_step(const float *a, const float *b, const float *x, float *x_next, size_t n);
/* gpulab:cdef-end */

#ifdef __cplusplus
}
#endif

#endif /* GPULAB_KERNELS_H */
