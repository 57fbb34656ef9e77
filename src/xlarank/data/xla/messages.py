"""The messages xlarank reads, written from their public schemas, and a strict decoder.

Only the fields the official converter reads (and the ids that tie a record together) are
listed; every other field is skipped unread. The schemas are XLA's ``hlo.proto`` and
``xla_data.proto`` and TpuGraphs' ``tuning.proto``; field numbers are all that matter on
the wire, so they are the only thing taken from them.

A listed field that arrives with another wire type than its schema gives means the bytes
are some other message: the decoder says so rather than guess.
"""

from __future__ import annotations

from dataclasses import dataclass

from xlarank.data.xla.wire import LEN, VARINT, WIRE_NAMES, WireError, as_int64, fields, read_varint

# Scalar kinds; anything else is the name of a message in SCHEMAS.
INT = "int"  # int32/int64/enum, two's complement on the wire
UINT = "uint"  # uint64
BOOL = "bool"
STRING = "string"
SPAN = "span"  # a sub-message kept as (start, end), decoded later by its reader
SCALARS = {INT, UINT, BOOL, STRING, SPAN}
# Nesting deeper than this (tuple shapes in tuple shapes...) is refused, not recursed into.
MAX_DEPTH = 64


@dataclass(frozen=True)
class Field:
    name: str
    kind: str
    repeated: bool = False


def _schema(**named: tuple) -> dict[int, Field]:
    return {spec[0]: Field(name, spec[1], len(spec) > 2 and spec[2] == "repeated")
            for name, spec in named.items()}


R = "repeated"
SCHEMAS: dict[str, dict[int, Field]] = {
    # tpu_graphs/proto/tuning.proto
    "TuningData": _schema(modules=(1, SPAN, R)),
    "ModuleTuningData": _schema(module=(1, SPAN), fingerprint=(2, UINT),
                                runs=(3, "ConfigProfile", R),
                                config_index_to_node=(4, UINT, R)),
    "ConfigProfile": _schema(op_config=(1, "HloOpConfig"), module_config=(2, "HloModuleConfig"),
                             error=(3, BOOL), profile=(4, "ExecutionProfile"),
                             is_default=(5, BOOL)),
    "HloOpConfig": _schema(tile_size_config=(1, "TileSizeConfig")),
    "TileSizeConfig": _schema(kernel_bounds=(1, INT, R), output_bounds=(2, INT, R),
                              input_bounds=(3, INT, R), iteration_bounds=(4, INT, R)),
    "HloModuleConfig": _schema(layout_config=(1, "LayoutConfig")),
    "LayoutConfig": _schema(nodes=(1, "NodeLayoutConfig", R)),
    "NodeLayoutConfig": _schema(tensors=(1, "TensorLayoutConfig", R)),
    "TensorLayoutConfig": _schema(dims=(1, INT, R)),
    "ExecutionProfile": _schema(compute_time_ns=(4, INT)),
    # xla/service/hlo.proto
    "HloProto": _schema(hlo_module=(1, SPAN)),
    "HloModuleProto": _schema(name=(1, STRING), entry_computation_name=(2, STRING),
                              computations=(3, SPAN, R), id=(5, INT),
                              entry_computation_id=(6, INT)),
    "HloComputationProto": _schema(name=(1, STRING), instructions=(2, SPAN, R), id=(5, INT),
                                   root_id=(6, INT)),
    "HloInstructionProto": _schema(
        name=(1, STRING), opcode=(2, STRING), shape=(3, "ShapeProto"),
        metadata=(7, "OpMetadata"), parameter_number=(9, INT), tuple_index=(13, INT),
        dimensions=(14, INT, R),
        window=(15, "Window"), convolution_dimension_numbers=(16, "ConvolutionDimensionNumbers"),
        slice_dimensions=(17, "SliceDimensions", R), dynamic_slice_sizes=(20, INT, R),
        padding_config=(21, "PaddingConfig"), id=(35, INT), operand_ids=(36, INT, R),
        called_computation_ids=(38, INT, R), feature_group_count=(50, INT),
        batch_group_count=(58, INT), is_stable=(60, BOOL)),
    # Where an instruction came from: `xlarank measure` finds its nodes by their op_name.
    "OpMetadata": _schema(op_type=(1, STRING), op_name=(2, STRING)),
    "SliceDimensions": _schema(start=(1, INT), limit=(2, INT), stride=(3, INT)),
    # xla/xla_data.proto
    "ShapeProto": _schema(element_type=(2, INT), dimensions=(3, INT, R),
                          tuple_shapes=(4, "ShapeProto", R), layout=(5, "LayoutProto"),
                          is_dynamic_dimension=(6, BOOL, R)),
    "LayoutProto": _schema(minor_to_major=(1, INT, R)),
    "Window": _schema(dimensions=(1, "WindowDimension", R)),
    "WindowDimension": _schema(size=(1, INT), stride=(2, INT), padding_low=(3, INT),
                               padding_high=(4, INT), window_dilation=(5, INT),
                               base_dilation=(6, INT), window_reversal=(7, BOOL)),
    "ConvolutionDimensionNumbers": _schema(
        kernel_input_feature_dimension=(3, INT), kernel_output_feature_dimension=(4, INT),
        kernel_spatial_dimensions=(6, INT, R), input_batch_dimension=(7, INT),
        input_feature_dimension=(8, INT), output_batch_dimension=(9, INT),
        output_feature_dimension=(10, INT), input_spatial_dimensions=(11, INT, R),
        output_spatial_dimensions=(12, INT, R)),
    "PaddingConfig": _schema(dimensions=(1, "PaddingConfigDimension", R)),
    "PaddingConfigDimension": _schema(edge_padding_low=(1, INT), edge_padding_high=(2, INT),
                                      interior_padding=(3, INT)),
}


