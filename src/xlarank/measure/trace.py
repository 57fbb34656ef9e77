"""A JAX program's layout-configurable nodes, and the program run with a layout config.

The program is traced to a jaxpr once. Its configurable nodes are the equations that
`xlarank import` would configure in the HLO they lower to: convolutions
(``conv_general_dilated`` -> HLO ``convolution``), matrix products (``dot_general`` ->
``dot``) and reshapes (``reshape`` -> ``reshape``) whose output has rank 2 to 6. The
jaxpr is then evaluated again, equation by equation, inside ``jax.jit``: each configurable
equation runs under a named scope ``xlarank.node<K>``, which XLA keeps in the HLO
instruction's ``metadata.op_name``, and a config puts
``jax.experimental.layout.with_layout_constraint`` on the equation's output and on its
operands (the input; the kernel of a convolution or product) as this use reads them.

Nested ``jit`` calls and custom-derivative wrappers are evaluated inline, so their nodes are
configurable too; nodes inside control flow (``scan``, ``while``, ``cond``) are left to the
compiler, since a constraint cannot be put inside their bodies from here.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from xlarank.compat import jax_module
from xlarank.data.xla.encode import encode_module
from xlarank.data.xla.opcodes import OPCODE_IDS
from xlarank.errors import XlarankError

# jax and the modules of it used here, imported on first use (`xlarank.compat`).
PURPOSE = "measuring layout configs"
jax = jax_module("jax", PURPOSE)
jax_core = jax_module("jax.extend.core", PURPOSE)
jax_layout = jax_module("jax.experimental.layout", PURPOSE)

# jaxpr primitive -> the HLO opcode it lowers to; the kernel is operand 1 of the first two.
CONFIGURABLE_PRIMITIVES = {"conv_general_dilated": "convolution", "dot_general": "dot",
                           "reshape": "reshape"}
KERNEL_PRIMITIVES = ("conv_general_dilated", "dot_general")
# Equations whose inner jaxpr is evaluated inline (its parameter holding it).
INLINED = {"pjit": "jaxpr", "jit": "jaxpr", "closed_call": "call_jaxpr",
           "core_call": "call_jaxpr", "custom_jvp_call": "call_jaxpr",
           "custom_vjp_call": "call_jaxpr", "custom_vjp_call_jaxpr": "fun_jaxpr"}
# A config row holds six dimensions per tensor (FORMAT.md, node_config_feat).
MAX_RANK = 6
SCOPE = "xlarank.node"


@dataclass(frozen=True)
class ConfigurableNode:
    """One configurable equation: its order among them (``index``, the K of its scope), its
    primitive, and the shapes of its tensors in config order (output, input, kernel); a
    tensor that cannot be configured (rank under 2 or over 6, or not the HLO node's own
    operand) has shape None."""

    index: int
    primitive: str
    shapes: tuple[tuple[int, ...] | None, ...]


# A layout per tensor of a node: a full minor-to-major order, or None (the compiler's).
NodeLayouts = tuple[tuple[int, ...] | None, ...]


def _inner(eqn):
    """The ClosedJaxpr an equation evaluates inline, or None."""
    name = INLINED.get(eqn.primitive.name)
    if name is None:
        return None
    inner = eqn.params.get(name)
    return inner if inner is not None and hasattr(inner, "jaxpr") else None


def _configurable(eqn) -> bool:
    if eqn.primitive.name not in CONFIGURABLE_PRIMITIVES:
        return False
    return 2 <= len(eqn.outvars[0].aval.shape) <= MAX_RANK


def _tensor_shapes(eqn) -> tuple[tuple[int, ...] | None, ...]:
    avals = [eqn.outvars[0].aval, eqn.invars[0].aval]
    if eqn.primitive.name in KERNEL_PRIMITIVES:
        avals.append(eqn.invars[1].aval)
    return tuple(tuple(int(d) for d in a.shape) if 2 <= len(a.shape) <= MAX_RANK else None
                 for a in avals)


def bind(eqn, invals):
    """Apply the equation's primitive to ``invals`` as ``jax.core.eval_jaxpr`` does."""
    bound = eqn.primitive.get_bind_params(eqn.params)
    # jax before 0.5 returns (subfuns, params), later versions the params alone.
    subfuns, params = bound if isinstance(bound, tuple) else ((), bound)
    with eqn.ctx.manager:
        return eqn.primitive.bind(*subfuns, *invals, **params)


def _evaluate(jaxpr, consts, args, on_node: Callable, counter: list[int]):
    """Evaluate ``jaxpr`` on ``args`` (inside a trace), calling ``on_node(k, eqn, invals)``
    for the k-th configurable equation instead of binding it; returns the outputs."""
    env = {}

    def read(var):
        return var.val if isinstance(var, jax_core.Literal) else env[var]

    env.update(zip(jaxpr.constvars, consts))
    env.update(zip(jaxpr.invars, args))
    for eqn in jaxpr.eqns:
        invals = [read(v) for v in eqn.invars]
        inner = _inner(eqn)
        if inner is not None:
            outvals = _evaluate(inner.jaxpr, inner.consts, invals, on_node, counter)
        else:
            if _configurable(eqn):
                k = counter[0]
                counter[0] += 1
                outvals = on_node(k, eqn, invals)
            else:
                outvals = bind(eqn, invals)
            if not eqn.primitive.multiple_results:
                outvals = [outvals]
        for var, val in zip(eqn.outvars, outvals):
            if not isinstance(var, jax_core.DropVar):
                env[var] = val
    return [read(v) for v in jaxpr.outvars]


def _constrained(value, layout: tuple[int, ...] | None):
    if layout is None:
        return value
    return jax_layout.with_layout_constraint(
        value, jax_layout.Layout(major_to_minor=tuple(reversed(layout))))


