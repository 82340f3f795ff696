"""Suite-wide test settings.

Hypothesis: no per-example deadline (2-core CI machines stall under load and
a deadline there measures the machine, not kfast). KFAST_HYPOTHESIS_PROFILE=
thorough raises the example count for local fuzzing sessions; =fast (set by
`make test-fast`) halves it, `make test` keeps the full count.

pytest-xdist (`make test` runs ``-n 3 --dist loadgroup``): most of the
suite's time is spent waiting on brokers, clients and cluster timeouts, not
computing, so three workers on two cores finish sooner. Each test module is
one xdist group, kept on one worker, so a module-scoped broker starts once;
all of tests/spark is one group, so one worker runs the one SparkSession.
"""

import os

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile(
    "default",
    deadline=None,
    max_examples=100,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile(
    "thorough",
    deadline=None,
    max_examples=2000,
    suppress_health_check=[HealthCheck.too_slow],
)
# `make test-fast`: half the examples of tests on the profile's count, and of
# those that set their own through tests/unit/hypothesis_budget.examples().
settings.register_profile(
    "fast",
    deadline=None,
    max_examples=50,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile(os.environ.get("KFAST_HYPOTHESIS_PROFILE", "default"))


def xdist_group_of(nodeid: str) -> str:
    """The xdist group of a test: its module, or "spark" for tests/spark."""
    module = nodeid.split("::", 1)[0]
    return "spark" if module.startswith("tests/spark/") else module


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    if not config.pluginmanager.hasplugin("xdist"):
        return
    for item in items:
        item.add_marker(pytest.mark.xdist_group(xdist_group_of(item.nodeid)))
