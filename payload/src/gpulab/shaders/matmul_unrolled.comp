#version 450
// matmul_split.comp with [[unroll]] on every loop over registers (plan part `unrolled`); see
// matmul.glsl.
#extension GL_GOOGLE_include_directive : require
#define MATMUL_SPLIT 1
#define MATMUL_UNROLL 1
#include "matmul.glsl"
