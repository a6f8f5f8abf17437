// Sums over a workgroup, for the row kernels (matvec.glsl, jacobi.glsl).

float combine(float a, float b) {
    return a + b;
}

#if USE_SUBGROUP
float subgroup_combine(float v) {
    return subgroupAdd(v);
}
#endif

#include "group_reduce.glsl"
