"""A failed fsync of the metadata log halts the node, as Kafka's Raft thread
does: the embedded single node's broker reports the failure (``failed``,
which makes ``kfast serve`` exit 1), and the metadata write the fsync was
for is never acknowledged to the client."""

from __future__ import annotations

import asyncio

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from kfast.testing import KfastBroker
from kfast.tools.serve import _failed_event

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(60)]


def test_a_failed_metadata_fsync_halts_the_broker_and_acknowledges_nothing():
    with KfastBroker() as kb:
        broker = kb.broker
        assert broker is not None and _failed_event(broker) is broker.failed
        admin = AdminClient({"bootstrap.servers": kb.bootstrap_servers})
        admin.create_topics([NewTopic("before", 1, 1)])["before"].result(15)

        log = broker.controller.server.raft_manager.client.log

        def failing_flush(offset=None):
            raise OSError(5, "Input/output error")

        kb.call_soon(setattr, log, "flush", failing_flush)
        created = admin.create_topics([NewTopic("after", 1, 1)], request_timeout=2)["after"]
        kb.call(asyncio.wait_for(broker.failed.wait(), 15))
        assert "fsync of the metadata log" in broker.fatal_error
        # The topic's record was appended but never flushed: not committed,
        # so CreateTopics is never answered with success and no broker
        # metadata names the topic.
        with pytest.raises(Exception):  # noqa: B017 -- the client's timeout or error, whichever comes
            created.result(15)
        # (A new client: the first one's connection still holds the
        # unanswered CreateTopics, and a connection is answered in order.)
        topics = AdminClient({"bootstrap.servers": kb.bootstrap_servers}).list_topics(timeout=10)
        assert "before" in topics.topics and "after" not in topics.topics
