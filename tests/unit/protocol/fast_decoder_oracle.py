"""The generic decoder as the oracle of a fast one (produce_codec,
fetch_codec) on malformed input."""

from __future__ import annotations

from collections.abc import Callable

from kfast.protocol import errors


def assert_agrees_on(generic: Callable[[], object], fast: Callable[[], object | None]) -> None:
    """The same values or both INVALID_REQUEST (MalformedRequestException),
    unless the fast decoder gives None: the generic codec decides (what the
    fast one leaves to it, tagged fields or a null topic name)."""
    try:
        expected: object = generic()
    except errors.MalformedRequestException as exc:
        expected = exc
    try:
        got = fast()
    except errors.MalformedRequestException as exc:
        got = exc
    if got is None:
        return
    if isinstance(got, Exception):
        assert isinstance(expected, errors.MalformedRequestException)
    else:
        assert got == expected
