"""Wire constants shared by the broker, the controller and kfast's client:
the special values some request and response fields carry. Error codes are
in ``kfast.protocol.errors``, API keys in ``kfast.protocol.api_keys``."""

# ListOffsets: special values of the requested timestamp (Kafka's
# ListOffsetsRequest.EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, MAX_TIMESTAMP).
LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
MAX_TIMESTAMP = -3

# DescribeConfigs / AlterConfigs / IncrementalAlterConfigs resource_type
# (Kafka's ConfigResource.Type).
CONFIG_RESOURCE_TOPIC = 2
CONFIG_RESOURCE_BROKER = 4
CONFIG_RESOURCE_BROKER_LOGGER = 8
CONFIG_RESOURCE_CLIENT_METRICS = 16
CONFIG_RESOURCE_GROUP = 32

# IncrementalAlterConfigs config_operation (Kafka's AlterConfigOp.OpType).
OP_SET, OP_DELETE, OP_APPEND, OP_SUBTRACT = 0, 1, 2, 3

# DescribeConfigs config_source (Kafka's ConfigEntry.ConfigSource, v1+).
SOURCE_DYNAMIC_TOPIC_CONFIG = 1
SOURCE_DYNAMIC_BROKER_CONFIG = 2
SOURCE_DYNAMIC_DEFAULT_BROKER_CONFIG = 3
SOURCE_STATIC_BROKER_CONFIG = 4
SOURCE_DEFAULT_CONFIG = 5
SOURCE_DYNAMIC_BROKER_LOGGER_CONFIG = 6

# DescribeCluster's endpoint types (KIP-919): what the answer lists.
ENDPOINT_TYPE_BROKER = 1
ENDPOINT_TYPE_CONTROLLER = 2
