"""CLIENT_METRICS config resources (KIP-714 subscriptions): Kafka's
ClientMetricsConfigs validation, through the ConfigurationControlManager
that writes them as ConfigRecords."""

from __future__ import annotations

import pytest

from kfast.controller.configuration_control import ConfigurationControlManager
from kfast.metrics import subscriptions
from kfast.protocol import errors
from kfast.protocol.constants import CONFIG_RESOURCE_CLIENT_METRICS, OP_APPEND, OP_DELETE, OP_SET


@pytest.mark.parametrize(
    "name, configs, error",
    [
        ("", {"metrics": "*"}, errors.InvalidRequestException),
        ("s", {"metric": "*"}, errors.InvalidRequestException),  # unknown key
        ("s", {"interval.ms": "99"}, errors.InvalidRequestException),
        ("s", {"interval.ms": "3600001"}, errors.InvalidRequestException),
        ("s", {"interval.ms": "soon"}, errors.InvalidConfigurationException),
        ("s", {"match": "client_id"}, errors.InvalidConfigurationException),
        ("s", {"match": "client_rack=a"}, errors.InvalidConfigurationException),
        ("s", {"match": "client_id=("}, errors.InvalidConfigurationException),
    ],
)
def test_invalid_subscriptions(name, configs, error):
    with pytest.raises(error):
        subscriptions.validate(name, configs)


def test_match_patterns_match_whole_attributes():
    sub = subscriptions.parse(
        "s",
        {
            "match": "client_id=prod-.*,client_software_name=librdkafka",
            "interval.ms": "100",
            "metrics": "a.,b.",
        },
    )
    assert sub.metrics == ("a.", "b.") and sub.interval_ms == 100
    assert subscriptions.matches(sub, {"client_id": "prod-7", "client_software_name": "librdkafka"})
    assert not subscriptions.matches(
        sub, {"client_id": "xprod-7", "client_software_name": "librdkafka"}
    )
    assert not subscriptions.matches(sub, {"client_id": "prod-7"})  # attribute missing
    assert subscriptions.matches(subscriptions.parse("all", {}), {})


def test_configuration_control_writes_and_validates_subscriptions():
    control = ConfigurationControlManager(lambda name: False, lambda broker_id: False)
    result = control.incremental_alter_configs(
        [
            (
                CONFIG_RESOURCE_CLIENT_METRICS,
                "basic",
                [
                    ("metrics", OP_SET, "org.apache.kafka.producer."),
                    ("interval.ms", OP_SET, "1000"),
                ],
            ),
            (CONFIG_RESOURCE_CLIENT_METRICS, "bad", [("interval.ms", OP_SET, "5")]),
            (CONFIG_RESOURCE_CLIENT_METRICS, "", [("metrics", OP_SET, "*")]),
        ]
    )
    assert result.response[0] is None
    assert isinstance(result.response[1], errors.InvalidRequestException)
    assert isinstance(result.response[2], errors.InvalidRequestException)
    for record in result.records:
        assert record.resource_type == CONFIG_RESOURCE_CLIENT_METRICS
        control.replay(record)
    assert control.get(CONFIG_RESOURCE_CLIENT_METRICS, "basic") == {
        "metrics": "org.apache.kafka.producer.",
        "interval.ms": "1000",
    }
    # APPEND works on the LIST-typed metrics, as kafka-client-metrics.sh --alter.
    result = control.incremental_alter_configs(
        [
            (
                CONFIG_RESOURCE_CLIENT_METRICS,
                "basic",
                [
                    ("metrics", OP_APPEND, "org.apache.kafka.consumer."),
                    ("interval.ms", OP_DELETE, None),
                ],
            )
        ]
    )
    for record in result.records:
        control.replay(record)
    assert control.get(CONFIG_RESOURCE_CLIENT_METRICS, "basic") == {
        "metrics": "org.apache.kafka.producer.,org.apache.kafka.consumer."
    }
