"""`make bench-check`'s verdict (bench/ratio_check.py) on synthetic reports.

The benchmark run itself is not part of the suite (machines are noisy); this
tests only the arithmetic: --benchmark-json report in, ratios, verdict out.
"""

import importlib.util
import json
import pathlib
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def ratio_check():
    # bench/ is a folder of scripts, not a package: load the module by path.
    spec = importlib.util.spec_from_file_location("ratio_check", ROOT / "bench" / "ratio_check.py")
    module = importlib.util.module_from_spec(spec)
    # dataclasses look their module up in sys.modules while the class is built.
    sys.modules["ratio_check"] = module
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        del sys.modules["ratio_check"]


def _report(kernels, minima):
    """A --benchmark-json report: {"benchmarks": [{"fullname", "stats": {"min"}}]}."""
    benchmarks = []
    for kernel, (kfast_min, peer_min) in zip(kernels, minima, strict=True):
        benchmarks.append({"fullname": kernel.kfast, "stats": {"min": kfast_min}})
        benchmarks.append({"fullname": kernel.peer, "stats": {"min": peer_min}})
    return {"benchmarks": benchmarks}


def test_ratio_is_peer_time_over_kfast_time(ratio_check):
    decode, build = ratio_check.KERNELS[:2]
    measured = ratio_check.ratios(_report([decode, build], [(1.0, 2.0), (0.5, 2.0)]))
    assert measured == {decode.name: 2.0, build.name: 4.0}


def test_a_drop_of_25_percent_fails_and_names_the_kernel(ratio_check):
    verdict = ratio_check.compare(
        {"batch_decode": 2.0, "crc32c_1mib": 1.0}, {"batch_decode": 1.5, "crc32c_1mib": 1.0}
    )
    assert not verdict.ok
    assert verdict.dropped == {"batch_decode": (2.0, 1.5)}


def test_a_drop_of_15_percent_passes(ratio_check):
    verdict = ratio_check.compare({"batch_decode": 2.0}, {"batch_decode": 1.7})
    assert verdict.ok and not verdict.dropped


def test_a_rise_passes(ratio_check):
    assert ratio_check.compare({"batch_decode": 2.0}, {"batch_decode": 9.0}).ok


def test_a_recorded_kernel_missing_from_the_run_fails(ratio_check):
    # Only the kfast side of index_lookup ran (its peer failed): no ratio.
    lookup = next(k for k in ratio_check.KERNELS if k.name == "index_lookup")
    report = {"benchmarks": [{"fullname": lookup.kfast, "stats": {"min": 1.0}}]}
    measured = ratio_check.ratios(report)
    verdict = ratio_check.compare({"index_lookup": 8.0}, measured)
    assert not verdict.ok
    assert verdict.missing == ["index_lookup"]
    lines = ratio_check.report_lines({"index_lookup": 8.0}, measured, verdict)
    assert any(line.startswith("index_lookup") and "FAIL" in line for line in lines)


def test_an_unrecorded_kernel_is_reported_and_does_not_fail(ratio_check):
    verdict = ratio_check.compare({}, {"timer_expire": 8.0})
    assert verdict.ok
    assert verdict.unrecorded == ["timer_expire"]


def test_the_median_of_the_passes_is_compared(ratio_check):
    # One pass disturbed by load (0.5) does not fail the check on its own.
    passes = [{"batch_decode": 1.9}, {"batch_decode": 0.5}, {"batch_decode": 1.8}]
    measured = ratio_check.median_ratios(passes)
    assert measured == {"batch_decode": 1.8}
    assert ratio_check.compare({"batch_decode": 2.0}, measured).ok


def test_the_recorded_baseline_covers_every_kernel(ratio_check):
    # bench/ratios.json is what `make bench-check` compares with; a kernel
    # added to KERNELS without re-recording would never be guarded.
    baseline = ratio_check.load_baseline()
    assert set(baseline) == {k.name for k in ratio_check.KERNELS}
    assert all(ratio > 0 for ratio in baseline.values())


def test_write_then_load_round_trips(ratio_check, tmp_path):
    measured = {k.name: float(i + 1) for i, k in enumerate(ratio_check.KERNELS)}
    path = tmp_path / "ratios.json"
    ratio_check.write_baseline(measured, "make bench-check-record", str(path))
    assert ratio_check.load_baseline(str(path)) == measured
    recorded = json.loads(path.read_text())
    assert recorded["command"] == "make bench-check-record"
    assert recorded["kernels"][0].keys() >= {"kernel", "kfast", "peer", "ratio"}


def _fake_passes(results):
    """run_pass for measure_and_compare: the next pass's ratios, recording
    which kernels each pass was asked for."""
    asked = []

    def run_pass(kernels):
        asked.append([k.name for k in kernels])
        return {name: ratio for name, ratio in results.pop(0).items() if name in asked[-1]}

    return run_pass, asked


def test_a_drop_in_the_first_passes_is_remeasured_before_failing(ratio_check):
    baseline = {"batch_decode": 2.0, "batch_build": 3.0}
    steady = {"batch_build": 3.0}
    results = [
        {"batch_decode": 1.5, **steady},
        {"batch_decode": 1.5, **steady},
        {"batch_decode": 2.0, **steady},
        {"batch_decode": 2.0},
        {"batch_decode": 2.1},
    ]
    run_pass, asked = _fake_passes(results)
    measured, verdict = ratio_check.measure_and_compare(baseline, run_pass)
    # Only the kernel that fell ran again; the median of its five passes is 2.0.
    assert asked[3:] == [["batch_decode"], ["batch_decode"]]
    assert measured["batch_decode"] == 2.0 and verdict.ok


def test_a_drop_that_persists_fails(ratio_check):
    run_pass, asked = _fake_passes([{"batch_decode": 1.5}] * 5)
    measured, verdict = ratio_check.measure_and_compare({"batch_decode": 2.0}, run_pass)
    assert len(asked) == 5
    assert verdict.dropped == {"batch_decode": (2.0, 1.5)}


def test_no_drop_runs_no_extra_pass(ratio_check):
    run_pass, asked = _fake_passes([{"batch_decode": 2.0}] * 3)
    _, verdict = ratio_check.measure_and_compare({"batch_decode": 2.0}, run_pass)
    assert verdict.ok and len(asked) == ratio_check.PASSES