class Message(dict):
    """A decoded message: its set fields by name. An unset field reads as proto3's default
    (0, False, "", [] or an empty message) through `get`."""

    __slots__ = ("type",)

    def __init__(self, type_name: str):
        super().__init__()
        self.type = type_name

    def get(self, name: str, default=None):  # noqa: D401 - dict's own signature
        if name in self:
            return self[name]
        if default is not None:
            return default
        field = _FIELDS_BY_NAME[self.type][name]
        if field.repeated:
            return []
        if field.kind in (INT, UINT):
            return 0
        if field.kind == BOOL:
            return False
        if field.kind == STRING:
            return ""
        if field.kind == SPAN:
            return None
        return Message(field.kind)


_FIELDS_BY_NAME = {t: {f.name: f for f in schema.values()} for t, schema in SCHEMAS.items()}


def _scalar(buf: memoryview, kind: str, wire: int, value, where: str):
    if kind == STRING:
        if wire != LEN:
            raise WireError(f"{where}: a string field with wire type {WIRE_NAMES[wire]}")
        try:
            return str(buf[value[0]:value[1]], "utf-8")
        except UnicodeDecodeError:
            raise WireError(f"{where}: a string field that is not UTF-8") from None
    if kind == SPAN:
        if wire != LEN:
            raise WireError(f"{where}: a message field with wire type {WIRE_NAMES[wire]}")
        return value
    if wire != VARINT:
        raise WireError(f"{where}: a number field with wire type {WIRE_NAMES[wire]}")
    if kind == INT:
        return as_int64(value)
    if kind == BOOL:
        return value != 0
    return value


def decode(buf: memoryview, type_name: str, span: tuple[int, int] | None = None,
           depth: int = 0) -> Message:
    """Decode ``buf[span]`` as ``type_name`` (a key of SCHEMAS), recursively.

    Raises WireError on malformed bytes or on a listed field of the wrong wire type.
    """
    if depth > MAX_DEPTH:
        raise WireError(f"messages nested more than {MAX_DEPTH} deep")
    schema = SCHEMAS[type_name]
    start, end = span if span is not None else (0, len(buf))
    out = Message(type_name)
    for number, wire, value in fields(buf, start, end):
        field = schema.get(number)
        if field is None:
            continue
        where = f"{type_name}.{field.name}"
        if field.kind in SCALARS:
            if field.repeated and wire == LEN and field.kind in (INT, UINT, BOOL):
                items = out.setdefault(field.name, [])
                pos, stop = value
                while pos < stop:
                    item, pos = read_varint(buf, pos, stop)
                    items.append(_scalar(buf, field.kind, VARINT, item, where))
                continue
            item = _scalar(buf, field.kind, wire, value, where)
        else:
            if wire != LEN:
                raise WireError(f"{where}: a message field with wire type {WIRE_NAMES[wire]}")
            item = decode(buf, field.kind, value, depth + 1)
        if field.repeated:
            out.setdefault(field.name, []).append(item)
        else:
            out[field.name] = item  # proto3: the last value wins; messages would merge
    return out
