#version 450
// matmul.comp with [[unroll]] on the k loop's loops over registers and panels two at a time
// (plan part `unrolled` without split, staged or wide); see matmul.glsl.
#extension GL_GOOGLE_include_directive : require
#define MATMUL_UNROLL 1
#include "matmul.glsl"
