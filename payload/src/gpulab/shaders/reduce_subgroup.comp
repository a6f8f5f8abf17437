#version 450
// A reduction pass; see reduce.glsl. Subgroup arithmetic within subgroups.
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#define USE_SUBGROUP 1
#include "reduce.glsl"
