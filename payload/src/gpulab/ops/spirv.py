"""What a compute shader's SPIR-V declares, read from the module itself: its local size, its
descriptor bindings, the size of its push-constant block and whether it reads the workgroup
count. A small reader of the SPIR-V
binary form (the words, not a disassembly), enough to check a user kernel against the
binding convention of `"op": "kernel"` nodes (docs/cli.md) before anything runs.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

MAGIC = 0x07230203

# Opcodes (SPIR-V specification, section 3.49).
_OP_ENTRY_POINT = 15
_OP_EXECUTION_MODE = 16
_OP_TYPE_INT = 21
_OP_TYPE_FLOAT = 22
_OP_TYPE_VECTOR = 23
_OP_TYPE_MATRIX = 24
_OP_TYPE_ARRAY = 28
_OP_TYPE_RUNTIME_ARRAY = 29
_OP_TYPE_STRUCT = 30
_OP_TYPE_POINTER = 32
_OP_CONSTANT = 43
_OP_CONSTANT_COMPOSITE = 44
_OP_SPEC_CONSTANT = 50
_OP_SPEC_CONSTANT_COMPOSITE = 51
_OP_VARIABLE = 59
_OP_DECORATE = 71
_OP_MEMBER_DECORATE = 72
_OP_EXECUTION_MODE_ID = 331

_GL_COMPUTE = 5
_LOCAL_SIZE = 17
_LOCAL_SIZE_ID = 38
_ARRAY_STRIDE = 6
_BUFFER_BLOCK = 3
_BUILT_IN = 11
_WORKGROUP_SIZE = 25
_NUM_WORKGROUPS = 24
_BINDING = 33
_DESCRIPTOR_SET = 34
_OFFSET = 35
_UNIFORM = 2
_PUSH_CONSTANT = 9
_STORAGE_BUFFER = 12
_UNIFORM_CONSTANT = 0


class SpirvError(ValueError):
    """The bytes are not a SPIR-V compute shader this reader understands."""


@dataclass(frozen=True)
class Binding:
    """One descriptor binding the shader declares."""

    set: int
    binding: int
    storage: bool
    """A storage buffer (`buffer` in GLSL); else a uniform buffer, image or sampler."""
    element_bytes: int = 4
    """The array stride of the block's unsized array (16 for `vec4 o[]`); 4 without one."""


