"""Suite-wide test settings.

Hypothesis: no per-example deadline (2-core CI machines stall under load and
a deadline there measures the machine, not kfast). KFAST_HYPOTHESIS_PROFILE=
thorough raises the example count for local fuzzing sessions.
"""
import os

from hypothesis import HealthCheck, settings

settings.register_profile(
    "default", deadline=None, max_examples=100,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile(
    "thorough", deadline=None, max_examples=2000,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile(os.environ.get("KFAST_HYPOTHESIS_PROFILE", "default"))
