#version 450
// C = A B with split-K and staged stores (specialization constant 4); see matmul.glsl.
#extension GL_GOOGLE_include_directive : require
#define MATMUL_SPLIT 1
#include "matmul.glsl"
