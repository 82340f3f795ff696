"""Server-side assignors: every partition of a subscribed topic exactly once,
balanced, and (uniform) sticky."""

import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kfast.coordinator.group.assignors import range_, uniform

T1, T2 = uuid.UUID(int=1), uuid.UUID(int=2)


def flatten(assignment):
    return sorted((t, p) for parts in assignment.values() for t, ps in parts.items() for p in ps)


def counts(assignment):
    return [sum(len(ps) for ps in parts.values()) for parts in assignment.values()]


members_st = st.lists(
    st.text("abcdef", min_size=1, max_size=4), min_size=1, max_size=12, unique=True
)
topics_st = st.dictionaries(
    st.sampled_from([T1, T2, uuid.UUID(int=3)]), st.integers(0, 40), min_size=1
)


@given(members_st, topics_st)
def test_uniform_homogeneous_exactly_once_and_balanced(members, topics):
    subs = {m: set(topics) for m in members}
    result = uniform(subs, topics, {})
    assert flatten(result) == sorted((t, p) for t, n in topics.items() for p in range(n))
    assert max(counts(result)) - min(counts(result)) <= 1


@pytest.mark.slow
@given(members_st, topics_st, st.data())
def test_uniform_stays_balanced_and_sticky_after_membership_change(members, topics, data):
    subs = {m: set(topics) for m in members}
    before = uniform(subs, topics, {})
    survivors = data.draw(st.lists(st.sampled_from(members), min_size=1, unique=True))
    newcomers = data.draw(st.lists(st.text("xyz", min_size=1, max_size=3), max_size=3, unique=True))
    after_subs = {m: set(topics) for m in survivors + newcomers}
    after = uniform(after_subs, topics, before)
    assert flatten(after) == sorted((t, p) for t, n in topics.items() for p in range(n))
    assert max(counts(after)) - min(counts(after)) <= 1
    # A survivor keeps what it had, up to its new fair share.
    total = sum(topics.values())
    share = total // len(after_subs)
    for m in survivors:
        kept = set(flatten({m: after[m]})) & set(flatten({m: before[m]}))
        assert len(kept) >= min(share, len(flatten({m: before[m]})))


@pytest.mark.slow
@given(members_st, topics_st, st.data())
def test_uniform_heterogeneous_only_to_subscribers(members, topics, data):
    subs = {
        m: set(data.draw(st.lists(st.sampled_from(sorted(topics)), unique=True))) for m in members
    }
    result = uniform(subs, topics, {})
    wanted = sorted(
        (t, p) for t, n in topics.items() if any(t in s for s in subs.values()) for p in range(n)
    )
    assert flatten(result) == wanted
    for m, parts in result.items():
        assert set(parts) <= subs[m]


@given(members_st, topics_st)
def test_range_per_topic_contiguous_and_balanced(members, topics):
    subs = {m: set(topics) for m in members}
    result = range_(subs, topics, {})
    assert flatten(result) == sorted((t, p) for t, n in topics.items() for p in range(n))
    for topic, _n in topics.items():
        sizes = [len(parts.get(topic, ())) for parts in result.values()]
        assert max(sizes) - min(sizes) <= 1
        for parts in result.values():
            ps = sorted(parts.get(topic, ()))
            assert ps == list(range(ps[0], ps[0] + len(ps))) if ps else True


def test_range_example():
    assert range_({"a": {T1}, "b": {T1}}, {T1: 5}, {}) == {"a": {T1: {0, 1, 2}}, "b": {T1: {3, 4}}}
