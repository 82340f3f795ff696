"""produce_fast: which answers need the generic encoder for KIP-951's
leader hint (a NOT_LEADER_OR_FOLLOWER partition, Produce v10+)."""

from __future__ import annotations

from kfast._ext.produce_codec import PartitionResult
from kfast.protocol import errors
from kfast.server.produce_fast import _any_not_leader


def _result(index: int, error_code: int) -> PartitionResult:
    result = PartitionResult(index)
    result.error_code = error_code
    return result


def test_only_a_not_leader_partition_needs_the_hint() -> None:
    ok = [("a", [_result(0, 0), _result(1, errors.RecordTooLargeException.code)])]
    assert not _any_not_leader(ok)
    assert not _any_not_leader([])
    late = ok + [("b", [_result(0, 0), _result(1, errors.NotLeaderOrFollowerException.code)])]
    assert _any_not_leader(late)
