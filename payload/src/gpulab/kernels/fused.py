"""Fused groups (gpulab.graph.fusion) as one generated compute shader each.

Each step of a group is an op's `Fusion` (gpulab.ops.entry): a GLSL expression over its
inputs, an input being an earlier step (a register), a device array (one element of it), a
device scalar (a buffer read once) or a number (a push constant). An elementwise group is one
grid-stride loop over the elements, vec4 at a time where every binding is 16-byte aligned,
writing the steps that must be kept; a group ending in a reduction is the reduction's first
pass (shaders/reduce.glsl, included with the steps as its term), its combining passes the
packaged shader's. The GLSL is made at recording time and compiled with glslc or
glslangValidator (gpulab.ops.user_kernel.compile_source: cached on disk by content, and here
in memory by source); without a compiler `unavailable()` says why, and the caller records the
steps one by one instead.
"""

from __future__ import annotations

import functools
import hashlib
import re
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import NamedTuple

from gpulab.kernels.array import DeviceArray
from gpulab.ops.entry import Combine, Fusion
from gpulab.ops.user_kernel import cached_spirv, compile_source, compiler
from gpulab.ops.user_kernel import compile_ahead as user_compile_ahead
from gpulab.vk.shader import SHADERS_DIR

Operand = str | DeviceArray | float
"""An earlier step's id (str), a device array or scalar, or a number."""

_ELEMENTWISE_HEADER = 8  # push constants before the numbers: n, vec4_ok
_REDUCE_HEADER = 16  # reduce.glsl's: n, vec4_ok, out_index, finish
_PLACEHOLDER = re.compile(r"\{(\w+)\}")
_ARRAY_READ = re.compile(r"\bb\d+v?\[i\]")
"""An element of an array operand, as _Operands.text writes it."""


class Step(NamedTuple):
    """One node of a fused group."""

    id: str
    fusion: Fusion
    inputs: Mapping[str, Operand]
    out: DeviceArray | None
    """Where its value is written: None keeps it in registers (the anchor's is never None)."""


class Shader(NamedTuple):
    """A fused group's shader and what its dispatch binds and pushes."""

    source: str
    reads: tuple[DeviceArray, ...]
    """The bindings before the written steps: arrays, then device scalars."""
    writes: tuple[DeviceArray, ...]
    numbers: tuple[float, ...]
    """The push constants after the header, in order."""
    reductions: tuple[int, ...]
    """The steps that are reductions, by index: each has partials bound after the writes.
    One is shaders/reduce.glsl's first pass (push: n, vec4_ok, out_index, finish); several
    are this module's own (push: n, vec4_ok, a bit per reduction to take its square root)."""


def unavailable() -> str | None:
    """Why fused shaders cannot be made here (no GLSL compiler), or None."""
    if compiler() is None:
        return "no GLSL compiler (glslc or glslangValidator) on PATH"
    return None


def shaders_dir() -> Path:
    """gpulab's shader sources (reduce.glsl and what it includes)."""
    return SHADERS_DIR


@functools.cache
def _includes_digest() -> str:
    """The sha256 of the included sources: part of the generated text, so that a changed
    reduce.glsl is never served from the compile cache."""
    digest = hashlib.sha256()
    for name in sorted(p.name for p in shaders_dir().glob("*.glsl")):
        digest.update((shaders_dir() / name).read_bytes())
    return digest.hexdigest()[:16]


_compiled: OrderedDict[str, bytes] = OrderedDict()
"""The SPIR-V of the generated shaders met in this process, by source (the last _KEPT)."""
_KEPT = 256


def _remember(source: str, spirv: bytes) -> bytes:
    _compiled[source] = spirv
    _compiled.move_to_end(source)
    while len(_compiled) > _KEPT:
        _compiled.popitem(last=False)
    return spirv


def spirv_of(source: str) -> bytes:
    """The compiled SPIR-V of a generated shader (KernelError when the compiler fails)."""
    spirv = _compiled.get(source)
    if spirv is None:
        spirv = compile_source(source.encode(), "fused.comp", include=shaders_dir())
    return _remember(source, spirv)


def is_compiled(source: str) -> bool:
    """Whether spirv_of(source) will not need the compiler (this process or the cache has it)."""
    if source in _compiled:
        return True
    spirv = cached_spirv(source.encode(), include=shaders_dir())
    if spirv is not None:
        _remember(source, spirv)
    return spirv is not None


