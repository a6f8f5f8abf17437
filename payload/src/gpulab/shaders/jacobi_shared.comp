#version 450
// jacobi, see jacobi.glsl. Shared memory only (devices without subgroup arithmetic).
#extension GL_GOOGLE_include_directive : require
#define USE_SUBGROUP 0
#include "jacobi.glsl"
