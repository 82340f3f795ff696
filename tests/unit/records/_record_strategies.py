"""Hypothesis strategies and helpers shared by the record-batch tests."""

from hypothesis import strategies as st

CODECS = [0, 1, 2, 3, 4]

payloads = st.one_of(
    st.none(),
    st.just(b""),
    st.binary(max_size=64),
    st.binary(min_size=1, max_size=8).map(lambda b: b * 700),  # large, compressible
)
header_values = st.one_of(st.none(), st.just(b""), st.binary(max_size=16))
headers = st.lists(st.tuples(st.text(max_size=8), header_values), max_size=3)


@st.composite
def record_lists(draw, max_records=12):
    base_ts = draw(st.integers(0, 2**41))
    n = draw(st.integers(1, max_records))
    records = []
    for _ in range(n):
        records.append(
            (
                base_ts + draw(st.integers(-(10**6), 10**9)),
                draw(payloads),
                draw(payloads),
                draw(headers),
            )
        )
    return records


producer_fields = st.fixed_dictionaries(
    {
        "producer_id": st.integers(-1, 2**50),
        "producer_epoch": st.integers(-1, 2**15 - 1),
        "base_sequence": st.integers(-1, 2**31 - 1),
        "is_transactional": st.booleans(),
        "is_control": st.booleans(),
        "base_offset": st.integers(0, 2**50),
        "partition_leader_epoch": st.integers(-1, 2**31 - 1),
    }
)
