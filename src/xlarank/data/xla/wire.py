"""The protobuf wire format, read without the protobuf package.

A message is a run of fields, each a varint key (field number << 3 | wire type) and a
value. Only what XLA's and TpuGraphs' records use is read: varints (0), 64-bit (1),
length-delimited (2) and 32-bit (5) values. Groups (3, 4) are refused: proto3 has none.
Values are views into the caller's buffer, so skipping a large constant literal copies
nothing.
"""

from __future__ import annotations

from collections.abc import Iterator

VARINT, FIXED64, LEN, FIXED32 = 0, 1, 2, 5
WIRE_NAMES = {VARINT: "varint", FIXED64: "64-bit", LEN: "length-delimited", FIXED32: "32-bit"}


class WireError(ValueError):
    """Bytes that are not a well-formed protobuf message; the reader names the file."""


def read_varint(buf: memoryview, pos: int, end: int) -> tuple[int, int]:
    """The varint at ``pos`` and the position after it."""
    result = 0
    shift = 0
    while True:
        if pos >= end:
            raise WireError("truncated: a varint runs past the end of its message")
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos
        shift += 7
        if shift >= 70:
            raise WireError("a varint longer than 10 bytes")


def fields(buf: memoryview, start: int = 0, end: int | None = None
           ) -> Iterator[tuple[int, int, object]]:
    """(field number, wire type, value) of each field of the message in ``buf[start:end]``.

    A varint's value is an int (unsigned, as on the wire); a length-delimited value is a
    (start, end) pair into ``buf``; fixed values are their raw bytes.
    """
    end = len(buf) if end is None else end
    pos = start
    while pos < end:
        key, pos = read_varint(buf, pos, end)
        number, wire = key >> 3, key & 7
        if number == 0:
            raise WireError("field number 0")
        if wire == VARINT:
            value, pos = read_varint(buf, pos, end)
        elif wire == LEN:
            size, pos = read_varint(buf, pos, end)
            if size > end - pos:
                raise WireError(f"truncated: field {number} claims {size} bytes, "
                                f"{end - pos} are left")
            value = (pos, pos + size)
            pos += size
        elif wire == FIXED64:
            if pos + 8 > end:
                raise WireError(f"truncated: field {number} needs 8 bytes")
            value = bytes(buf[pos:pos + 8])
            pos += 8
        elif wire == FIXED32:
            if pos + 4 > end:
                raise WireError(f"truncated: field {number} needs 4 bytes")
            value = bytes(buf[pos:pos + 4])
            pos += 4
        else:
            raise WireError(f"field {number} has wire type {wire}, which proto3 never writes")
        yield number, wire, value


def as_int64(value: int) -> int:
    """A varint read back as the int64 (or int32) it encodes: negatives are 10 bytes."""
    value &= (1 << 64) - 1
    return value - (1 << 64) if value >= 1 << 63 else value


def packed_varints(buf: memoryview, span: tuple[int, int]) -> list[int]:
    """The varints of a packed repeated field, as unsigned ints."""
    out = []
    pos, end = span
    while pos < end:
        value, pos = read_varint(buf, pos, end)
        out.append(value)
    return out


# Writing: what `xlarank measure` needs to write a ModuleTuningData record.

def varint(value: int) -> bytes:
    """``value`` as a varint; a negative int64 as its 10-byte two's complement, as protobuf
    writes int64 and int32 fields."""
    if value < 0:
        value += 1 << 64
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def varint_field(number: int, value: int) -> bytes:
    """A varint field (int32/int64/uint64/bool/enum); proto3 leaves a zero value unwritten."""
    return b"" if value == 0 else varint(number << 3 | VARINT) + varint(value)


def len_field(number: int, payload: bytes) -> bytes:
    """A length-delimited field: a string, bytes or a sub-message."""
    return varint(number << 3 | LEN) + varint(len(payload)) + payload


def packed_field(number: int, values) -> bytes:
    """A packed repeated varint field, as proto3 writes repeated numbers; none when empty."""
    values = list(values)
    return len_field(number, b"".join(varint(int(v)) for v in values)) if values else b""
