#version 450
// A reduction pass; see reduce.glsl. Shared memory only (devices without subgroup arithmetic).
#extension GL_GOOGLE_include_directive : require
#define USE_SUBGROUP 0
#include "reduce.glsl"
