"""kfast's message schemas: the grammar, message classes and compiled codecs.

Each module in ``kfast.protocol.messages`` holds two strings, REQUEST and
RESPONSE, in this grammar (one field per line; two more spaces of indentation
put a field inside the struct declared on the line above)::

    field      := name type versions attribute*
    type       := int8 | int16 | int32 | int64 | uint16 | uint32 | float64
                | bool | string | bytes | records | uuid
                | "[]" type                 an array
                | StructName                one struct, its fields indented below
                                            ("[]StructName": an array of them)
    versions   := "none" | range ("," range)*
    range      := N | N "-" M | N "+"
    attribute  := "nullable=" versions      null is allowed in these versions
                | "tag=" N                  tagged field number ...
                | "tagged=" versions        ... in these (flexible) versions
                | "default=" literal        integer (decimal or 0x..), true,
                                            false, null or a JSON string
                | "ignorable"               see below
                | "flexible=none"           never uses compact encoding

Names are Kafka's JSON field names in snake_case. Without ``default=`` a
field defaults as in Kafka's generated code: 0, false, "", b"", [], the zero
UUID, a default struct; `records` default to null.

Every struct becomes a message class (``Message`` subclass) whose instances
carry every field of every version as attributes; construct one by keyword
(``ProduceResponse(responses=[...])``) and omitted fields take their
defaults, so a handler builds one object whatever version it answers. When a
version lacks a field holding a non-default value, encoding drops it if the
field is ignorable and raises UnsupportedVersionException otherwise (Kafka's
generated code does the same). Nested struct classes are attributes of the
top-level class: ``ProduceRequest.TopicProduceData``.

A message's grammar is parsed at first use, and each (version, direction) is
compiled at first use into StructProgram/FieldOp trees that the Cython codec
(kfast._ext.protocol_codec) executes; importing kfast.protocol touches none of
this, so the broker starts in milliseconds.
"""

from __future__ import annotations

import importlib
import json
import sys
from dataclasses import dataclass
from dataclasses import field as dataclass_field
from typing import TYPE_CHECKING, Any, ClassVar

from kfast._ext import protocol_codec as _codec
from kfast._ext.protocol_codec import FieldOp, StructProgram
from kfast.protocol import errors
from kfast.protocol.api_keys import ApiKey, api_key
from kfast.protocol.constants import ZERO_UUID

_codec.configure(errors.MalformedRequestException, errors.UnsupportedVersionException)

_PRIMITIVE_KINDS = {
    "int8": _codec.KIND_INT8,
    "int16": _codec.KIND_INT16,
    "int32": _codec.KIND_INT32,
    "int64": _codec.KIND_INT64,
    "uint16": _codec.KIND_UINT16,
    "uint32": _codec.KIND_UINT32,
    "float64": _codec.KIND_FLOAT64,
    "bool": _codec.KIND_BOOL,
    "string": _codec.KIND_STRING,
    "bytes": _codec.KIND_BYTES,
    "records": _codec.KIND_RECORDS,
    "uuid": _codec.KIND_UUID,
}
_IMPLICIT_DEFAULTS = {
    "int8": 0,
    "int16": 0,
    "int32": 0,
    "int64": 0,
    "uint16": 0,
    "uint32": 0,
    "float64": 0.0,
    "bool": False,
    "string": "",
    "bytes": b"",
    "records": None,
    "uuid": ZERO_UUID,
}


class Versions:
    """A set of versions written as ranges ("0-4,7+")."""

    __slots__ = ("ranges", "text")

    def __init__(self, text: str):
        self.text = text
        self.ranges: list[tuple[int, int]] = []
        if text == "none":
            return
        for part in text.split(","):
            if part.endswith("+"):
                self.ranges.append((int(part[:-1]), 1 << 15))
            elif "-" in part:
                lo, hi = part.split("-")
                self.ranges.append((int(lo), int(hi)))
            else:
                self.ranges.append((int(part), int(part)))

    def __contains__(self, version: int) -> bool:
        for lo, hi in self.ranges:
            if lo <= version <= hi:
                return True
        return False

    def __bool__(self) -> bool:
        return bool(self.ranges)

    def __repr__(self) -> str:
        return self.text


_NONE = Versions("none")


@dataclass
class FieldSpec:
    name: str
    type: str  # as written: "int32", "[]string", "[]Topic", "Cursor"
    versions: Versions
    nullable: Versions = _NONE
    tag: int | None = None
    tagged: Versions = _NONE
    default: int | bool | str | None = None  # the parsed literal of default=
    has_default: bool = False
    ignorable: bool = False
    flexible_never: bool = False
    fields: list[FieldSpec] | None = None  # struct or array-of-struct members

    @property
    def is_array(self) -> bool:
        return self.type.startswith("[]")

    @property
    def element_type(self) -> str:
        return self.type[2:] if self.is_array else self.type

    @property
    def struct_name(self) -> str | None:
        t = self.element_type
        return None if t in _PRIMITIVE_KINDS else t


