"""The error table: complete, unique, and consistent with its classes."""

import pytest

from kfast.protocol import errors


def test_every_code_from_minus_one_to_133_is_defined():
    assert set(errors.ERRORS) == set(range(-1, 134))


def test_names_and_classes_are_unique():
    infos = list(errors.ERRORS.values())
    assert len({i.name for i in infos}) == len(infos)
    assert len({i.exception_name for i in infos}) == len(infos)


@pytest.mark.parametrize("code", sorted(errors.ERRORS))
def test_class_matches_row(code):
    info = errors.ERRORS[code]
    cls = getattr(errors, info.exception_name)
    assert errors.for_code(code) is cls
    assert (cls.code, cls.name, cls.retriable) == (code, info.name, info.retriable)
    assert cls().message == info.message


@pytest.mark.parametrize(
    "name,retriable",
    [
        ("NOT_LEADER_OR_FOLLOWER", True),
        ("NOT_COORDINATOR", True),
        ("REQUEST_TIMED_OUT", True),
        ("UNKNOWN_TOPIC_ID", True),
        ("INVALID_REQUEST", False),
        ("TOPIC_AUTHORIZATION_FAILED", False),
        ("THROTTLING_QUOTA_EXCEEDED", True),
        ("SHARE_SESSION_LIMIT_REACHED", True),
    ],
)
def test_retriable_follows_kafkas_exception_hierarchy(name, retriable):
    [info] = [i for i in errors.ERRORS.values() if i.name == name]
    assert info.retriable is retriable


def test_unknown_code_maps_to_unknown_server_error():
    assert errors.for_code(9999) is errors.UnknownServerException


def test_malformed_request_is_an_invalid_request():
    exc = errors.MalformedRequestException("truncated")
    assert isinstance(exc, errors.InvalidRequestException)
    assert exc.code == 42 and exc.message == "truncated"


def test_every_error_is_a_class_statement_mypy_sees():
    # Each error is written as a class statement in errors.py (not made at
    # import time), so mypy checks every ``errors.SomeException`` a module
    # raises or catches; and every class statement naming a code registers it.
    import ast
    from pathlib import Path

    module = ast.parse(Path(errors.__file__).read_text())
    classes = {
        node.name: [ast.unparse(b) for b in node.bases]
        for node in module.body
        if isinstance(node, ast.ClassDef)
    }
    coded = {
        node.name
        for node in module.body
        if isinstance(node, ast.ClassDef) and any(k.arg == "code" for k in node.keywords)
    }
    assert coded == {info.exception_name for info in errors.ERRORS.values()}
    assert all(classes[name] == ["KafkaError"] for name in coded)
    assert classes["MalformedRequestException"] == ["InvalidRequestException"]
    assert not Path(errors.__file__).with_suffix(".pyi").exists()  # it would hide errors.py


def test_unsupported_version_carries_the_request_header():
    # decode_request_body attaches the header so the broker can still answer.
    from kfast import protocol

    header = protocol.RequestHeader(0, 99, 7, "c", 10)
    try:
        protocol.decode_request_body(header, b"")
    except errors.UnsupportedVersionException as exc:
        assert exc.header == header and exc.code == 35
    else:
        raise AssertionError("version 99 of Produce was accepted")
