"""CRC-32C kernel: kfast's implementations vs the crc32c package.

    pytest bench/test_crc32c.py --benchmark-only -k crc32c_1mib
    pytest bench/test_crc32c.py --benchmark-only -k crc32c_16kib

Groups crc32c_1mib and crc32c_16kib: one crc32c() call per round over 1 MiB
(a large produce batch; does not fit this machine's 512 KiB L2) or 16 KiB
(the CRC span of a 16 KiB batch) of random bytes:
  crc32c_<size>_kfast[<path>]   kfast._ext.crc32c forced to each path this CPU
                                supports ('vpclmul', 'pclmul', 'hardware',
                                'software'; implementation() names them)
  crc32c_<size>_kfast_auto      kfast's import-time choice (what the broker runs)
  crc32c_<size>_crc32c_pkg      the crc32c package (the peer)
GB/s (from the fastest round) is in extra_info.
"""

import os

import crc32c as crc32c_pkg
import pytest
from conftest import byte_rate

from kfast._ext import crc32c as kcrc

SIZES = {"1mib": 1 << 20, "16kib": 16 * 1024}
PATHS = kcrc.available_implementations()


@pytest.fixture(scope="module")
def buffers():
    return {name: os.urandom(size) for name, size in SIZES.items()}


@pytest.fixture
def forced(request):
    kcrc._force_implementation(request.param)
    yield request.param
    kcrc._force_implementation("auto")


def _run(benchmark, fn, data):
    result = benchmark(fn, data)
    assert result == crc32c_pkg.crc32c(data)
    byte_rate(benchmark, len(data))


@pytest.mark.benchmark(group="crc32c_1mib")
@pytest.mark.parametrize("forced", PATHS, indirect=True)
def test_crc32c_1mib_kfast(benchmark, buffers, forced):
    _run(benchmark, kcrc.crc32c, buffers["1mib"])


@pytest.mark.benchmark(group="crc32c_1mib")
def test_crc32c_1mib_kfast_auto(benchmark, buffers):
    _run(benchmark, kcrc.crc32c, buffers["1mib"])


@pytest.mark.benchmark(group="crc32c_1mib")
def test_crc32c_1mib_crc32c_pkg(benchmark, buffers):
    _run(benchmark, crc32c_pkg.crc32c, buffers["1mib"])


@pytest.mark.benchmark(group="crc32c_16kib")
@pytest.mark.parametrize("forced", PATHS, indirect=True)
def test_crc32c_16kib_kfast(benchmark, buffers, forced):
    _run(benchmark, kcrc.crc32c, buffers["16kib"])


@pytest.mark.benchmark(group="crc32c_16kib")
def test_crc32c_16kib_kfast_auto(benchmark, buffers):
    _run(benchmark, kcrc.crc32c, buffers["16kib"])


@pytest.mark.benchmark(group="crc32c_16kib")
def test_crc32c_16kib_crc32c_pkg(benchmark, buffers):
    _run(benchmark, crc32c_pkg.crc32c, buffers["16kib"])
