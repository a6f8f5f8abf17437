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
Other reductions of the group's members scheduled before the anchor join too (they wait
for it), so that two reductions of one chain read it once. A member is written to memory
only when something besides the group reads it, or when it
must be kept (`kept`: graph outputs, values another backend reads); otherwise it lives in
registers only. A group of one node is no group: that node runs as it always does.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass

from gpulab.graph.model import Node, Ref
from gpulab.ops.entry import Fusion
from gpulab.ops.registry import find

_PLACEHOLDER = re.compile(r"\{(\w+)\}")
"""An input named in a Fusion expression."""
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
    reused: tuple[tuple[str, str, str], ...] = ()
    """(member, prepared scalar, node): a prepared scalar (normalize's norm) that a node
    recorded before the group already computes (an l2_norm of the same input), read from that
    node's value instead of a pass of its own; that value is kept to the end of the run."""

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


def _bindings(members: Collection[Node], written: Collection[str]) -> int:
    """Storage buffers of the group's shader: arrays read, members written (a reduction's
    partials among them), prepared scalars."""
    ids = {node.id for node in members}
    prepared = sum(len(fusion.prepared) for node in members if (fusion := fusion_of(node)))
    read = {
        arg.name
        for node in members
        for arg in node.inputs.given
        if isinstance(arg, Ref) and arg.name not in ids
    }
    return len(read) + len(written) + prepared


@dataclass(frozen=True)
class _Segment:
    """What the planner knows of the nodes: order, readers, what must be kept."""

    position: dict[str, int]
    by_id: dict[str, Node]
    readers: dict[str, list[str]]
    kept: Collection[str]
    most_bindings: int
    fusions: dict[str, Fusion | None]
    """Each node's Fusion, looked up once."""
    refs: dict[str, tuple[str, ...]]
    """Each node's references, made once."""

    def prepares(self, node_id: str) -> bool:
        fusion = self.fusions[node_id]
        return fusion is not None and bool(fusion.prepared)

    def fits(self, members: Collection[Node], anchor: Node) -> bool:
        written = _written(members, self.readers, self.kept, anchor)
        return _bindings(members, written) <= self.most_bindings

    def early_readers(self, node_id: str, members: Collection[str], anchor: Node) -> bool:
        """Whether a reader of `node_id` outside `members` runs before `anchor`."""
        at = self.position[anchor.id]
        return any(self.position[r] < at for r in self.readers[node_id] if r not in members)

    def may_join(
        self, node: Node, members: dict[str, Node], elements: tuple[int, ...], reduces: bool
    ) -> bool:
        """Whether `node` may join a group of `members` as a producer (`reduces` False) or as
        a sibling reduction: its kind, its element count, and the prepared scalars' rule."""
        joining = self.fusions[node.id]
        if joining is None or joining.reduces != reduces:
            return False
        shape = _elements(node, self.by_id) if reduces else node.shape
        if shape != elements:
            return False
        refs = self.refs[node.id]
        if joining.prepared and any(r in members for r in refs):
            return False
        if any(self.prepares(r) for r in self.readers[node.id] if r in members):
            return False
        # A reduction's value exists only after the group's pass: no member reads one.
        if reduces:
            return not any(r in members for r in self.readers[node.id])
        return not any(r in members and members[r].shape == () for r in refs)


def plan(
    nodes: Sequence[Node], kept: Collection[str], most_bindings: int = MOST_BINDINGS
) -> tuple[FusedGroup, ...]:
    """The fused groups of `nodes` (in schedule order), in the order their anchors run."""
    readers: dict[str, list[str]] = {node.id: [] for node in nodes}
    for node in nodes:
        for name in dict.fromkeys(node.references):
            if name in readers:
                readers[name].append(node.id)
    fusions = {node.id: fusion_of(node) for node in nodes}
    if not any(fusions.values()):
        return ()
    segment = _Segment(
        {node.id: index for index, node in enumerate(nodes)},
        {node.id: node for node in nodes},
        readers,
        kept,
        most_bindings,
        fusions,
        {node.id: node.references for node in nodes},
    )
    # Siblings only where two reductions could share a pass.
    siblings = sum(1 for f in fusions.values() if f is not None and f.reduces) > 1
    assigned: set[str] = set()
    groups: list[FusedGroup] = []
    for anchor in reversed(nodes):
        if anchor.id in assigned or fusions[anchor.id] is None:
            continue
        members = _greedy(anchor, segment, assigned)
        wider = _with_siblings(anchor, segment, assigned) if siblings else None
        if wider is not None and len(wider) > len(members):
            members = wider
        if len(members) < 2:
            continue
        ordered = tuple(sorted(members.values(), key=lambda node: segment.position[node.id]))
        written = _written(ordered, readers, kept, anchor)
        groups.append(FusedGroup(ordered, frozenset(written)))
        assigned.update(members)
    groups.sort(key=lambda group: segment.position[group.anchor.id])
    return tuple(_with_reuse(group, groups, segment) for group in groups)


