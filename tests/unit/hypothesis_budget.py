"""Example counts for tests that set their own ``max_examples``.

An explicit ``settings(max_examples=n)`` overrides the loaded hypothesis
profile, so the "fast" profile of ``make test-fast`` (tests/conftest.py)
could not shorten the most expensive property tests. ``examples(n)`` is ``n``
under the default profile (``make test`` runs the full count) and ``n``
scaled by the loaded profile's ``max_examples`` when that is smaller; never
more than ``n`` (the "thorough" profile raises only the tests without their
own count) and never fewer than one.
"""

from hypothesis import settings

# max_examples of the "default" profile (tests/conftest.py): the full count.
DEFAULT_MAX_EXAMPLES = 100


def examples(full: int) -> int:
    """``full`` examples, scaled down by the loaded profile."""
    scaled = full * settings.default.max_examples // DEFAULT_MAX_EXAMPLES
    return max(1, min(full, scaled))
