"""Hypothesis strategies derived from kfast's schemas: a message of one
version with random values in exactly the fields that version carries (the
others keep their defaults, as a decoder would leave them)."""

import uuid

from hypothesis import strategies as st

from kfast.protocol.schema import MessageSchema

_INT_RANGES = {
    "int8": (-(1 << 7), (1 << 7) - 1),
    "int16": (-(1 << 15), (1 << 15) - 1),
    "int32": (-(1 << 31), (1 << 31) - 1),
    "int64": (-(1 << 63), (1 << 63) - 1),
    "uint16": (0, (1 << 16) - 1),
    "uint32": (0, (1 << 32) - 1),
}
_text = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12)
_small_bytes = st.binary(max_size=24)
_uuids = st.one_of(
    st.just(uuid.UUID(int=0)), st.integers(0, (1 << 128) - 1).map(lambda i: uuid.UUID(int=i))
)


def _primitive(type_name: str):
    if type_name in _INT_RANGES:
        lo, hi = _INT_RANGES[type_name]
        return st.one_of(st.integers(-2, 2).filter(lambda v: lo <= v <= hi), st.integers(lo, hi))
    if type_name == "bool":
        return st.booleans()
    if type_name == "float64":
        return st.floats(allow_nan=False)
    if type_name == "string":
        return _text
    if type_name in ("bytes", "records"):
        return _small_bytes
    if type_name == "uuid":
        return _uuids
    raise AssertionError(type_name)


def message(schema: MessageSchema, version: int, depth_budget: int = 3):
    """A strategy of ``schema.cls`` instances valid for ``version``."""
    flexible = schema.api.is_flexible(version)
    return _struct(schema, schema.cls, schema.fields, version, flexible, depth_budget)


def _struct(schema, cls, specs, version, flexible, budget):
    fields = {}
    for spec in specs:
        tagged = flexible and spec.tag is not None and version in spec.tagged
        if version not in spec.versions or (spec.tag is not None and not tagged):
            continue
        fields[spec.name] = _field(schema, spec, version, flexible, budget)
    return st.fixed_dictionaries(fields).map(lambda kw: cls(**kw))


def _field(schema, spec, version, flexible, budget):
    if spec.struct_name is not None:
        sub_cls = schema.classes[spec.struct_name]
        element = _struct(schema, sub_cls, spec.fields, version, flexible, budget - 1)
    else:
        element = _primitive(spec.element_type)
    if spec.is_array:
        value = st.lists(element, max_size=3 if budget > 0 else 0)
    else:
        value = element
    if version in spec.nullable:
        value = st.one_of(st.none(), value)
    return value


def sample(schema: MessageSchema, version: int):
    """A deterministic message for ``version`` with a non-default value in
    every field it carries and two elements in every array (one level of
    nesting per struct), for byte-level tests such as truncation."""
    flexible = schema.api.is_flexible(version)
    return _sample_struct(schema, schema.cls, schema.fields, version, flexible)


_SAMPLES = {
    "int8": 7,
    "int16": 300,
    "int32": 70000,
    "int64": 1 << 40,
    "uint16": 65000,
    "uint32": 1 << 31,
    "float64": 0.5,
    "bool": True,
    "string": "sample-é",
    "bytes": b"\x01\x02\x03",
    "records": b"records!",
    "uuid": uuid.UUID(int=(1 << 127) | 5),
}


def _sample_struct(schema, cls, specs, version, flexible):
    fields = {}
    for spec in specs:
        tagged = flexible and spec.tag is not None and version in spec.tagged
        if version not in spec.versions or (spec.tag is not None and not tagged):
            continue
        if spec.struct_name is not None:
            element = _sample_struct(
                schema, schema.classes[spec.struct_name], spec.fields, version, flexible
            )
        else:
            element = _SAMPLES[spec.element_type]
        fields[spec.name] = [element, element] if spec.is_array else element
    return cls(**fields)


@st.composite
def mutated_body(draw, frame: bytes, header_length: int) -> bytes:
    """``frame`` with its body (after ``header_length``) cut short, bytes
    overwritten, or bytes inserted: lengths that overrun the frame, negative
    counts, tagged fields -- for a fast decoder against the generic one."""
    body = bytearray(frame[header_length:])
    for _ in range(draw(st.integers(1, 3))):
        at = draw(st.integers(0, len(body)))
        how = draw(st.sampled_from(["cut", "set", "insert"]))
        if how == "cut":
            del body[at:]
        elif how == "set" and at < len(body):
            body[at] = draw(st.integers(0, 255))
        else:
            body[at:at] = draw(st.binary(min_size=1, max_size=5))
    return frame[:header_length] + bytes(body)


@st.composite
def mutated_requests(draw, requests):
    """(version, frame) from ``requests`` (a strategy of (version, frame
    without the size prefix)), its body mutated (``mutated_body``)."""
    from kfast.protocol import decode_request_header

    version, frame = draw(requests)
    return version, draw(mutated_body(frame, decode_request_header(frame).header_length))