def _with_reuse(group: FusedGroup, groups: Sequence[FusedGroup], segment: _Segment) -> FusedGroup:
    """`group` with the prepared scalars that earlier nodes already compute (FusedGroup.reused):
    a node with the prepared reduction's own Fusion over the same inputs, recorded before the
    group (not in it, and not in a group recorded later)."""
    anchor_at = segment.position[group.anchor.id]
    recorded_at = {node_id: segment.position[g.anchor.id] for g in groups for node_id in g.ids}
    reused = []
    for member in group.nodes:
        fusion = segment.fusions[member.id]
        for name, prepared in fusion.prepared if fusion is not None else ():
            names = set(_PLACEHOLDER.findall(prepared.expression))
            wanted = {key: member.inputs[key] for key in names}
            for other in segment.by_id.values():
                at = recorded_at.get(other.id, segment.position[other.id])
                if (
                    segment.fusions[other.id] == prepared
                    and at < anchor_at
                    and other.id not in group.ids
                    and {key: other.inputs[key] for key in names} == wanted
                ):
                    reused.append((member.id, name, other.id))
                    break
    return FusedGroup(group.nodes, group.written, tuple(reused)) if reused else group


def _greedy(anchor: Node, segment: _Segment, assigned: Collection[str]) -> dict[str, Node]:
    """The anchor and the producers that may join it, one at a time, each checked as it
    joins."""
    elements = _elements(anchor, segment.by_id)
    members = {anchor.id: anchor}
    frontier = [anchor]
    while frontier:
        member = frontier.pop()
        if segment.prepares(member.id):
            continue  # its inputs are read from memory by its prepared reductions
        for name in segment.refs[member.id]:
            producer = segment.by_id.get(name)
            if producer is None or producer.id in members or producer.id in assigned:
                continue
            if not segment.may_join(producer, members, elements, reduces=False):
                continue
            if segment.early_readers(producer.id, members, anchor):
                continue
            trial = {**members, producer.id: producer}
            if not segment.fits(trial.values(), anchor):
                continue
            members = trial
            frontier.append(producer)
    return members


def _with_siblings(
    anchor: Node, segment: _Segment, assigned: Collection[str]
) -> dict[str, Node] | None:
    """The anchor, its producers and the other reductions of them (scheduled before the
    anchor, they wait for it), all at once, less every node read early (before the anchor)
    until none is; None when that is beyond the binding budget. Two reductions of one chain
    then read it once (the greedy walk cannot take a chain that another reduction reads
    before the anchor)."""
    elements = _elements(anchor, segment.by_id)
    members = {anchor.id: anchor}
    frontier = [anchor]
    while frontier:
        member = frontier.pop()
        producers = () if segment.prepares(member.id) else segment.refs[member.id]
        for name in producers:
            producer = segment.by_id.get(name)
            if producer is None or producer.id in members or producer.id in assigned:
                continue
            if segment.may_join(producer, members, elements, reduces=False):
                members[producer.id] = producer
                frontier.append(producer)
        for reader in segment.readers[member.id]:
            if reader in members or reader in assigned:
                continue
            if segment.position[reader] > segment.position[anchor.id]:
                continue
            node = segment.by_id[reader]
            if segment.may_join(node, members, elements, reduces=True):
                members[reader] = node
                frontier.append(node)
    early = [anchor.id]
    while early:
        early = [
            node_id
            for node_id in members
            if node_id != anchor.id and segment.early_readers(node_id, members, anchor)
        ]
        for node_id in early:
            del members[node_id]
    if not segment.fits(members.values(), anchor):
        return None
    return members


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
        if node.id == anchor.id
        or node.id in kept
        or node.shape == ()  # a reduction's value: written where its partials end
        or any(r not in ids for r in readers[node.id])
    }
