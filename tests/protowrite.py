"""A small protobuf writer for test records: keys, varints and length-delimited fields.

Test inputs only; xlarank itself never writes protobuf. A message is a list of
(field number, value) pairs: an int is a varint (negatives as 10-byte two's complement),
bytes or str are length-delimited, a list is a nested message, a `Fixed` a 64- or 32-bit
value. `parse` reads a message back into pairs (length-delimited values as bytes), so
tests can change a real record field by field.
"""

from __future__ import annotations


def varint(value: int) -> bytes:
    value &= (1 << 64) - 1
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


class Fixed(bytes):
    """A 64-bit (8 bytes) or 32-bit (4 bytes) value, written as it is."""


def message(pairs) -> bytes:
    out = bytearray()
    for number, value in pairs:
        if isinstance(value, Fixed):
            out += varint(number << 3 | (1 if len(value) == 8 else 5)) + value
        elif isinstance(value, bool) or isinstance(value, int):
            out += varint(number << 3) + varint(int(value))
        else:
            payload = value.encode() if isinstance(value, str) else \
                message(value) if isinstance(value, list) else bytes(value)
            out += varint(number << 3 | 2) + varint(len(payload)) + payload
    return bytes(out)


def shape(element_type: int, dims: list[int], minor_to_major: list[int] | None = None):
    pairs = [(2, element_type)] + [(3, d) for d in dims]
    if minor_to_major is not None:
        pairs.append((5, [(1, m) for m in minor_to_major]))
    return pairs


def instruction(inst_id: int, opcode: str, operands=(), called=(), dims=(4, 4),
                name: str | None = None, **extra):
    pairs = [(1, name or f"{opcode}.{inst_id}"), (2, opcode),
             (3, shape(11, list(dims), list(range(len(dims)))[::-1])), (35, inst_id)]
    pairs += [(36, o) for o in operands] + [(38, c) for c in called]
    for number, value in extra.items():
        pairs.append((int(number.lstrip("f")), value))
    return pairs


def computation(comp_id: int, name: str, instructions, root_id: int):
    return [(1, name)] + [(2, i) for i in instructions] + [(5, comp_id), (6, root_id)]


def module(name: str, computations, entry_id: int | None):
    pairs = [(1, name)] + [(3, c) for c in computations]
    if entry_id is not None:
        pairs.append((6, entry_id))
    return pairs


def layout_run(nodes, runtime_ns: int, default: bool = False, error: bool = False):
    """nodes: per configurable node, a list of tensors' dims lists."""
    layout = [(1, [(1, [(1, d) for d in dims]) for dims in tensors]) for tensors in nodes]
    return _run((2, [(1, layout)]), runtime_ns, default, error)


def tile_run(output_bounds, runtime_ns: int, default: bool = False, error: bool = False):
    return _run((1, [(1, [(2, b) for b in output_bounds])]), runtime_ns, default, error)


def _run(config, runtime_ns: int, default: bool, error: bool):
    """A ConfigProfile: its config field, then error, profile and is_default as set."""
    return ([config] + ([(3, True)] if error else []) + [(4, [(4, runtime_ns)])]
            + ([(5, True)] if default else []))


def parse(raw: bytes) -> list | None:
    """The (field number, value) pairs of a whole message, as `message` writes them
    (length-delimited values as bytes: parse them again to go down); None when ``raw`` is
    not a well-formed message (field number 0, groups, a value past the end)."""
    pairs, pos = [], 0
    try:
        while pos < len(raw):
            key, pos = _read_varint(raw, pos)
            number, wire = key >> 3, key & 7
            if number == 0:
                return None
            if wire == 0:
                value, pos = _read_varint(raw, pos)
            elif wire in (1, 5):
                size = 8 if wire == 1 else 4
                value, pos = Fixed(raw[pos:pos + size]), pos + size
                if pos > len(raw):
                    return None
            elif wire == 2:
                size, pos = _read_varint(raw, pos)
                value, pos = bytes(raw[pos:pos + size]), pos + size
                if pos > len(raw):
                    return None
            else:
                return None
            pairs.append((number, value))
    except IndexError:
        return None
    return pairs


def _read_varint(raw: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = raw[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7
