"""kfast._ext.crc32c against the crc32c package, on every implementation path.

Paths (crc32c_impl.h): 'software' (slicing-by-8), 'hardware' (crc32
instruction, three streams), 'pclmul' and 'vpclmul' (carry-less-multiply
folding fused with three crc32 streams; x86-64 only). Every test that takes
the ``path`` fixture runs once per path this CPU supports.
"""

import os
import random

import crc32c as reference
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kfast._ext import crc32c as kcrc

ALL_PATHS = ["software", "hardware", "pclmul", "vpclmul"]
PATHS = kcrc.available_implementations()


@pytest.fixture(params=PATHS)
def path(request):
    kcrc._force_implementation(request.param)
    assert kcrc.implementation() == request.param
    yield request.param
    kcrc._force_implementation("auto")


def test_available_paths_are_known_and_ordered():
    assert PATHS[0] == "software"
    assert PATHS == [p for p in ALL_PATHS if p in PATHS]
    assert kcrc.hardware_available() == ("hardware" in PATHS)
    # The folding paths finish with (and hand short inputs to) crc32.
    if "pclmul" in PATHS or "vpclmul" in PATHS:
        assert "hardware" in PATHS


def test_auto_picks_the_fastest_available():
    kcrc._force_implementation("software")
    kcrc._force_implementation("auto")
    assert kcrc.implementation() == PATHS[-1]


@pytest.mark.skipif(PATHS == ALL_PATHS, reason="this CPU supports every path")
def test_forcing_an_unsupported_path_raises():
    missing = [p for p in ALL_PATHS if p not in PATHS][0]
    with pytest.raises(RuntimeError):
        kcrc._force_implementation(missing)
    assert kcrc.implementation() == PATHS[-1]


def test_known_vectors(path):
    assert kcrc.crc32c(b"") == 0
    assert kcrc.crc32c(b"123456789") == 0xE3069283  # the CRC-32C check value
    assert kcrc.crc32c(bytes(32)) == 0x8A9136AA  # RFC 3720 B.4
    assert kcrc.crc32c(b"\xff" * 32) == 0x62A8AB43
    assert kcrc.crc32c(bytes(1 << 20)) == reference.crc32c(bytes(1 << 20))


# Sizes around every boundary: the interleaved crc32 loop (3 x 256, 3 x 8192);
# the fold threshold (256) and its 64/128-byte steps and 16/32-byte remainders;
# the fused blocks (xmm 64 x (3 x 40 + 64) = 11776, ymm 64 x (3 x 40 + 128) =
# 15872) alone, twice, and with every kind of tail; a 16 KiB batch's CRC span
# (16384 - 21) and 1 MiB.
FUSED_XMM = 64 * (3 * 40 + 64)
FUSED_YMM = 64 * (3 * 40 + 128)
SIZES = sorted(
    {
        0,
        1,
        7,
        8,
        9,
        15,
        16,
        255,
        256,
        257,
        271,
        272,
        287,
        288,
        319,
        320,
        383,
        384,
        385,
        767,
        768,
        769,
        1536,
        24575,
        24576,
        24577,
        49152 + 768 + 13,
        300_001,
        FUSED_XMM - 1,
        FUSED_XMM,
        FUSED_XMM + 1,
        FUSED_XMM + 255,
        FUSED_XMM + 256,
        2 * FUSED_XMM,
        2 * FUSED_XMM + 300,
        FUSED_YMM - 1,
        FUSED_YMM,
        FUSED_YMM + 1,
        FUSED_YMM + 31,
        FUSED_YMM + 255,
        FUSED_YMM + 256,
        FUSED_YMM + 257,
        2 * FUSED_YMM,
        2 * FUSED_YMM + 129,
        16384 - 21,
        16384,
        1 << 20,
        (1 << 20) + 61,
    }
)


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("start", [0, 1, 3, 7, 8, 15, 31])
def test_matches_reference_at_block_boundaries(path, size, start):
    data = os.urandom(size + start)
    view = memoryview(data)[start:]
    assert kcrc.crc32c(view) == reference.crc32c(bytes(view))
    assert kcrc.crc32c(view, 0xDEADBEEF) == reference.crc32c(bytes(view), 0xDEADBEEF)


