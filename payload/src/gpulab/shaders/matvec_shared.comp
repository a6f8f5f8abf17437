#version 450
// matvec, see matvec.glsl. Shared memory only (devices without subgroup arithmetic).
#extension GL_GOOGLE_include_directive : require
#define USE_SUBGROUP 0
#include "matvec.glsl"