def compile_ahead(sources: Sequence[str]) -> None:
    """Compile the generated shaders `sources` together (gpulab.ops.user_kernel.compile_ahead),
    so that spirv_of finds them; one that fails is left to spirv_of, which reports it."""
    compiled = user_compile_ahead([source.encode() for source in sources], include=shaders_dir())
    for source in sources:
        spirv = compiled.get(source.encode())
        if spirv is not None:
            _remember(source, spirv)


def pipeline_key(spirv: bytes) -> str:
    """The pipeline catalog's name of a fused shader (its code's hash)."""
    return "fused-" + hashlib.sha256(spirv).hexdigest()


def push_bytes(numbers: int, reduces: bool) -> int:
    """The push-constant bytes of a group's shader that takes `numbers` numbers."""
    return (_REDUCE_HEADER if reduces else _ELEMENTWISE_HEADER) + 4 * numbers


class _Operands:
    """The names the shader gives each operand, numbered as first met."""

    def __init__(self, steps: Sequence[Step]) -> None:
        self.steps = {step.id: index for index, step in enumerate(steps)}
        self.arrays: dict[tuple[object, ...], int] = {}
        self.array_values: list[DeviceArray] = []
        self.scalars: dict[tuple[object, ...], int] = {}
        self.scalar_values: list[DeviceArray] = []
        self.numbers: dict[tuple[str, str], float] = {}
        """Each number by (step id, input name): one push constant each."""

    def text(self, value: Operand, vector: bool, key: tuple[str, str]) -> str:
        if isinstance(value, str):
            if value not in self.steps:
                raise ValueError(f"fused input {key[1]} of {key[0]} names no step of the group")
            return f"v{self.steps[value]}"
        if isinstance(value, DeviceArray):
            where = value.binding()
            if value.shape == ():
                index = self.scalars.setdefault(where, len(self.scalars))
                if index == len(self.scalar_values):
                    self.scalar_values.append(value)
                return f"c{index}[0]"
            index = self.arrays.setdefault(where, len(self.arrays))
            if index == len(self.array_values):
                self.array_values.append(value)
            return f"b{index}{'v' if vector else ''}[i]"
        self.numbers.setdefault(key, float(value))
        return f"s{list(self.numbers).index(key)}"


def _substitute(expression: str, names: Mapping[str, str]) -> str:
    """`expression` with each `{name}` replaced by names[name]."""
    return _PLACEHOLDER.sub(lambda found: names[found[1]], expression)


def _body(steps: Sequence[Step], operands: _Operands, vector: bool) -> list[str]:
    """The statements of one element (or vec4): every array element it reads loaded first
    (`ek`), then each step's value (step k's is `vk`), the kept ones written. Loads before
    stores: a kept step may be written over an array the group reads (the Vulkan backend
    writes a result in place of an input no later node reads), element by element."""
    kind = "vec4" if vector else "float"
    steps_lines = []
    written = 0
    for index, step in enumerate(steps):
        names = {
            name: f"({operands.text(value, vector, (step.id, name))})"
            for name, value in step.inputs.items()
        }
        expression = _substitute(step.fusion.expression, names)
        steps_lines.append(f"{kind} v{index} = {expression};")
        if step.out is not None and not step.fusion.reduces:
            steps_lines.append(f"w{written}{'v' if vector else ''}[i] = v{index};")
            written += 1
    reads = list(dict.fromkeys(_ARRAY_READ.findall(" ".join(steps_lines))))
    loads = [f"{kind} e{k} = {read};" for k, read in enumerate(reads)]
    registers = {read: f"e{k}" for k, read in enumerate(reads)}
    return [*loads, *(_ARRAY_READ.sub(lambda m: registers[m[0]], line) for line in steps_lines)]


def _buffers(operands: _Operands, written: int) -> list[str]:
    lines = []
    binding = 0
    for index in range(len(operands.array_values)):
        for suffix, kind in (("", "float"), ("v", "vec4")):
            lines.append(
                f"layout(std430, set = 0, binding = {binding}) readonly buffer B{index}{suffix} "
                f"{{ {kind} b{index}{suffix}[]; }};"
            )
        binding += 1
    for index in range(len(operands.scalar_values)):
        lines.append(
            f"layout(std430, set = 0, binding = {binding}) readonly buffer C{index} "
            f"{{ float c{index}[]; }};"
        )
        binding += 1
    for index in range(written):
        for suffix, kind in (("", "float"), ("v", "vec4")):
            lines.append(
                f"layout(std430, set = 0, binding = {binding}) writeonly buffer W{index}{suffix} "
                f"{{ {kind} w{index}{suffix}[]; }};"
            )
        binding += 1
    return lines


