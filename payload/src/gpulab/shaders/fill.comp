#version 450
// out[i] = value + step * (i % period): zeroing (step 0) and benchmark data.

layout(local_size_x_id = 0) in;

layout(std430, set = 0, binding = 0) writeonly buffer Out { float result[]; };

layout(push_constant) uniform Params {
    uint n;
    float value;
    float step;
    uint period;
};

void main() {
    uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    for (uint i = gl_GlobalInvocationID.x; i < n; i += stride) {
        result[i] = value + step * float(i % period);
    }
}
