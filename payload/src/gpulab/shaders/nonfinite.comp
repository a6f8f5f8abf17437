#version 450
// The index of the first element of a float32 array that is NaN or infinite: each invocation
// stops at the first it finds in its strided share, and the smallest of those goes into
// `first` by atomicMin (the caller sets it to 0xFFFFFFFF before). Tested by its bits (an
// all-ones exponent), so that no compiler's assumptions about floats can take the test away.

layout(local_size_x_id = 0) in;

layout(std430, set = 0, binding = 0) readonly buffer Values { uint values[]; };
layout(std430, set = 0, binding = 1) buffer First { uint first; };

layout(push_constant) uniform Params {
    uint n;
    uint base;  // the index of values[0] in the whole array (a binding holds part of it)
};

const uint EXPONENT = 0x7f800000u;
const uint NONE = 0xFFFFFFFFu;

void main() {
    uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    uint found = NONE;
    for (uint i = gl_GlobalInvocationID.x; i < n; i += stride) {
        if ((values[i] & EXPONENT) == EXPONENT) {
            found = base + i;
            break;
        }
    }
    if (found != NONE) {
        atomicMin(first, found);
    }
}
