"""ApiVersions v3+ advertises feature ranges from the controller's feature
control (what UpdateFeatures accepts) and the finalized levels from the image."""
import pytest

from kfast.client.connection import BlockingConnection
from kfast.protocol import ApiVersionsRequest

pytestmark = pytest.mark.e2e


def _api_versions(broker, version: int):
    host, port = broker.bootstrap_servers.rsplit(":", 1)
    connection = BlockingConnection(host, int(port))
    try:
        return connection.send(ApiVersionsRequest(client_software_name="kfast-test",
                                                  client_software_version="1"),
                               api_key=18, version=version)
    finally:
        connection.close()


def test_api_versions_features_match_the_controller(broker):
    response = _api_versions(broker, 4)
    supported = {f.name: (f.min_version, f.max_version) for f in response.supported_features}
    finalized = {f.name: f.max_version_level for f in response.finalized_features}
    expected = broker.call_soon(lambda: broker.broker.supported_features())
    assert supported == expected
    low, high = supported["metadata.version"]
    assert low > 0 and low <= finalized["metadata.version"] <= high
    # transaction.version: 0-2, a new cluster at 2 (KIP-890 part 2).
    assert supported["transaction.version"] == (0, 2)
    assert finalized["transaction.version"] == 2


def test_api_versions_below_v4_report_a_minimum_of_zero_as_one(broker):
    """KAFKA-17011: Java clients before 3.9 reject a supported minimum of 0."""
    response = _api_versions(broker, 3)
    supported = {f.name: (f.min_version, f.max_version) for f in response.supported_features}
    assert supported["transaction.version"] == (1, 2)
    assert supported["metadata.version"] == (21, 21)
