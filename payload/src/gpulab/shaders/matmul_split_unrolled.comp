#version 450
// matmul_split.comp with [[unroll]] on every loop over registers and panels two at a time
// (plan part `unrolled` with split, staged or wide); see matmul.glsl.
#extension GL_GOOGLE_include_directive : require
#define MATMUL_SPLIT 1
#define MATMUL_UNROLL 1
#include "matmul.glsl"
