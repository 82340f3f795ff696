"""In-process kfast brokers for tests.

    from kfast.testing import KfastBroker

    with KfastBroker() as broker:                 # a free port, a temporary data dir
        producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers)

The broker runs on its own event loop (uvloop) in a background thread, so
synchronous tests and asyncio tests (any loop) use it the same way: over
TCP at ``bootstrap_servers``. The pytest plugin (``kfast.testing.plugin``)
wraps this in the ``kfast_broker`` fixture.
"""

from kfast.testing.broker import KfastBroker

__all__ = ["KfastBroker"]
