"""ApiVersions v3+ advertises feature ranges from the controller's feature
control (what UpdateFeatures accepts) and the finalized levels from the image."""
import pytest

from kfast.client.connection import BlockingConnection
from kfast.protocol import ApiVersionsRequest

pytestmark = pytest.mark.e2e


def test_api_versions_features_match_the_controller(broker):
    host, port = broker.bootstrap_servers.rsplit(":", 1)
    connection = BlockingConnection(host, int(port))
    try:
        response = connection.send(ApiVersionsRequest(client_software_name="kfast-test",
                                                      client_software_version="1"),
                                   api_key=18, version=3)
    finally:
        connection.close()
    supported = {f.name: (f.min_version, f.max_version) for f in response.supported_features}
    finalized = {f.name: f.max_version_level for f in response.finalized_features}
    expected = broker.call_soon(lambda: broker.broker.supported_features())
    assert supported == expected
    low, high = supported["metadata.version"]
    assert low > 0 and low <= finalized["metadata.version"] <= high