@given(data=st.binary(max_size=4000), split=st.integers(0, 4000), seed=st.integers(0, 2**32 - 1))
def test_chaining_and_random_data(data, split, seed):
    for p in PATHS:
        kcrc._force_implementation(p)
        try:
            split_at = split % (len(data) + 1)
            assert kcrc.crc32c(data) == reference.crc32c(data)
            assert kcrc.crc32c(data[split_at:], kcrc.crc32c(data[:split_at])) == reference.crc32c(
                data
            )
            assert kcrc.crc32c(data, seed) == reference.crc32c(data, seed)
        finally:
            kcrc._force_implementation("auto")


# One shared random buffer; hypothesis picks lengths, alignments and split
# points (generating 100k-byte binaries through hypothesis would be slow, and
# the content is not what the folding paths are sensitive to; positions are).
BUFFER = random.Random(4).randbytes(100_000 + 64)


@settings(max_examples=60, deadline=None)
@given(
    length=st.integers(0, 100_000),
    offset=st.integers(0, 63),
    seed=st.integers(0, 2**32 - 1),
    cuts=st.lists(st.integers(0, 100_000), max_size=4),
)
def test_every_path_matches_reference_for_long_unaligned_chained_input(length, offset, seed, cuts):
    view = memoryview(BUFFER)[offset : offset + length]
    expected = reference.crc32c(bytes(view), seed)
    points = sorted({c % (length + 1) for c in cuts} | {0, length})
    for p in PATHS:
        kcrc._force_implementation(p)
        try:
            assert kcrc.crc32c(view, seed) == expected
            crc = seed
            for begin, end in zip(points, points[1:]):
                crc = kcrc.crc32c(view[begin:end], crc)
            assert crc == expected
        finally:
            kcrc._force_implementation("auto")


@settings(max_examples=30, deadline=None)
@given(
    length=st.integers(0, 100_000),
    split=st.integers(0, 100_000),
    first=st.sampled_from(PATHS),
    second=st.sampled_from(PATHS),
)
def test_paths_continue_each_others_crc(length, split, first, second):
    """All paths keep the same (finalised) register, so a CRC begun on one
    continues on another."""
    data = BUFFER[:length]
    split %= length + 1
    try:
        kcrc._force_implementation(first)
        crc = kcrc.crc32c(data[:split])
        kcrc._force_implementation(second)
        assert kcrc.crc32c(data[split:], crc) == reference.crc32c(data)
    finally:
        kcrc._force_implementation("auto")


def test_accepts_any_buffer(path):
    data = os.urandom(20000)
    expected = reference.crc32c(data)
    assert kcrc.crc32c(bytearray(data)) == expected
    assert kcrc.crc32c(memoryview(data)) == expected
    import array

    arr = array.array("B", data)
    assert kcrc.crc32c(arr) == expected
    with pytest.raises(TypeError):
        kcrc.crc32c("not bytes")


def test_unknown_implementation_name():
    with pytest.raises(ValueError):
        kcrc._force_implementation("quantum")
    assert kcrc.implementation() == PATHS[-1]


@pytest.mark.parametrize("flip_at", [100, 20_000, 600_000])
def test_kernels_cimporting_crc32c_update_follow_the_forced_path(path, flip_at):
    """The batch kernel checks CRCs through crc32c_update (crc32c.pxd), so it
    runs whichever path is selected; a single flipped bit in a ~1 MiB batch
    (inside the fused blocks and in the tail) is caught on every path."""
    from kfast.protocol.errors import CorruptRecordException
    from kfast.records import RecordBatch, RecordBatchBuilder

    builder = RecordBatchBuilder(0)
    value = random.Random(9).randbytes(1000)
    for i in range(1000):
        builder.append(1000 + i, None, value)
    data = bytearray(builder.build())
    RecordBatch(data).validate()
    data[flip_at] ^= 0x10
    with pytest.raises(CorruptRecordException, match="crc"):
        RecordBatch(data).validate()