def shader(steps: Sequence[Step], subgroups: bool) -> Shader:
    """The generated shader of a group (the last step is the anchor)."""
    operands = _Operands(steps)
    vec4_lines = _body(steps, operands, True)
    float_lines = _body(steps, operands, False)
    numbers = tuple(operands.numbers.values())
    writes = tuple(step.out for step in steps if step.out is not None and not step.fusion.reduces)
    reductions = tuple(index for index, step in enumerate(steps) if step.fusion.reduces)
    params = "".join(f" float s{index};" for index in range(len(numbers)))
    ops = " -> ".join(_PLACEHOLDER.sub("_", step.fusion.expression) for step in steps)
    head = [
        "#version 450",
        f"// gpulab.kernels.fused: {ops} (includes {_includes_digest()})",
        "#extension GL_GOOGLE_include_directive : require",
    ]
    buffers = _buffers(operands, len(writes))
    first_partial = _count(operands) + len(writes)
    if len(reductions) == 1:
        result = f"v{reductions[0]}"
        term4 = " ".join(vec4_lines) + f" return {result};"
        term = " ".join(float_lines) + f" return {result};"
        lines = [
            *head,
            *(["#extension GL_KHR_shader_subgroup_arithmetic : require"] if subgroups else []),
            f"#define USE_SUBGROUP {int(subgroups)}",
            *buffers,
            f"layout(std430, set = 0, binding = {first_partial}) buffer Out "
            "{ float partial[]; };",
            *([f"#define FUSED_PARAMS{params}"] if numbers else []),
            f"#define FUSED_TERMS vec4 term4(uint i) {{ {term4} }} float term(uint i) {{ {term} }}",
            '#include "reduce.glsl"',
        ]
    elif reductions:
        combines = [steps[index].fusion.combine for index in reductions]
        lines = [
            *head,
            '#include "float_bits.glsl"',
            "layout(local_size_x_id = 0) in;",
            *buffers,
            *(
                f"layout(std430, set = 0, binding = {first_partial + k}) writeonly buffer P{k} "
                f"{{ float p{k}[]; }};"
                for k in range(len(reductions))
            ),
            "layout(push_constant) uniform Params "
            f"{{ uint n; uint vec4_ok; uint finish;{params} }};",
            *_group_reductions(sorted({c for c in combines if c is not None})),
            *_many_main(reductions, combines, vec4_lines, float_lines),
        ]
    else:
        lines = [
            *head,
            "layout(local_size_x_id = 0) in;",
            *buffers,
            f"layout(push_constant) uniform Params {{ uint n; uint vec4_ok;{params} }};",
            "void main() {",
            "    uint gid = gl_GlobalInvocationID.x;",
            "    uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;",
            "    uint first_scalar = 0;",
            *_stride_loops(vec4_lines, float_lines),
            "}",
        ]
    reads = (*operands.array_values, *operands.scalar_values)
    return Shader("\n".join(lines) + "\n", reads, writes, numbers, reductions)


# Per combine (gpulab.ops.entry.Combine, by value): identity, accumulate, fold of a vec4, and
# the NaN-propagating combine of two partials (min and max: as shaders/reduce.glsl, a NaN
# anywhere gives NaN, tracked by the largest magnitude bits).
_IDENTITY = ("0.0", "infinity()", "-infinity()")
_ACCUMULATE = ("{a} + {v}", "min({a}, {v})", "max({a}, {v})")
_FOLD = (
    "({a}.x + {a}.y) + ({a}.z + {a}.w)",
    "min(min({a}.x, {a}.y), min({a}.z, {a}.w))",
    "max(max({a}.x, {a}.y), max({a}.z, {a}.w))",
)
_COMBINE = (
    "return a + b;",
    "return (is_nan(a) || is_nan(b)) ? quiet_nan() : min(a, b);",
    "return (is_nan(a) || is_nan(b)) ? quiet_nan() : max(a, b);",
)