@dataclass(frozen=True)
class Reflection:
    """What the shader declares."""

    local_size: tuple[int, int, int]
    bindings: tuple[Binding, ...]
    """In (set, binding) order."""
    push_constant_bytes: int
    """The size of the push-constant block (0 when there is none)."""
    reads_workgroup_count: bool = False
    """The shader reads gl_NumWorkGroups: it can index a 2-D grid of workgroups
    (docs/cli.md, "The dispatch")."""

    def floats_per_invocation(self, binding: int) -> int:
        """The floats one invocation writes of the array at `binding`: 4 where the shader
        declares it (or an alias of it) as vec4s, 1 as floats."""
        strides = [b.element_bytes for b in self.bindings if b.binding == binding and b.set == 0]
        return max(1, max(strides, default=4) // 4)


@dataclass
class _Tables:
    """What one pass over the instructions collects."""

    compute: set[int] = field(default_factory=set)
    local: dict[int, tuple[int, ...]] = field(default_factory=dict)
    local_ids: dict[int, tuple[int, ...]] = field(default_factory=dict)
    constants: dict[int, int] = field(default_factory=dict)
    composites: dict[int, tuple[int, ...]] = field(default_factory=dict)
    decorations: dict[int, dict[int, int]] = field(default_factory=dict)
    offsets: dict[int, dict[int, int]] = field(default_factory=dict)
    sizes: dict[int, int] = field(default_factory=dict)
    """A scalar, vector or matrix type's bytes."""
    arrays: dict[int, tuple[int, int]] = field(default_factory=dict)
    """An array type's element type and length constant."""
    runtime_arrays: set[int] = field(default_factory=set)
    structs: dict[int, tuple[int, ...]] = field(default_factory=dict)
    pointers: dict[int, int] = field(default_factory=dict)
    """A pointer type's pointee."""
    variables: list[tuple[int, int, int]] = field(default_factory=list)
    """(id, pointer type, storage class)."""

    def types(self, opcode: int, operands: list[int]) -> None:
        if opcode in (_OP_TYPE_INT, _OP_TYPE_FLOAT):
            self.sizes[operands[0]] = operands[1] // 8
        elif opcode in (_OP_TYPE_VECTOR, _OP_TYPE_MATRIX):
            self.sizes[operands[0]] = self.sizes.get(operands[1], 4) * operands[2]
        elif opcode == _OP_TYPE_ARRAY:
            self.arrays[operands[0]] = (operands[1], operands[2])
        elif opcode == _OP_TYPE_RUNTIME_ARRAY:
            self.runtime_arrays.add(operands[0])
        elif opcode == _OP_TYPE_STRUCT:
            self.structs[operands[0]] = tuple(operands[1:])
        elif opcode == _OP_TYPE_POINTER:
            self.pointers[operands[0]] = operands[2]

    def add(self, opcode: int, operands: list[int]) -> None:
        if opcode == _OP_ENTRY_POINT and operands[0] == _GL_COMPUTE:
            self.compute.add(operands[1])
        elif opcode == _OP_EXECUTION_MODE and operands[1] == _LOCAL_SIZE:
            self.local[operands[0]] = tuple(operands[2:5])
        elif opcode == _OP_EXECUTION_MODE_ID and operands[1] == _LOCAL_SIZE_ID:
            self.local_ids[operands[0]] = tuple(operands[2:5])
        elif opcode in (_OP_CONSTANT, _OP_SPEC_CONSTANT) and len(operands) >= 3:
            self.constants[operands[1]] = operands[2]
        elif opcode in (_OP_CONSTANT_COMPOSITE, _OP_SPEC_CONSTANT_COMPOSITE):
            self.composites[operands[1]] = tuple(operands[2:])
        elif opcode == _OP_VARIABLE:
            self.variables.append((operands[1], operands[0], operands[2]))
        elif opcode == _OP_DECORATE and len(operands) >= 2:
            value = operands[2] if len(operands) > 2 else 1
            self.decorations.setdefault(operands[0], {})[operands[1]] = value
        elif opcode == _OP_MEMBER_DECORATE and operands[2] == _OFFSET:
            self.offsets.setdefault(operands[0], {})[operands[1]] = operands[3]
        else:
            self.types(opcode, operands)

    def local_size(self) -> tuple[int, int, int]:
        if not self.compute:
            raise SpirvError("the module has no GLCompute entry point")
        entry = min(self.compute)
        # A WorkgroupSize built-in (local_size_x_id: specialization constants) overrides
        # LocalSize; the constants' defaults are the size a pipeline without them gets.
        built_in = [i for i, d in self.decorations.items() if d.get(_BUILT_IN) == _WORKGROUP_SIZE]
        if built_in and built_in[0] in self.composites:
            size = tuple(self.constants.get(i, 1) for i in self.composites[built_in[0]])
        elif entry in self.local:
            size = self.local[entry]
        elif entry in self.local_ids:
            size = tuple(self.constants.get(i, 1) for i in self.local_ids[entry])
        else:
            raise SpirvError("the entry point declares no local size")
        x, y, z = (*size, 1, 1, 1)[:3]
        return x, y, z

    def type_bytes(self, type_id: int) -> int:
        if type_id in self.sizes:
            return self.sizes[type_id]
        if type_id in self.arrays:
            element, length = self.arrays[type_id]
            return self.type_bytes(element) * self.constants.get(length, 1)
        if type_id in self.structs:
            placed = self.offsets.get(type_id, {})
            members = enumerate(self.structs[type_id])
            return max((placed.get(i, 0) + self.type_bytes(m) for i, m in members), default=0)
        return 4

    def element_bytes(self, block: int) -> int:
        """The stride of a block's unsized array (its last member), else 4."""
        members = self.structs.get(block, ())
        if members and members[-1] in self.runtime_arrays:
            return self.decorations.get(members[-1], {}).get(_ARRAY_STRIDE, 4)
        return 4

    def bindings_and_push(self) -> tuple[tuple[Binding, ...], int]:
        bindings: list[Binding] = []
        push = 0
        for variable, pointer, storage_class in self.variables:
            pointee = self.pointers.get(pointer, 0)
            if storage_class == _PUSH_CONSTANT:
                push = max(push, self.type_bytes(pointee))
                continue
            decorated = self.decorations.get(variable, {})
            if _BINDING not in decorated:
                continue
            storage = storage_class == _STORAGE_BUFFER or (
                storage_class == _UNIFORM and _BUFFER_BLOCK in self.decorations.get(pointee, {})
            )
            set_number = decorated.get(_DESCRIPTOR_SET, 0)
            element = self.element_bytes(pointee)
            bindings.append(Binding(set_number, decorated[_BINDING], storage, element))
        bindings.sort(key=lambda b: (b.set, b.binding))
        return tuple(bindings), push


def reflect(spirv: bytes) -> Reflection:
    """The local size, bindings and push-constant size of a compute shader's SPIR-V."""
    if len(spirv) < 20 or len(spirv) % 4:
        raise SpirvError("not SPIR-V (too short, or not whole 32-bit words)")
    (magic,) = struct.unpack_from("<I", spirv)
    order = "<" if magic == MAGIC else ">"
    words = list(struct.unpack(f"{order}{len(spirv) // 4}I", spirv))
    if words[0] != MAGIC:
        raise SpirvError("not SPIR-V (no magic number)")
    tables = _Tables()
    at = 5
    while at < len(words):
        count, opcode = words[at] >> 16, words[at] & 0xFFFF
        if count == 0 or at + count > len(words):
            raise SpirvError(f"truncated instruction at word {at}")
        tables.add(opcode, words[at + 1 : at + count])
        at += count
    bindings, push = tables.bindings_and_push()
    counted = any(d.get(_BUILT_IN) == _NUM_WORKGROUPS for d in tables.decorations.values())
    return Reflection(tables.local_size(), bindings, push, counted)
