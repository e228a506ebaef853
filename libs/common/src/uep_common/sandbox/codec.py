"""Tagged, bounded value encoding for calls between the trusted runner and the candidate process.

Never pickle: the bytes come from untrusted code, and decoding them must only ever build plain data.
Encoding (JSON text, UTF-8):

* ``None``, ``bool``, ``int``, ``float`` (including ``nan``/``inf``, written as ``NaN``/``Infinity``, which
  Python's ``json`` reads back) and ``str`` are JSON scalars; JSON keeps ``true`` apart from ``1`` and
  ``1.0`` apart from ``1``, and ``repr`` of a float round-trips exactly.
* containers are JSON arrays whose first element is a one-letter tag: ``["L", ...]`` list, ``["T", ...]``
  tuple, ``["S", ...]`` set, ``["F", ...]`` frozenset, ``["D", k1, v1, k2, v2, ...]`` dict (insertion order
  kept, any hashable decoded key), ``["B", "<hex>"]`` bytes, ``["C", real, imag]`` complex.

Subclasses of these types (``IntEnum``, ``OrderedDict``, ``namedtuple``) are sent as their base type.
Anything else (functions, generators, objects) raises :class:`CodecError`, as do more than
:data:`MAX_DEPTH` levels of nesting (this also stops cycles), more than :data:`MAX_NODES` values, an int
of more than 4300 digits and a message over :data:`MAX_BYTES` bytes.

This module is self-contained (standard library only): the sandbox runner is built from its source and
runs inside the sandbox, where the ``uep_common`` package is not mounted.
"""

import json

# Not ``typing.TYPE_CHECKING``: importing ``typing`` would cost every sandbox start ~35 ms, so the annotations
# naming its types are strings that only the type checker reads.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

MAX_DEPTH = 64
MAX_NODES = 1_000_000
MAX_BYTES = 16 << 20


class CodecError(ValueError):
    """A value cannot be encoded or a message cannot be decoded within the bounds above."""


def _enc(value: object, depth: int, budget: list[int]) -> object:
    budget[0] -= 1
    if budget[0] < 0:
        raise CodecError(f"value too large: more than {MAX_NODES} elements")
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, str):
        return str(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    if depth >= MAX_DEPTH:
        raise CodecError(f"value nested deeper than {MAX_DEPTH} levels")
    depth += 1
    if isinstance(value, (list, tuple, set, frozenset)):
        tag = (
            "L" if isinstance(value, list) else "T" if isinstance(value, tuple) else "F" if isinstance(value, frozenset) else "S"
        )
        return [tag] + [_enc(v, depth, budget) for v in value]
    if isinstance(value, dict):
        out: list[object] = ["D"]
        for k, v in value.items():
            out.append(_enc(k, depth, budget))
            out.append(_enc(v, depth, budget))
        return out
    if isinstance(value, (bytes, bytearray)):
        return ["B", bytes(value).hex()]
    if isinstance(value, complex):
        return ["C", value.real, value.imag]
    raise CodecError(f"cannot send a value of type {type(value).__name__}")


def encode(value: object) -> bytes:
    """Encode ``value`` to UTF-8 JSON bytes (shapes in the module docstring).

    Raises:
        CodecError: an unsupported type, too deep, too many elements, or over ``MAX_BYTES``.
    """
    try:
        data = json.dumps(_enc(value, 0, [MAX_NODES]), ensure_ascii=False, separators=(",", ":")).encode("utf-8", "surrogatepass")
    except (ValueError, RecursionError) as exc:
        if isinstance(exc, CodecError):
            raise
        raise CodecError(str(exc)[:200]) from None
    if len(data) > MAX_BYTES:
        raise CodecError(f"encoded value is {len(data)} bytes, more than {MAX_BYTES}")
    return data


def _dec(node: object, depth: int) -> "Any":
    if node is None or type(node) in (bool, int, float, str):
        return node
    if type(node) is not list or not node or depth >= MAX_DEPTH:
        raise CodecError("malformed message")
    tag, items = node[0], node[1:]
    depth += 1
    if tag == "L":
        return [_dec(v, depth) for v in items]
    if tag == "T":
        return tuple(_dec(v, depth) for v in items)
    if tag in ("S", "F"):
        try:
            values = [_dec(v, depth) for v in items]
            return set(values) if tag == "S" else frozenset(values)
        except TypeError:
            raise CodecError("unhashable set element") from None
    if tag == "D":
        if len(items) % 2:
            raise CodecError("malformed dict")
        out: dict[object, object] = {}
        try:
            for i in range(0, len(items), 2):
                out[_dec(items[i], depth)] = _dec(items[i + 1], depth)
        except TypeError:
            raise CodecError("unhashable dict key") from None
        return out
    if tag == "B" and len(items) == 1 and type(items[0]) is str:
        try:
            return bytes.fromhex(items[0])
        except ValueError:
            raise CodecError("malformed bytes") from None
    if tag == "C" and len(items) == 2 and all(type(v) in (int, float) for v in items):
        return complex(items[0], items[1])
    raise CodecError("unknown tag")


def decode(data: bytes) -> "Any":
    """Decode bytes made by :func:`encode` back into a value.

    Raises:
        CodecError: not valid UTF-8 JSON of this encoding, too deep or over ``MAX_BYTES``.
    """
    if len(data) > MAX_BYTES:
        raise CodecError(f"message over {MAX_BYTES} bytes")
    try:
        node = json.loads(data.decode("utf-8", "surrogatepass"))
    except (ValueError, RecursionError, UnicodeDecodeError):
        raise CodecError("malformed message") from None
    return _dec(node, 0)
