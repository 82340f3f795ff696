"""kfast._ext.crc32c against the crc32c package, on every implementation path."""
import os

import crc32c as reference
import pytest
from hypothesis import given, strategies as st

from kfast._ext import crc32c as kcrc

PATHS = ["software"] + (["hardware"] if kcrc.hardware_available() else [])


@pytest.fixture(params=PATHS)
def path(request):
    kcrc._force_implementation(request.param)
    assert kcrc.implementation() == request.param
    yield request.param
    kcrc._force_implementation("auto")


def test_auto_prefers_hardware():
    kcrc._force_implementation("auto")
    assert kcrc.implementation() == ("hardware" if kcrc.hardware_available() else "software")


def test_known_vectors(path):
    assert kcrc.crc32c(b"") == 0
    assert kcrc.crc32c(b"123456789") == 0xE3069283       # the CRC-32C check value
    assert kcrc.crc32c(bytes(32)) == 0x8A9136AA            # RFC 3720 B.4
    assert kcrc.crc32c(b"\xff" * 32) == 0x62A8AB43


# Sizes around every boundary of the interleaved loop (3 x 256, 3 x 8192) and
# odd alignments of the start.
SIZES = [0, 1, 7, 8, 9, 15, 16, 255, 767, 768, 769, 1536, 24575, 24576, 24577,
         49152 + 768 + 13, 300_001]


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("start", [0, 1, 3, 7])
def test_matches_reference_at_block_boundaries(path, size, start):
    data = os.urandom(size + start)
    view = memoryview(data)[start:]
    assert kcrc.crc32c(view) == reference.crc32c(bytes(view))


@given(data=st.binary(max_size=4000), split=st.integers(0, 4000), seed=st.integers(0, 2**32 - 1))
def test_chaining_and_random_data(data, split, seed):
    for p in PATHS:
        kcrc._force_implementation(p)
        try:
            split_at = split % (len(data) + 1)
            assert kcrc.crc32c(data) == reference.crc32c(data)
            assert kcrc.crc32c(data[split_at:], kcrc.crc32c(data[:split_at])) == reference.crc32c(data)
            assert kcrc.crc32c(data, seed) == reference.crc32c(data, seed)
        finally:
            kcrc._force_implementation("auto")


def test_accepts_any_buffer(path):
    data = os.urandom(1000)
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
