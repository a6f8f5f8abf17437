"""Which nodes run together as one dispatch: the fusion plan of a run of scheduled nodes.

Pure graph analysis over the op entries' `fusion` descriptions (gpulab.ops.entry.Fusion): a
group is an *anchor* (an elementwise op, or a reduction) and the elementwise nodes that feed
it, directly or through each other. gpulab.kernels.fused makes the group's shader; the Vulkan
backend records it where the anchor is scheduled.

A producer joins its consumer's group when
- its op is elementwise (a reduction's scalar only ever anchors a group),
- it has the anchor's element count,
- it is in the same run of nodes and not in another group,
- every reader outside the group is scheduled after the anchor (the group's values exist
  only once the anchor's dispatch ran; this also keeps the groups free of cycles), and
- the group stays within `most_bindings` storage buffers, and
- no member with prepared scalars (Fusion.prepared: normalize's norm) reads it: those read
  their inputs from memory, in a pass before the group's.
A member is written to memory only when something besides the group reads it, or when it
must be kept (`kept`: graph outputs, values another backend reads); otherwise it lives in
registers only. A group of one node is no group: that node runs as it always does.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

from gpulab.graph.model import Node, Ref
from gpulab.ops.entry import Fusion
from gpulab.ops.registry import find

MOST_BINDINGS = 8
"""Storage buffers one fused shader may bind (arrays read, members written, the partials);
Vulkan guarantees only 4 per stage, and every device gpulab targets has far more."""


@dataclass(frozen=True)
class FusedGroup:
    """Nodes recorded as one dispatch (a reduction's further combining passes aside)."""

    nodes: tuple[Node, ...]
    """The members in schedule order; the last is the anchor."""
    written: frozenset[str]
    """The members whose values go to memory (the anchor always does)."""

    @property
    def anchor(self) -> Node:
        return self.nodes[-1]

    @property
    def ids(self) -> tuple[str, ...]:
        return tuple(node.id for node in self.nodes)


def fusion_of(node: Node) -> Fusion | None:
    """How `node`'s op fuses (its entry's description), or None."""
    found = find(node.op)
    return found.fusion if found is not None else None


def _prepares(node: Node) -> bool:
    """Whether `node`'s op computes scalars of its inputs first (Fusion.prepared)."""
    fusion = fusion_of(node)
    return fusion is not None and bool(fusion.prepared)


def _bindings(members: Collection[Node], written: Collection[str], reduces: bool) -> int:
    ids = {node.id for node in members}
    prepared = sum(len(fusion.prepared) for node in members if (fusion := fusion_of(node)))
    read = {
        arg.name
        for node in members
        for arg in node.inputs.given
        if isinstance(arg, Ref) and arg.name not in ids
    }
    return len(read) + len(written) + prepared + (1 if reduces else 0)


def plan(
    nodes: Sequence[Node], kept: Collection[str], most_bindings: int = MOST_BINDINGS
) -> tuple[FusedGroup, ...]:
    """The fused groups of `nodes` (in schedule order), in the order their anchors run."""
    position = {node.id: index for index, node in enumerate(nodes)}
    by_id = {node.id: node for node in nodes}
    readers: dict[str, list[str]] = {node.id: [] for node in nodes}
    for node in nodes:
        for name in dict.fromkeys(node.references):
            if name in readers:
                readers[name].append(node.id)
    assigned: set[str] = set()
    groups: list[FusedGroup] = []
    for anchor in reversed(nodes):
        fusion = fusion_of(anchor)
        if anchor.id in assigned or fusion is None:
            continue
        elements = _elements(anchor, by_id)
        members = {anchor.id: anchor}
        frontier = [anchor]
        while frontier:
            member = frontier.pop()
            if _prepares(member):
                continue  # its inputs are read from memory by its prepared reductions
            for name in member.references:
                producer = by_id.get(name)
                if producer is None or producer.id in members or producer.id in assigned:
                    continue
                joining = fusion_of(producer)
                if joining is None or joining.reduces or producer.shape != elements:
                    continue
                if joining.prepared and any(r in members for r in producer.references):
                    continue
                if any(_prepares(members[r]) for r in readers[producer.id] if r in members):
                    continue
                outside = [r for r in readers[producer.id] if r not in members]
                if any(position[r] < position[anchor.id] for r in outside):
                    continue
                trial = {**members, producer.id: producer}
                written = _written(trial.values(), readers, kept, anchor)
                if _bindings(trial.values(), written, fusion.reduces) > most_bindings:
                    continue
                members = trial
                frontier.append(producer)
        if len(members) < 2:
            continue
        ordered = tuple(sorted(members.values(), key=lambda node: position[node.id]))
        written = _written(ordered, readers, kept, anchor)
        groups.append(FusedGroup(ordered, frozenset(written)))
        assigned.update(members)
    groups.sort(key=lambda group: position[group.anchor.id])
    return tuple(groups)


def _elements(anchor: Node, by_id: dict[str, Node]) -> tuple[int, ...]:
    """The shape of the elements the group runs over: the anchor's own for an elementwise op,
    its vector inputs' for a reduction (found among them: a node's, else the result's)."""
    if anchor.shape != ():
        return anchor.shape
    for name in anchor.references:
        if name in by_id and by_id[name].shape != ():
            return by_id[name].shape
    return ()


def _written(
    members: Collection[Node], readers: dict[str, list[str]], kept: Collection[str], anchor: Node
) -> set[str]:
    ids = {node.id for node in members}
    return {
        node.id
        for node in members
        if node.id == anchor.id or node.id in kept or any(r not in ids for r in readers[node.id])
    }
