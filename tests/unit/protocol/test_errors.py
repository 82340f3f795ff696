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


def test_type_stub_declares_exactly_the_tables_classes():
    # errors.pyi is what mypy reads instead of errors.py (whose classes are
    # made at import time): a row added to the table without its stub class
    # would be an unknown attribute to every typed module, and a stub class
    # without a row would type-check code that fails at run time.
    import ast
    from pathlib import Path

    stub = ast.parse(Path(errors.__file__).with_suffix(".pyi").read_text())
    classes = {
        node.name: [ast.unparse(b) for b in node.bases]
        for node in stub.body
        if isinstance(node, ast.ClassDef)
    }
    generated = {name for name, bases in classes.items() if bases == ["KafkaError"]}
    assert generated == {info.exception_name for info in errors.ERRORS.values()}
    assert classes["MalformedRequestException"] == ["InvalidRequestException"]
    public = {
        n for n in vars(errors) if not n.startswith("_") and n[0].isupper() or n == "for_code"
    }
    declared = set(classes) | {"ERRORS", "for_code"}
    assert public - {"NamedTuple"} == declared
