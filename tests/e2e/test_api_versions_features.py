"""ApiVersions v3+ advertises feature ranges from the controller's feature
control (what UpdateFeatures accepts) and the finalized levels from the image
and the Raft log (kraft.version)."""

import pytest

from kfast.client.connection import BlockingConnection
from kfast.protocol import ApiVersionsRequest

pytestmark = pytest.mark.e2e


def api_versions(address: str, version: int):
    """({feature: (min, max)} supported, {feature: level} finalized)."""
    host, port = address.rsplit(":", 1)
    connection = BlockingConnection(host, int(port))
    try:
        response = connection.send(
            ApiVersionsRequest(client_software_name="kfast-test", client_software_version="1"),
            api_key=18,
            version=version,
        )
    finally:
        connection.close()
    supported = {f.name: (f.min_version, f.max_version) for f in response.supported_features}
    finalized = {f.name: f.max_version_level for f in response.finalized_features}
    return supported, finalized


def test_api_versions_features_match_the_controller(broker):
    supported, finalized = api_versions(broker.bootstrap_servers, 4)
    expected = broker.call_soon(lambda: broker.broker.supported_features())
    assert supported == expected
    low, high = supported["metadata.version"]
    assert low > 0 and low <= finalized["metadata.version"] <= high
    # transaction.version: 0-2, a new cluster at 2 (KIP-890 part 2).
    assert supported["transaction.version"] == (0, 2)
    assert finalized["transaction.version"] == 2


def test_api_versions_below_v4_leave_out_ranges_starting_at_zero(broker):
    """KAFKA-17492 (which replaced KAFKA-17011's minimum of 1): clients
    before 3.9 reject a supported minimum of 0, so below v4 Kafka leaves
    those features out."""
    supported, _ = api_versions(broker.bootstrap_servers, 3)
    assert supported == {"metadata.version": (21, 21)}


def test_kraft_version_is_supported_0_to_1_and_finalized_at_0_on_a_static_quorum(broker):
    """The embedded node is a static quorum of one: kraft.version 0, which
    Kafka lists as supported (v4+) and leaves out of the finalized levels."""
    supported, finalized = api_versions(broker.bootstrap_servers, 4)
    assert supported["kraft.version"] == (0, 1)
    assert "kraft.version" not in finalized and finalized["metadata.version"] == 21
