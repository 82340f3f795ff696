"""kafka-python 3 as an independent oracle.

kafka-python ships Kafka's message definitions (JSON) and its own codec.
1. Schema facts: for every API/version those definitions cover, kfast's field
   names, types, nullability and tags match, as do the newest version and the
   first flexible version.
2. Bytes: a message encoded by kfast decodes in kafka-python, kafka-python
   re-encodes it to the same bytes, and kfast decodes those bytes back to the
   same values.
"""

import importlib
import json
import os
import pkgutil
import re

import kafka
import kafka.protocol
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from kafka.protocol.api_message import ApiMessage

from kfast._ext import protocol_codec as codec
from kfast.protocol import api_keys
from kfast.protocol.schema import schema

from ..hypothesis_budget import examples
from .protocol_strategies import message

RESOURCES = os.path.join(os.path.dirname(kafka.__file__), "protocol", "schemas", "resources")


def _load(path):
    with open(path) as f:
        text = re.sub(r"^\s*//.*$", "", f.read(), flags=re.M)
    return json.loads(text)


def _messages():
    out = {}
    for name in sorted(os.listdir(RESOURCES)):
        if not name.endswith(".json"):
            continue
        doc = _load(os.path.join(RESOURCES, name))
        if doc.get("type") in ("request", "response") and doc.get("apiKey") in api_keys.BY_KEY:
            out[(doc["apiKey"], doc["type"])] = doc
    return out


MESSAGES = _messages()


def _range(text, top):
    if text is None or text == "none":
        return set()
    if text.endswith("+"):
        return set(range(int(text[:-1]), top + 1))
    if "-" in text:
        lo, hi = text.split("-")
        return set(range(int(lo), int(hi) + 1))
    return {int(text)}


def _snake(name):
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", name).lower()


def _kp_fields(fields, version, flexible, commons, top, path=""):
    """[(path, type, nullable, tag)] of the fields Kafka's JSON puts in a version."""
    out = []
    for f in fields:
        tag = f.get("tag")
        in_version = version in _range(f["versions"], top)
        if tag is not None:
            in_version = in_version and flexible and version in _range(f.get("taggedVersions"), top)
        if not in_version:
            continue
        name = path + _snake(f["name"])
        out.append((name, f["type"], version in _range(f.get("nullableVersions"), top), tag))
        base = f["type"][2:] if f["type"].startswith("[]") else f["type"]
        sub = f.get("fields") or commons.get(base)
        if sub:
            out.extend(_kp_fields(sub, version, flexible, commons, top, name + "."))
    return out


def _kfast_fields(specs, version, flexible, path=""):
    out = []
    for s in specs:
        if s.tag is not None:
            present = flexible and version in s.tagged and version in s.versions
        else:
            present = version in s.versions
        if not present:
            continue
        name = path + s.name
        out.append((name, s.type, version in s.nullable, s.tag))
        if s.fields:
            out.extend(_kfast_fields(s.fields, version, flexible, name + "."))
    return out


# kafka-python's definitions may be newer than the Kafka release kfast serves
# (3.0.12 ships DescribeLogDirs v5, Kafka 4.3's): versions past kfast's table
# are not kfast's to match; test_api_keys_kafka_4_2 pins the table itself.
SCHEMA_CASES = [
    (key, kind, v)
    for (key, kind), doc in MESSAGES.items()
    for v in sorted(_range(doc["validVersions"], 99))
    if v <= api_keys.BY_KEY[key].max_version
]


@pytest.mark.parametrize("key,kind,version", SCHEMA_CASES)
def test_schema_matches_kafkas_definition(key, kind, version):
    doc = MESSAGES[(key, kind)]
    top = max(_range(doc["validVersions"], 99))
    api = api_keys.BY_KEY[key]
    flexible = version in _range(doc.get("flexibleVersions"), top)
    assert api.is_flexible(version) == flexible
    commons = {c["name"]: c["fields"] for c in doc.get("commonStructs", [])}
    expected = _kp_fields(doc["fields"], version, flexible, commons, top)
    ms = getattr(schema(key), kind)
    assert _kfast_fields(ms.fields, version, flexible) == expected


@pytest.mark.parametrize("key", sorted({k for k, _ in MESSAGES}))
def test_version_range_covers_kafkas(key):
    api = api_keys.BY_KEY[key]
    versions = _range(MESSAGES[(key, "request")]["validVersions"], 99)
    assert api.max_version <= max(versions)
    assert api.min_version <= min(versions)


def _kp_classes():
    for mod in pkgutil.walk_packages(kafka.protocol.__path__, "kafka.protocol."):
        try:
            importlib.import_module(mod.name)
        except Exception:  # optional extras of kafka-python we do not need
            continue
    found = {}
    stack = list(ApiMessage.__subclasses__())
    while stack:
        cls = stack.pop()
        stack.extend(cls.__subclasses__())
        if getattr(cls, "_class_version", 1) is None and getattr(cls, "_json", None):
            found[(cls.API_KEY, cls.type)] = cls
    return found


KP_CLASSES = _kp_classes()
BYTE_CASES = [
    (key, kind, v)
    for (key, kind), cls in sorted(KP_CLASSES.items())
    if key in api_keys.BY_KEY and (key, kind) in MESSAGES
    for v in sorted(_range(MESSAGES[(key, kind)]["validVersions"], 99))
    if v <= api_keys.BY_KEY[key].max_version
]


@pytest.mark.parametrize("key,kind,version", BYTE_CASES)
def test_bytes_agree_with_kafka_python(key, kind, version):
    kp_cls = KP_CLASSES[(key, kind)]
    ms = getattr(schema(key), kind)
    program = ms.program(version)

    @settings(
        max_examples=examples(3),
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
        phases=(Phase.explicit, Phase.generate),
    )
    @given(message(ms, version))
    def check(value):
        if (key, kind) == (18, "response"):
            # kafka-python (as a client should, KIP-511) reads an ApiVersions
            # response with an error as v0; kfast's v0 fallback is tested by hand.
            value.error_code = 0
        ours = codec.encode(program, value)
        # ApiMessage.encode: the generic codec, past kafka-python's
        # convenience overrides (e.g. DeleteTopicsRequest's topic_names shim).
        theirs = ApiMessage.encode(kp_cls.decode(ours, version=version))
        assert bytes(theirs) == ours
        back, end = codec.decode(program, bytes(theirs))
        assert end == len(ours)
        assert back.to_dict() == value.to_dict()

    check()
