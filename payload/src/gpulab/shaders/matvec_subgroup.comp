#version 450
// matvec, see matvec.glsl. Subgroup arithmetic within subgroups.
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#define USE_SUBGROUP 1
#include "matvec.glsl"
