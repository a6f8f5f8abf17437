#version 450
// C = A B, register-blocked; see matmul.glsl. The build the host takes by default.
#extension GL_GOOGLE_include_directive : require
#define MATMUL_SPLIT 0
#include "matmul.glsl"
