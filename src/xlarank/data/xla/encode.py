"""An HLO module as the official converter encodes it: node features, opcodes, edges,
computation splits.

This follows tpu_graphs/process_data/xla (hlo_encoder.cc, featurizers.h, hlo_opcode.h) for
the ``module_layout_cost`` and ``op_window_cost`` tasks, whose 140 node features are the
same:

- Nodes are every instruction of every computation, in the module's order of
  computations and each computation's order of instructions: fused, called, while-body
  and condition computations are flattened into the one graph, nothing is inlined.
- Each instruction has an edge to each distinct operand and to the root of each
  computation it calls (a fusion to its fused root, a while loop to its body's and
  condition's roots). Edges are sorted by (user, operand) node index.
- ``node_splits`` closes a computation span after each computation whose name holds
  "cluster", "while" or "cond", and at the end.
- Features are whole numbers computed in int64 (sums and products wrap as in C++) and
  stored as float32; slots past a list's length are 0, and the product of an empty list
  is 1.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np

from xlarank.data.xla.messages import Message, decode
from xlarank.data.xla.opcodes import UNKNOWN_OPCODE, opcode_id
from xlarank.data.xla.wire import WireError
from xlarank.errors import XlarankWarning
from xlarank.kernels.graph import cycle_edge

N_NODE_FEATURES = 140
# xla_data.proto's PrimitiveType numbers, in the order of node_feat columns 2-20. A type
# XLA added later (fp8, s4, ...) matches none, as in the converter: all 19 columns are 0.
PRIMITIVE_TYPES = (0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 16, 15, 18, 13, 14, 17)
SPLIT_MARKERS = ("cluster", "while", "cond")
_INT64 = 1 << 64


def _wrap(value: int) -> int:
    value %= _INT64
    return value - _INT64 if value >= 1 << 63 else value


def _leading(out: list, values: list, count: int) -> None:
    out.extend(values[:count])
    out.extend([0] * (count - len(values[:count])))


def _sequence(out: list, values: list, count: int, zero_product_on_empty: bool = False) -> None:
    """``count`` leading values, their sum and their product (FixedNumericSequenceFeatures)."""
    _leading(out, values, count)
    total, product = 0, 1
    for v in values:
        total = _wrap(total + v)
        product = _wrap(product * v)
    out.append(total)
    out.append(0 if zero_product_on_empty and not values else product)


def _bools(out: list, values: list, count: int) -> None:
    """``count`` leading flags, then how many are true and how many false."""
    _leading(out, [int(v) for v in values], count)
    positives = sum(1 for v in values if v)
    out.append(positives)
    out.append(len(values) - positives)


def instruction_features(inst: Message, root_id: int) -> list[int]:
    """The 140 node features of one instruction (FORMAT.md, "Node features"), as ints."""
    out: list[int] = [int(inst.get("id") == root_id), 0]
    shape = inst.get("shape")
    element_type = shape.get("element_type")
    out.extend(int(element_type == t) for t in PRIMITIVE_TYPES)
    _sequence(out, shape.get("dimensions"), 6)
    out.append(len(shape.get("tuple_shapes")))
    out.append(inst.get("parameter_number"))
    _leading(out, inst.get("dimensions"), 6)
    window = inst.get("window").get("dimensions")
    for name in ("size", "stride", "padding_low", "padding_high", "window_dilation",
                 "base_dilation"):
        _sequence(out, [d.get(name) for d in window], 6)
    _bools(out, [d.get("window_reversal") for d in window], 6)
    conv = inst.get("convolution_dimension_numbers")
    out.append(conv.get("input_batch_dimension"))
    out.append(conv.get("input_feature_dimension"))
    _leading(out, conv.get("input_spatial_dimensions"), 4)
    out.append(conv.get("kernel_input_feature_dimension"))
    out.append(conv.get("kernel_output_feature_dimension"))
    _leading(out, conv.get("kernel_spatial_dimensions"), 4)
    out.append(conv.get("output_batch_dimension"))
    out.append(conv.get("output_feature_dimension"))
    out.append(inst.get("feature_group_count"))
    out.append(inst.get("batch_group_count"))
    slices = inst.get("slice_dimensions")
    for name in ("start", "stride", "limit"):
        _sequence(out, [s.get(name) for s in slices], 2)
    _sequence(out, inst.get("dynamic_slice_sizes"), 2)
    padding = inst.get("padding_config").get("dimensions")
    for name in ("edge_padding_low", "edge_padding_high"):
        _sequence(out, [d.get(name) for d in padding], 2)
    out.append(int(inst.get("is_stable")))
    _leading(out, shape.get("layout").get("minor_to_major"), 6)
    return out


def tile_config_features(tile_size_config: Message) -> list[int]:
    """The 24 ``config_feat`` values of one tile config: kernel, output and input bounds,
    each 6 leading values, sum and product (0 for an empty list)."""
    out: list[int] = []
    for name in ("kernel_bounds", "output_bounds", "input_bounds"):
        _sequence(out, tile_size_config.get(name), 6, zero_product_on_empty=True)
    return out


@dataclass(frozen=True)
class EncodedModule:
    """node_feat float32 (n, 140); node_opcode uint8 (n,); edge_index int64 (m, 2), row
    [u, v] meaning node u consumes v; node_splits int64 (k,), first node of each span then n;
    unknown_opcodes: names that got id 0."""

    name: str
    node_feat: np.ndarray
    node_opcode: np.ndarray
    edge_index: np.ndarray
    node_splits: np.ndarray
    unknown_opcodes: tuple[str, ...]
    # For choosing configurable nodes and their candidate layouts: each node's rank, its
    # first two operands in operand order (-1 if fewer), and whether it lies in a fused
    # computation (one called by a fusion instruction).
    node_rank: np.ndarray
    node_operands: np.ndarray
    node_fused: np.ndarray
    # Each node's OpMetadata.op_name ("jit(f)/scope/dot_general"): the JAX scopes it came
    # from, which `xlarank.measure` tags its configurable nodes with.
    node_op_name: tuple[str, ...] = ()


class ModuleError(ValueError):
    """A module whose instructions do not hold together; the reader names the file."""


def encode_module(buf: memoryview, span: tuple[int, int] | None) -> EncodedModule:
    """Encode the HloModuleProto at ``buf[span]`` as the official converter does.

    Instructions are featurized as they are decoded and then dropped, so memory grows with
    the output arrays, not with the module's Python objects.
    """
    module = decode(buf, "HloModuleProto", span)
    computations = module.get("computations")
    if not computations:
        raise ModuleError("the module has no computations")
    rows: list[np.ndarray] = []
    opcodes: list[int] = []
    operands: list[list[int]] = []
    called: list[list[int]] = []
    ids: list[int] = []
    roots: dict[int, int] = {}
    splits = [0]
    unknown: dict[str, None] = {}
    names = []
    ranks: list[int] = []
    first_operands: list[list[int]] = []
    node_comp: list[int] = []
    op_names: list[str] = []
    fused_comps: set[int] = set()
    calls: dict[int, set[int]] = {}
    for comp_span in computations:
        comp = _decode_computation(buf, comp_span)
        names.append(comp.get("name"))
        if comp.get("id") in roots:
            raise ModuleError(f"computation id {comp.get('id')} is used twice")
        root_id = comp.get("root_id")
        own = len(ids)
        calls[comp.get("id")] = set()
        for inst_span in comp.get("instructions"):
            inst = decode(buf, "HloInstructionProto", inst_span)
            opcode = inst.get("opcode")
            code = opcode_id(opcode)
            if code == UNKNOWN_OPCODE:
                unknown[opcode] = None
            opcodes.append(code)
            rows.append(np.array(instruction_features(inst, root_id), dtype=np.int64))
            ids.append(inst.get("id"))
            operands.append(sorted(set(inst.get("operand_ids"))))
            called.append(list(inst.get("called_computation_ids")))
            ranks.append(len(inst.get("shape").get("dimensions")))
            first_operands.append((list(inst.get("operand_ids")) + [None, None])[:2])
            node_comp.append(comp.get("id"))
            op_names.append(inst.get("metadata").get("op_name"))
            calls[comp.get("id")].update(called[-1])
            if opcode == "fusion":
                fused_comps.update(called[-1])
        # A root outside the computation would tie it to another one's nodes; an empty
        # computation has none, and calling it is refused with the edges.
        if len(ids) > own and root_id not in ids[own:]:
            raise ModuleError(f"computation {comp.get('name')!r}: its root id {root_id} is "
                              "no instruction of it")
        roots[comp.get("id")] = root_id if len(ids) > own else None
        if any(marker in comp.get("name") for marker in SPLIT_MARKERS):
            splits.append(len(ids))
    if not ids:
        raise ModuleError("the module has no instructions")
    if splits[-1] < len(ids):
        splits.append(len(ids))
    _check_entry(module, roots, names)
    _check_no_recursion(calls, dict(zip(roots, names)))
    edges = _edges(ids, operands, called, roots)
    node_feat = np.stack(rows).astype(np.float32)
    position = {inst_id: i for i, inst_id in enumerate(ids)}
    node_operands = np.array([[position.get(o, -1) if o is not None else -1 for o in pair]
                              for pair in first_operands], dtype=np.int64)
    return EncodedModule(module.get("name"), node_feat, np.array(opcodes, dtype=np.uint8),
                         edges, np.array(splits, dtype=np.int64), tuple(unknown),
                         np.array(ranks, dtype=np.int64), node_operands,
                         np.array([c in fused_comps for c in node_comp], dtype=bool),
                         tuple(op_names))


def _decode_computation(buf: memoryview, span) -> Message:
    comp = decode(buf, "HloComputationProto", span)
    if comp.get("instructions") and "root_id" not in comp:
        raise ModuleError(f"computation {comp.get('name')!r} has no root instruction")
    return comp


def _check_no_recursion(calls: dict[int, set[int]], names: dict[int, str]) -> None:
    """Refuse a computation that calls itself, directly or through others: HLO has no
    recursion, and flattening one would give a cycle."""
    state: dict[int, int] = {}  # 1 while on the path, 2 once done
    for start in calls:
        stack = [(start, iter(sorted(calls.get(start, ()))))]
        state[start] = state.get(start, 0) or 1
        if state[start] == 2:
            continue
        while stack:
            comp, callees = stack[-1]
            callee = next(callees, None)
            if callee is None:
                state[comp] = 2
                stack.pop()
            elif state.get(callee) == 1:
                raise ModuleError(f"computation {names.get(callee, callee)!r} calls itself "
                                  "(through its own instructions or others'): HLO has no "
                                  "recursion")
            elif state.get(callee) is None and callee in calls:
                state[callee] = 1
                stack.append((callee, iter(sorted(calls[callee]))))


def _check_entry(module: Message, roots: dict[int, int], names: list[str]) -> None:
    if "entry_computation_id" in module:
        if module["entry_computation_id"] not in roots:
            raise ModuleError(f"the entry computation id {module['entry_computation_id']} "
                              "names no computation of the module")
    elif module.get("entry_computation_name"):
        if module["entry_computation_name"] not in names:
            raise ModuleError(f"the entry computation {module['entry_computation_name']!r} "
                              "is not in the module")
    else:
        raise ModuleError("the module names no entry computation")


def _edges(ids: list[int], operands: list[list[int]], called: list[list[int]],
           roots: dict[int, int]) -> np.ndarray:
    position: dict[int, int] = {}
    for i, inst_id in enumerate(ids):
        if inst_id in position:
            raise ModuleError(f"instruction id {inst_id} is used twice")
        position[inst_id] = i
    pairs: list[tuple[int, int]] = []
    for i, (inst_operands, inst_called) in enumerate(zip(operands, called)):
        for operand in inst_operands:
            if operand not in position:
                raise ModuleError(f"instruction id {ids[i]} refers to operand {operand}, "
                                  "which is no instruction of the module")
            pairs.append((i, position[operand]))
        for comp_id in inst_called:
            root = roots.get(comp_id)
            if root is None or root not in position:
                raise ModuleError(f"instruction id {ids[i]} calls computation {comp_id}, "
                                  "which the module lacks or which has no root")
            pairs.append((i, position[root]))
    # The converter's sparse tensor is sorted and refuses repeats; a repeat (one
    # computation called twice) is kept once here.
    edges = np.array(sorted(set(pairs)), dtype=np.int64).reshape(-1, 2)
    if len(edges):
        bad = int(cycle_edge(np.ascontiguousarray(edges[:, 0]),
                             np.ascontiguousarray(edges[:, 1]), len(ids)))
        if bad >= 0:
            user, operand = (ids[int(i)] for i in edges[bad])
            what = ("uses itself" if user == operand
                    else f"and instruction {operand} depend on each other")
            raise ModuleError(f"instruction id {user} {what} (through an operand or a "
                              "called computation's root): an HLO module is acyclic")
    return edges


def warn_unknown_opcodes(where: str, unknown: tuple[str, ...]) -> None:
    """One warning naming the opcodes that got the fallback id 0."""
    if unknown:
        warnings.warn(f"{where}: opcode(s) unknown to the TpuGraphs table got id 0: "
                      f"{', '.join(sorted(unknown))}", XlarankWarning, stacklevel=2)


__all__ = ["EncodedModule", "ModuleError", "WireError", "encode_module", "instruction_features",
           "tile_config_features", "warn_unknown_opcodes"]