class TracedProgram:
    """A JAX function on fixed example inputs, ready to be compiled with any layout config.

    ``nodes`` lists the configurable nodes (`ConfigurableNode`): those whose HLO
    instruction is found; ``hlo_module`` is the serialized HloModuleProto of the program as
    it lowers before any XLA pass, unchanged by any config; ``hlo_nodes`` int64
    (len(nodes),) is each node's position among that module's instructions, as
    `xlarank import` numbers them.
    """

    def __init__(self, fn: Callable, inputs: Sequence, name: str):
        self.name = name
        self.inputs = tuple(inputs)
        try:
            self.closed = jax.make_jaxpr(fn)(*self.inputs)
        except (Exception, SystemExit) as exc:  # a user's function may raise anything
            raise XlarankError(f"{name}: does not trace with the given inputs "
                               f"({type(exc).__name__}: {first_line(exc)})") from None
        found: list = []
        self._outputs_tree = jax.tree_util.tree_structure(jax.eval_shape(fn, *self.inputs))
        self._collect(self.closed.jaxpr, found)
        self.nodes = [ConfigurableNode(k, eqn.primitive.name, _tensor_shapes(eqn))
                      for k, eqn in enumerate(found)]
        if not self.nodes:
            raise XlarankError(f"{name}: no configurable node: the program has no "
                               "convolution, matrix product or reshape of rank 2 to 6 "
                               "outside control flow")
        try:
            lowered = jax.jit(self.function(None)).lower(*self.inputs)
            self.hlo_module = lowered.compiler_ir("hlo").as_serialized_hlo_module_proto()
        except Exception as exc:  # what XLA refuses to lower is the program's fault
            raise XlarankError(f"{name}: does not lower to HLO ({type(exc).__name__}: "
                               f"{first_line(exc)})") from None
        positions, operand_shapes = self._hlo_positions()
        # A node is configured where its HLO instruction was found; a tensor only where
        # that instruction reads the jaxpr's value itself (no convert or transpose put
        # between them by the lowering).
        kept = []
        for node, pos, seen in zip(self.nodes, positions, operand_shapes):
            shapes = tuple(shape if shape is not None and pos >= 0 and seen[t] == shape
                           else None for t, shape in enumerate(node.shapes))
            if pos >= 0 and any(s is not None for s in shapes):
                kept.append((ConfigurableNode(node.index, node.primitive, shapes), pos))
        if not kept:
            raise XlarankError(f"{name}: none of its convolutions, products or reshapes "
                               "could be found in the HLO it lowers to")
        self.nodes = [node for node, _ in kept]
        self.hlo_nodes = np.array([pos for _, pos in kept], dtype=np.int64)

    def _collect(self, jaxpr, found: list) -> None:
        for eqn in jaxpr.eqns:
            inner = _inner(eqn)
            if inner is not None:
                self._collect(inner.jaxpr, found)
            elif _configurable(eqn):
                found.append(eqn)

    def function(self, layouts: Sequence[NodeLayouts | None] | None) -> Callable:
        """The program with ``layouts[j]`` (or none: the compiler's choice) on
        ``nodes[j]``."""
        closed = self.closed
        tree = self._outputs_tree
        by_index = {node.index: chosen for node, chosen in zip(self.nodes, layouts or ())}

        def on_node(k, eqn, invals):
            chosen = by_index.get(k)
            if chosen is not None:
                for t in (1, 2):
                    if t < len(chosen) and chosen[t] is not None:
                        invals[t - 1] = _constrained(invals[t - 1], chosen[t])
            with jax.named_scope(f"{SCOPE}{k}"):
                out = bind(eqn, invals)
            if chosen is not None and chosen[0] is not None:
                out = _constrained(out, chosen[0])
            return out

        def run(*args):
            # The jaxpr's inputs are the arguments' leaves (a dict of weights is fine).
            outs = _evaluate(closed.jaxpr, closed.consts, jax.tree_util.tree_leaves(args),
                             on_node, [0])
            return jax.tree_util.tree_unflatten(tree, outs)

        run.__name__ = self.name
        return run

    def _hlo_positions(self) -> tuple[np.ndarray, list[list[tuple[int, ...] | None]]]:
        """Each node's position in the HLO module and the shapes of that instruction's
        output and first two operands."""
        buf = memoryview(self.hlo_module)
        encoded = encode_module(buf, None)
        positions = np.full(len(self.nodes), -1, dtype=np.int64)
        shapes: list[list[tuple[int, ...] | None]] = []
        for node in self.nodes:
            want = OPCODE_IDS[CONFIGURABLE_PRIMITIVES[node.primitive]]
            # A whole scope between slashes: "xlarank.node1" never matches "xlarank.node12".
            tag = f"/{SCOPE}{node.index}/"
            hits = [i for i, op_name in enumerate(encoded.node_op_name)
                    if tag in f"/{op_name}/" and encoded.node_opcode[i] == want]
            if len(hits) == 1:
                positions[node.index] = hits[0]
            shapes.append([_node_shape(encoded, hits[0] if len(hits) == 1 else -1)]
                          + [_node_shape(encoded, encoded.node_operands[hits[0], t])
                             if len(hits) == 1 else None for t in (0, 1)])
        return positions, shapes


def _node_shape(encoded, position: int) -> tuple[int, ...] | None:
    if position < 0:
        return None
    rank = int(encoded.node_rank[position])
    if not 2 <= rank <= MAX_RANK:
        return None
    return tuple(int(d) for d in encoded.node_feat[position, 21:21 + rank])


def first_line(exc: BaseException) -> str:
    """An exception's first line, cut to 300 characters: a user's or XLA's message in one
    `error:` line."""
    text = str(exc).strip().splitlines()
    return text[0][:300] if text else "no message"