def _group_reductions(combines: Sequence[Combine]) -> list[str]:
    """A shared-memory workgroup reduction per combine used (as shaders/group_reduce.glsl,
    one float per invocation, the result valid in every invocation)."""
    lines = ["shared float partials[gl_WorkGroupSize.x];"]
    for combine in combines:
        code = int(combine)
        lines += [
            f"float combine{code}(float a, float b) {{ {_COMBINE[code]} }}",
            f"float group_reduce{code}(float value) {{",
            "    uint lid = gl_LocalInvocationID.x;",
            "    uint count = gl_WorkGroupSize.x;",
            "    partials[lid] = value;",
            "    memoryBarrierShared();",
            "    barrier();",
            "    uint width = 1;",
            "    while (width < count) { width <<= 1; }",
            "    for (uint half_width = width >> 1; half_width > 0; half_width >>= 1) {",
            "        if (lid < half_width && lid + half_width < count) {",
            "            partials[lid] = "
            f"combine{code}(partials[lid], partials[lid + half_width]);",
            "        }",
            "        memoryBarrierShared();",
            "        barrier();",
            "    }",
            "    float total = partials[0];",
            "    barrier();",
            "    return total;",
            "}",
        ]
    return lines


def _stride_loops(vec4_lines: Sequence[str], float_lines: Sequence[str]) -> list[str]:
    """main()'s grid-stride loops (as shaders/elementwise.comp's): `vec4_lines` over whole
    vec4s when the host says the bindings allow it, then `float_lines` over the rest."""
    return [
        "    if (vec4_ok != 0) {",
        "        uint n4 = n / 4;",
        "        for (uint i = gid; i < n4; i += stride) {",
        *(f"            {line}" for line in vec4_lines),
        "        }",
        "        first_scalar = 4 * n4;",
        "    }",
        "    for (uint i = first_scalar + gid; i < n; i += stride) {",
        *(f"        {line}" for line in float_lines),
        "    }",
    ]


def _many_main(
    reductions: Sequence[int],
    combines: Sequence[Combine | None],
    vec4_lines: Sequence[str],
    float_lines: Sequence[str],
) -> list[str]:
    """main() of a group with several reductions: each invocation accumulates every one over
    its grid-stride share, then each is reduced over the workgroup into its partials."""
    codes = [int(c) if c is not None else 0 for c in combines]
    extreme = [code != 0 for code in codes]
    lines = [
        "void main() {",
        "    uint gid = gl_GlobalInvocationID.x;",
        "    uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;",
        "    uint first_scalar = 0;",
    ]
    for k, code in enumerate(codes):
        lines.append(f"    vec4 a{k} = vec4({_IDENTITY[code]});")
        lines.append(f"    uvec4 m{k} = uvec4(0u);")
    step_vec4 = []
    step_float = []
    for k, (index, code) in enumerate(zip(reductions, codes, strict=True)):
        step_vec4.append(f"a{k} = {_ACCUMULATE[code].format(a=f'a{k}', v=f'v{index}')};")
        step_float.append(f"a{k}.x = {_ACCUMULATE[code].format(a=f'a{k}.x', v=f'v{index}')};")
        if extreme[k]:
            step_vec4.append(f"m{k} = max(m{k}, magnitude_bits(v{index}));")
            step_float.append(f"m{k}.x = max(m{k}.x, magnitude_bits(v{index}));")
    lines += _stride_loops([*vec4_lines, *step_vec4], [*float_lines, *step_float])
    for k, code in enumerate(codes):
        lines.append(f"    float r{k} = {_FOLD[code].format(a=f'a{k}')};")
        if extreme[k]:
            lines.append(
                f"    if (is_nan_magnitude(max(max(m{k}.x, m{k}.y), max(m{k}.z, m{k}.w)))) "
                f"{{ r{k} = quiet_nan(); }}"
            )
        lines.append(f"    r{k} = group_reduce{code}(r{k});")
        lines.append(
            f"    if (gl_LocalInvocationID.x == 0) {{ p{k}[gl_WorkGroupID.x] = "
            f"(finish & {1 << k}u) != 0u ? sqrt(r{k}) : r{k}; }}"
        )
    lines.append("}")
    return lines


def _count(operands: _Operands) -> int:
    return len(operands.array_values) + len(operands.scalar_values)