def _literal(text: str) -> int | bool | str | None:
    if text == "null":
        return None
    if text == "true":
        return True
    if text == "false":
        return False
    if text.startswith('"'):
        return json.loads(text)
    return int(text, 0)


def parse(grammar: str) -> list[FieldSpec]:
    """Parse one REQUEST/RESPONSE grammar into a FieldSpec tree."""
    root: list[FieldSpec] = []
    stack: list[tuple[int, list[FieldSpec]]] = [(-1, root)]
    last: FieldSpec | None = None
    last_indent = -1
    for lineno, line in enumerate(grammar.splitlines(), 1):
        if not line.strip():
            continue
        indent = len(line) - len(line.lstrip(" "))
        words = line.split()
        if len(words) < 3:
            raise ValueError(f"schema line {lineno}: expected 'name type versions': {line!r}")
        spec = FieldSpec(words[0], words[1], Versions(words[2]))
        for attr in words[3:]:
            key, _, value = attr.partition("=")
            if key == "nullable":
                spec.nullable = Versions(value)
            elif key == "tag":
                spec.tag = int(value)
            elif key == "tagged":
                spec.tagged = Versions(value)
            elif key == "default":
                spec.default, spec.has_default = _literal(value), True
            elif key == "ignorable":
                spec.ignorable = True
            elif key == "flexible" and value == "none":
                spec.flexible_never = True
            else:
                raise ValueError(f"schema line {lineno}: unknown attribute {attr!r}")
        while indent <= stack[-1][0]:
            stack.pop()
        if (
            last is not None
            and indent > stack[-1][0]
            and stack[-1][1] is not root
            and indent > last_indent
            and last.fields is None
        ):
            raise ValueError(f"schema line {lineno}: {last.name} is not a struct")
        stack[-1][1].append(spec)
        if spec.struct_name is not None:
            spec.fields = []
            stack.append((indent, spec.fields))
        last, last_indent = spec, indent
    return root


class Message:
    """Base of every message and struct class: keyword construction with
    Kafka's defaults, equality by value, a readable repr.

    Only fields that were given (or decoded) live in the instance dict.
    Immutable defaults are class attributes; a list or struct default is
    created on first access and then stored, so ``msg.topics.append(...)``
    works on a fresh message and building or decoding a message never pays
    for fields it does not use.
    """

    _field_names: ClassVar[tuple[str, ...]] = ()
    _field_set: ClassVar[frozenset[str]] = frozenset()
    # name -> struct class, or None for a list
    _mutable: ClassVar[dict[str, type[Message] | None]] = {}

    def __init__(self, **fields: Any):
        _codec.init_message(self, fields)

    # Hidden from type checkers: every field is declared by the generated
    # stub (kfast.protocol.message_classes), so a misspelt field is an error
    # rather than an Any.
    if not TYPE_CHECKING:

        def __getattr__(self, name):
            mutable = type(self)._mutable
            if name not in mutable:
                raise AttributeError(f"{type(self).__qualname__} has no field {name!r}")
            factory = mutable[name]
            value = [] if factory is None else factory()
            self.__dict__[name] = value
            return value

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return all(getattr(self, n) == getattr(other, n) for n in self._field_names)

    # Mutable, compared by value: unhashable, as a dataclass with eq=True.
    __hash__ = None  # type: ignore[assignment]  # object's slot is a method; None is the protocol

    def __repr__(self) -> str:
        inner = ", ".join(f"{k}={v!r}" for k, v in self.__dict__.items())
        return f"{type(self).__qualname__}({inner})"

    def _is_default(self) -> bool:
        """True when every field holds its default (tagged struct fields in
        that state are not written)."""
        cls = type(self)
        for name, value in self.__dict__.items():
            if name in cls._mutable:
                factory = cls._mutable[name]
                if value is None or (len(value) if factory is None else not value._is_default()):
                    return False
            elif value != getattr(cls, name):
                return False
        return True

    def to_dict(self) -> dict[str, Any]:
        """Every field as plain nested dicts/lists (records and bytes as
        bytes), for tests and logs."""
        return {name: _plain(getattr(self, name)) for name in self._field_names}


def _plain(value: object) -> object:
    if isinstance(value, Message):
        return value.to_dict()
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, memoryview):
        return bytes(value)
    return value


def _default_kind(
    spec: FieldSpec, classes: dict[str, type[Message]]
) -> tuple[object, int, type[Message] | None]:
    """(default, default_kind, factory) for a field."""
    if spec.has_default and spec.default is None:
        return None, _codec.DEFAULT_VALUE, None
    if spec.is_array:
        return None, _codec.DEFAULT_LIST, None
    if spec.struct_name is not None:
        return None, _codec.DEFAULT_STRUCT, classes[spec.struct_name]
    literal = spec.default
    if spec.has_default and literal is not None:
        value: object = literal
        if spec.element_type == "float64":
            value = float(literal)
        elif spec.element_type == "bool":
            value = bool(literal)
        return value, _codec.DEFAULT_VALUE, None
    return _IMPLICIT_DEFAULTS[spec.element_type], _codec.DEFAULT_VALUE, None


