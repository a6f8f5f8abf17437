// Workgroup reduction of one float per invocation, included by the reduction shaders.
// The includer defines USE_SUBGROUP (1: subgroup arithmetic, then shared memory across
// subgroups; 0: shared memory only) and the functions combine(float, float) (NaN-propagating)
// and subgroup_combine(float). The result is valid in every invocation after the call.

shared float partials[gl_WorkGroupSize.x];

float group_reduce(float value) {
    uint lid = gl_LocalInvocationID.x;
#if USE_SUBGROUP
    float reduced = subgroup_combine(value);
    if (subgroupElect()) {
        partials[gl_SubgroupID] = reduced;
    }
    uint count = gl_NumSubgroups;
#else
    partials[lid] = value;
    uint count = gl_WorkGroupSize.x;
#endif
    memoryBarrierShared();
    barrier();
    uint width = 1;
    while (width < count) {
        width <<= 1;
    }
    for (uint half_width = width >> 1; half_width > 0; half_width >>= 1) {
        if (lid < half_width && lid + half_width < count) {
            partials[lid] = combine(partials[lid], partials[lid + half_width]);
        }
        memoryBarrierShared();
        barrier();
    }
    float total = partials[0];
    barrier();  // the caller may reduce again with the same shared array
    return total;
}
