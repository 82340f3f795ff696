"""Wire constants shared by the broker, the controller and kfast's client:
the special values some request and response fields carry. Error codes are
in ``kfast.protocol.errors``, API keys in ``kfast.protocol.api_keys``."""

import uuid

# The int32 range (Java's Integer.MAX_VALUE / MIN_VALUE): the largest size,
# relative offset or sequence an int32 field carries. kfast.config keeps its
# own INT_MAX for property ranges (it sits below this layer); the Cython
# kernels use libc's INT32_MAX.
INT32_MAX = 0x7FFFFFFF
INT32_MIN = -0x80000000

# Kafka's Uuid.ZERO_UUID: "no id" in every uuid field (topic ids, directory
# ids) and the default of a uuid field absent from a version.
ZERO_UUID = uuid.UUID(int=0)
# Kafka's DirectoryId (KIP-858): the log dir of a replica in PartitionRecord's
# directories, where it is not a real directory.id. MIGRATING: the broker
# registered no dirs (an older broker); UNASSIGNED: the broker has several
# dirs and has not said which holds the replica yet (it sends
# AssignReplicasToDirs); LOST: its dir is gone.
DIRECTORY_MIGRATING = ZERO_UUID
DIRECTORY_UNASSIGNED = uuid.UUID(int=1)
DIRECTORY_LOST = uuid.UUID(int=2)

# The leader id of a partition without a leader (Kafka's
# MetadataResponse.NO_LEADER_ID, LeaderAndIsr.NO_LEADER) and of a Raft quorum
# that knows no leader.
NO_LEADER = -1

# ListOffsets: special values of the requested timestamp (Kafka's
# ListOffsetsRequest.EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, MAX_TIMESTAMP,
# EARLIEST_LOCAL_TIMESTAMP (KIP-405, v8+), LATEST_TIERED_TIMESTAMP
# (KIP-1005, v9+)).
LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL_TIMESTAMP = -4
LATEST_TIERED_TIMESTAMP = -5

# Kafka's AclOperation codes; an authorized-operations field is a bitfield
# with bit ``1 << code`` set for each operation allowed.
ACL_OPERATION_UNKNOWN = 0
ACL_OPERATION_ANY = 1
ACL_OPERATION_ALL = 2
ACL_OPERATION_READ = 3
ACL_OPERATION_WRITE = 4
ACL_OPERATION_CREATE = 5
ACL_OPERATION_DELETE = 6
ACL_OPERATION_ALTER = 7
ACL_OPERATION_DESCRIBE = 8
ACL_OPERATION_CLUSTER_ACTION = 9
ACL_OPERATION_DESCRIBE_CONFIGS = 10
ACL_OPERATION_ALTER_CONFIGS = 11
ACL_OPERATION_IDEMPOTENT_WRITE = 12
ACL_OPERATION_CREATE_TOKENS = 13
ACL_OPERATION_DESCRIBE_TOKENS = 14
ACL_OPERATION_TWO_PHASE_COMMIT = 15

# Kafka's ResourceType codes (ACL resources; not ConfigResource.Type).
ACL_RESOURCE_UNKNOWN = 0
ACL_RESOURCE_ANY = 1
ACL_RESOURCE_TOPIC = 2
ACL_RESOURCE_GROUP = 3
ACL_RESOURCE_CLUSTER = 4
ACL_RESOURCE_TRANSACTIONAL_ID = 5
ACL_RESOURCE_DELEGATION_TOKEN = 6
ACL_RESOURCE_USER = 7

# Kafka's PatternType codes: ACLs are LITERAL or PREFIXED; filters may also
# say ANY (either, name compared as is) or MATCH (every ACL that applies to
# the named resource: literal, wildcard and prefixes of it).
PATTERN_TYPE_UNKNOWN = 0
PATTERN_TYPE_ANY = 1
PATTERN_TYPE_MATCH = 2
PATTERN_TYPE_LITERAL = 3
PATTERN_TYPE_PREFIXED = 4

# Kafka's AclPermissionType codes.
ACL_PERMISSION_UNKNOWN = 0
ACL_PERMISSION_ANY = 1
ACL_PERMISSION_DENY = 2
ACL_PERMISSION_ALLOW = 3

# The one name of the CLUSTER resource (Kafka's CLUSTER_NAME), the wildcard
# resource name of a LITERAL ACL, and the wildcard host and principal.
CLUSTER_RESOURCE_NAME = "kafka-cluster"
ACL_WILDCARD_RESOURCE = "*"
ACL_WILDCARD_HOST = "*"
ACL_WILDCARD_PRINCIPAL = "User:*"

# An authorized-operations field the request did not ask for (Kafka's
# MetadataResponse.AUTHORIZED_OPERATIONS_OMITTED, Integer.MIN_VALUE).
AUTHORIZED_OPERATIONS_OMITTED = INT32_MIN


def authorized_operations(*operations: int) -> int:
    """The authorized-operations bitfield that allows ``operations``
    (Kafka's Utils.to32BitField)."""
    return sum(1 << op for op in set(operations))


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
SOURCE_CLIENT_METRICS_CONFIG = 7
SOURCE_GROUP_CONFIG = 8

# Client quota entity types (Kafka's ClientQuotaEntity) and the match types
# of DescribeClientQuotas' filter components (ClientQuotaFilterComponent).
QUOTA_ENTITY_USER = "user"
QUOTA_ENTITY_CLIENT_ID = "client-id"
QUOTA_ENTITY_IP = "ip"
QUOTA_MATCH_EXACT, QUOTA_MATCH_DEFAULT, QUOTA_MATCH_SPECIFIED = 0, 1, 2

# DescribeCluster's endpoint types (KIP-919): what the answer lists.
ENDPOINT_TYPE_BROKER = 1
ENDPOINT_TYPE_CONTROLLER = 2