class MessageSchema:
    """One request or response of one API: its classes and compiled versions."""

    def __init__(self, api: ApiKey, direction: str, grammar: str):
        self.api = api
        self.direction = direction  # "Request" or "Response"
        self.fields = parse(grammar)
        self.name = api.name + direction
        self.classes: dict[str, type[Message]] = {}
        self.cls = self._build_classes()
        self._programs: dict[int, StructProgram] = {}

    def _build_classes(self) -> type[Message]:
        module = f"kfast.protocol.messages.{self.api.module}"
        top = type(self.name, (Message,), {"__module__": module})

        def declare(specs: list[FieldSpec]) -> None:
            for spec in specs:
                name = spec.struct_name
                if name is not None and name not in self.classes:
                    cls = type(
                        name,
                        (Message,),
                        {"__module__": module, "__qualname__": f"{self.name}.{name}"},
                    )
                    self.classes[name] = cls
                    setattr(top, name, cls)
                if spec.fields:
                    declare(spec.fields)

        declare(self.fields)
        self.classes[self.name] = top
        # A name used twice (a Kafka "common struct") is one class whose
        # fields are the same wherever it appears.
        done: set[type[Message]] = set()

        def define(cls: type[Message], specs: list[FieldSpec]) -> None:
            if cls in done:
                return
            done.add(cls)
            cls._field_names = tuple(s.name for s in specs)
            cls._field_set = frozenset(cls._field_names)
            cls._mutable = {}
            for s in specs:
                default, kind, factory = _default_kind(s, self.classes)
                if kind == _codec.DEFAULT_VALUE:
                    setattr(cls, s.name, default)
                else:
                    cls._mutable[s.name] = factory
            for s in specs:
                if s.fields is not None and s.struct_name is not None:
                    define(self.classes[s.struct_name], s.fields)

        define(top, self.fields)
        return top

    def program(self, version: int) -> StructProgram:
        prog = self._programs.get(version)
        if prog is None:
            if not self.api.min_version <= version <= self.api.max_version:
                raise errors.UnsupportedVersionException(
                    f"{self.name} version {version} is not in "
                    f"{self.api.min_version}-{self.api.max_version}"
                )
            prog = self._compile(self.cls, self.fields, version, self.api.is_flexible(version), {})
            self._programs[version] = prog
        return prog

    def _compile(
        self,
        cls: type[Message],
        specs: list[FieldSpec],
        version: int,
        flexible: bool,
        memo: dict[type[Message], StructProgram],
    ) -> StructProgram:
        prog = memo.get(cls)
        if prog is not None:
            return prog
        prog = StructProgram(cls, flexible)
        memo[cls] = prog
        ops, tagged, absent = [], [], []
        for spec in specs:
            is_tagged = flexible and spec.tag is not None and version in spec.tagged
            present = version in spec.versions and (spec.tag is None or is_tagged)
            element = spec.element_type
            sub = None
            if spec.fields is not None and spec.struct_name is not None and present:
                sub = self._compile(
                    self.classes[spec.struct_name], spec.fields, version, flexible, memo
                )
            if spec.is_array:
                kind = _codec.KIND_ARRAY
                elem_kind = _codec.KIND_STRUCT if spec.struct_name else _PRIMITIVE_KINDS[element]
            elif spec.struct_name is not None:
                kind, elem_kind = _codec.KIND_STRUCT, 0
            else:
                kind, elem_kind = _PRIMITIVE_KINDS[element], 0
            default, default_kind, factory = _default_kind(spec, self.classes)
            op = FieldOp(
                sys.intern(spec.name),
                kind,
                elem_kind,
                version in spec.nullable,
                flexible and not spec.flexible_never,
                sub,
                spec.tag if spec.tag is not None else -1,
                default,
                default_kind,
                spec.ignorable,
                factory,
            )
            if is_tagged:
                tagged.append(op)
            elif present:
                ops.append(op)
            else:
                absent.append(op)
        tagged.sort(key=lambda op: op.tag)
        prog.set_fields(tuple(ops), tuple(tagged), tuple(absent))
        return prog


@dataclass
class ApiSchema:
    api: ApiKey
    request: MessageSchema
    response: MessageSchema
    extra: dict[str, Any] = dataclass_field(default_factory=dict)


_SCHEMAS: dict[int, ApiSchema] = {}


def schema(key: int | str) -> ApiSchema:
    """The parsed schema of an API (by key or name), loaded on first use."""
    api = api_key(key)
    found = _SCHEMAS.get(api.key)
    if found is None:
        module = importlib.import_module(f"kfast.protocol.messages.{api.module}")
        found = ApiSchema(
            api,
            MessageSchema(api, "Request", module.REQUEST),
            MessageSchema(api, "Response", module.RESPONSE),
        )
        _SCHEMAS[api.key] = found
    return found
