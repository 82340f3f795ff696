"""Kafka error codes, defined once.

Each error is one row: wire code, Kafka's constant name (as in
``org.apache.kafka.common.protocol.Errors``), the name of Kafka's exception
class, whether a client may retry, and Kafka's default message. For every row
an exception class of that name exists in this module, so Python code raises
and catches the same names a Kafka engineer knows, and the broker turns any of
them into its wire code with ``exc.code``.

    >>> from kfast.protocol import errors
    >>> errors.CorruptRecordException.code
    2
    >>> errors.for_code(2).name
    'CORRUPT_MESSAGE'
"""

from __future__ import annotations

from typing import NamedTuple


class ErrorCode(NamedTuple):
    code: int
    name: str
    exception_name: str
    retriable: bool
    message: str


class KafkaError(Exception):
    """Base of every Kafka error; subclasses carry their wire code."""

    code: int = -1
    name: str = "UNKNOWN_SERVER_ERROR"
    retriable: bool = False
    default_message: str = ""

    def __init__(self, message: str | None = None):
        super().__init__(message or self.default_message)

    @property
    def message(self) -> str:
        return str(self)


# (code, NAME, ExceptionClass, retriable, default message): every code of
# org.apache.kafka.common.protocol.Errors as of Kafka 4.2 (-1 and 0..133).
# `retriable` is true exactly when Kafka's exception class extends
# RetriableException. Messages are Kafka's, because clients log them verbatim.
_TABLE = [
    (
        -1,
        "UNKNOWN_SERVER_ERROR",
        "UnknownServerException",
        False,
        "The server experienced an unexpected error when processing the request.",
    ),
    (0, "NONE", "NoError", False, ""),
    (
        1,
        "OFFSET_OUT_OF_RANGE",
        "OffsetOutOfRangeException",
        False,
        "The requested offset is not within the range of offsets maintained by the server.",
    ),
    (
        2,
        "CORRUPT_MESSAGE",
        "CorruptRecordException",
        True,
        "This message has failed its CRC checksum, exceeds the valid size, has a null key for a compacted topic, or is otherwise corrupt.",
    ),
    (
        3,
        "UNKNOWN_TOPIC_OR_PARTITION",
        "UnknownTopicOrPartitionException",
        True,
        "This server does not host this topic-partition.",
    ),
    (
        4,
        "INVALID_FETCH_SIZE",
        "InvalidFetchSizeException",
        False,
        "The requested fetch size is invalid.",
    ),
    (
        5,
        "LEADER_NOT_AVAILABLE",
        "LeaderNotAvailableException",
        True,
        "There is no leader for this topic-partition as we are in the middle of a leadership election.",
    ),
    (
        6,
        "NOT_LEADER_OR_FOLLOWER",
        "NotLeaderOrFollowerException",
        True,
        "For requests intended only for the leader, this error indicates that the broker is not the current leader. For requests intended for any replica, this error indicates that the broker is not a replica of the topic partition.",
    ),
    (7, "REQUEST_TIMED_OUT", "TimeoutException", True, "The request timed out."),
    (
        8,
        "BROKER_NOT_AVAILABLE",
        "BrokerNotAvailableException",
        False,
        "The broker is not available.",
    ),
    (
        9,
        "REPLICA_NOT_AVAILABLE",
        "ReplicaNotAvailableException",
        True,
        "The replica is not available for the requested topic-partition. Produce/Fetch requests and other requests intended only for the leader or follower return NOT_LEADER_OR_FOLLOWER if the broker is not a replica of the topic-partition.",
    ),
    (
        10,
        "MESSAGE_TOO_LARGE",
        "RecordTooLargeException",
        False,
        "The request included a message larger than the max message size the server will accept.",
    ),
    (
        11,
        "STALE_CONTROLLER_EPOCH",
        "ControllerMovedException",
        False,
        "The controller moved to another broker.",
    ),
    (
        12,
        "OFFSET_METADATA_TOO_LARGE",
        "OffsetMetadataTooLarge",
        False,
        "The metadata field of the offset request was too large.",
    ),
    (
        13,
        "NETWORK_EXCEPTION",
        "NetworkException",
        True,
        "The server disconnected before a response was received.",
    ),
    (
        14,
        "COORDINATOR_LOAD_IN_PROGRESS",
        "CoordinatorLoadInProgressException",
        True,
        "The coordinator is loading and hence can't process requests.",
    ),
    (
        15,
        "COORDINATOR_NOT_AVAILABLE",
        "CoordinatorNotAvailableException",
        True,
        "The coordinator is not available.",
    ),
    (
        16,
        "NOT_COORDINATOR",
        "NotCoordinatorException",
        True,
        "This is not the correct coordinator.",
    ),
    (
        17,
        "INVALID_TOPIC_EXCEPTION",
        "InvalidTopicException",
        False,
        "The request attempted to perform an operation on an invalid topic.",
    ),
    (
        18,
        "RECORD_LIST_TOO_LARGE",
        "RecordBatchTooLargeException",
        False,
        "The request included message batch larger than the configured segment size on the server.",
    ),
    (
        19,
        "NOT_ENOUGH_REPLICAS",
        "NotEnoughReplicasException",
        True,
        "Messages are rejected since there are fewer in-sync replicas than required.",
    ),
    (
        20,
        "NOT_ENOUGH_REPLICAS_AFTER_APPEND",
        "NotEnoughReplicasAfterAppendException",
        True,
        "Messages are written to the log, but to fewer in-sync replicas than required.",
    ),
    (
        21,
        "INVALID_REQUIRED_ACKS",
        "InvalidRequiredAcksException",
        False,
        "Produce request specified an invalid value for required acks.",
    ),
    (
        22,
        "ILLEGAL_GENERATION",
        "IllegalGenerationException",
        False,
        "Specified group generation id is not valid.",
    ),
    (
        23,
        "INCONSISTENT_GROUP_PROTOCOL",
        "InconsistentGroupProtocolException",
        False,
        "The group member's supported protocols are incompatible with those of existing members or first group member tried to join with empty protocol type or empty protocol list.",
    ),
    (
        24,
        "INVALID_GROUP_ID",
        "InvalidGroupIdException",
        False,
        "The configured groupId is invalid.",
    ),
    (
        25,
        "UNKNOWN_MEMBER_ID",
        "UnknownMemberIdException",
        False,
        "The coordinator is not aware of this member.",
    ),
    (
        26,
        "INVALID_SESSION_TIMEOUT",
        "InvalidSessionTimeoutException",
        False,
        "The session timeout is not within the range allowed by the broker (as configured by group.min.session.timeout.ms and group.max.session.timeout.ms).",
    ),
    (
        27,
        "REBALANCE_IN_PROGRESS",
        "RebalanceInProgressException",
        False,
        "The group is rebalancing, so a rejoin is needed.",
    ),
    (
        28,
        "INVALID_COMMIT_OFFSET_SIZE",
        "InvalidCommitOffsetSizeException",
        False,
        "The committing offset data size is not valid.",
    ),
    (
        29,
        "TOPIC_AUTHORIZATION_FAILED",
        "TopicAuthorizationException",
        False,
        "Topic authorization failed.",
    ),
    (
        30,
        "GROUP_AUTHORIZATION_FAILED",
        "GroupAuthorizationException",
        False,
        "Group authorization failed.",
    ),
    (
        31,
        "CLUSTER_AUTHORIZATION_FAILED",
        "ClusterAuthorizationException",
        False,
        "Cluster authorization failed.",
    ),
    (
        32,
        "INVALID_TIMESTAMP",
        "InvalidTimestampException",
        False,
        "The timestamp of the message is out of acceptable range.",
    ),
    (
        33,
        "UNSUPPORTED_SASL_MECHANISM",
        "UnsupportedSaslMechanismException",
        False,
        "The broker does not support the requested SASL mechanism.",
    ),
    (
        34,
        "ILLEGAL_SASL_STATE",
        "IllegalSaslStateException",
        False,
        "Request is not valid given the current SASL state.",
    ),
    (
        35,
        "UNSUPPORTED_VERSION",
        "UnsupportedVersionException",
        False,
        "The version of API is not supported.",
    ),
    (
        36,
        "TOPIC_ALREADY_EXISTS",
        "TopicExistsException",
        False,
        "Topic with this name already exists.",
    ),
    (
        37,
        "INVALID_PARTITIONS",
        "InvalidPartitionsException",
        False,
        "Number of partitions is below 1.",
    ),
    (
        38,
        "INVALID_REPLICATION_FACTOR",
        "InvalidReplicationFactorException",
        False,
        "Replication factor is below 1 or larger than the number of available brokers.",
    ),
    (
        39,
        "INVALID_REPLICA_ASSIGNMENT",
        "InvalidReplicaAssignmentException",
        False,
        "Replica assignment is invalid.",
    ),
    (40, "INVALID_CONFIG", "InvalidConfigurationException", False, "Configuration is invalid."),
    (
        41,
        "NOT_CONTROLLER",
        "NotControllerException",
        True,
        "This is not the correct controller for this cluster.",
    ),
    (
        42,
        "INVALID_REQUEST",
        "InvalidRequestException",
        False,
        "This most likely occurs because of a request being malformed by the client library or the message was sent to an incompatible broker. See the broker logs for more details.",
    ),
    (
        43,
        "UNSUPPORTED_FOR_MESSAGE_FORMAT",
        "UnsupportedForMessageFormatException",
        False,
        "The message format version on the broker does not support the request.",
    ),
    (
        44,
        "POLICY_VIOLATION",
        "PolicyViolationException",
        False,
        "Request parameters do not satisfy the configured policy.",
    ),
    (
        45,
        "OUT_OF_ORDER_SEQUENCE_NUMBER",
        "OutOfOrderSequenceException",
        False,
        "The broker received an out of order sequence number.",
    ),
    (
        46,
        "DUPLICATE_SEQUENCE_NUMBER",
        "DuplicateSequenceException",
        False,
        "The broker received a duplicate sequence number.",
    ),
    (
        47,
        "INVALID_PRODUCER_EPOCH",
        "InvalidProducerEpochException",
        False,
        "Producer attempted to produce with an old epoch.",
    ),
    (
        48,
        "INVALID_TXN_STATE",
        "InvalidTxnStateException",
        False,
        "The producer attempted a transactional operation in an invalid state.",
    ),
    (
        49,
        "INVALID_PRODUCER_ID_MAPPING",
        "InvalidPidMappingException",
        False,
        "The producer attempted to use a producer id which is not currently assigned to its transactional id.",
    ),
    (
        50,
        "INVALID_TRANSACTION_TIMEOUT",
        "InvalidTxnTimeoutException",
        False,
        "The transaction timeout is larger than the maximum value allowed by the broker (as configured by transaction.max.timeout.ms).",
    ),
    (
        51,
        "CONCURRENT_TRANSACTIONS",
        "ConcurrentTransactionsException",
        True,
        "The producer attempted to update a transaction while another concurrent operation on the same transaction was ongoing.",
    ),
    (
        52,
        "TRANSACTION_COORDINATOR_FENCED",
        "TransactionCoordinatorFencedException",
        False,
        "Indicates that the transaction coordinator sending a WriteTxnMarker is no longer the current coordinator for a given producer.",
    ),
    (
        53,
        "TRANSACTIONAL_ID_AUTHORIZATION_FAILED",
        "TransactionalIdAuthorizationException",
        False,
        "Transactional Id authorization failed.",
    ),
    (
        54,
        "SECURITY_DISABLED",
        "SecurityDisabledException",
        False,
        "Security features are disabled.",
    ),
    (
        55,
        "OPERATION_NOT_ATTEMPTED",
        "OperationNotAttemptedException",
        False,
        "The broker did not attempt to execute this operation. This may happen for batched RPCs where some operations in the batch failed, causing the broker to respond without trying the rest.",
    ),
    (
        56,
        "KAFKA_STORAGE_ERROR",
        "KafkaStorageException",
        True,
        "Disk error when trying to access log file on the disk.",
    ),
    (
        57,
        "LOG_DIR_NOT_FOUND",
        "LogDirNotFoundException",
        False,
        "The user-specified log directory is not found in the broker config.",
    ),
    (
        58,
        "SASL_AUTHENTICATION_FAILED",
        "SaslAuthenticationException",
        False,
        "SASL Authentication failed.",
    ),
    (
        59,
        "UNKNOWN_PRODUCER_ID",
        "UnknownProducerIdException",
        False,
        "This exception is raised by the broker if it could not locate the producer metadata associated with the producerId in question. This could happen if, for instance, the producer's records were deleted because their retention time had elapsed. Once the last records of the producerId are removed, the producer's metadata is removed from the broker, and future appends by the producer will return this exception.",
    ),
    (
        60,
        "REASSIGNMENT_IN_PROGRESS",
        "ReassignmentInProgressException",
        False,
        "A partition reassignment is in progress.",
    ),
    (
        61,
        "DELEGATION_TOKEN_AUTH_DISABLED",
        "DelegationTokenDisabledException",
        False,
        "Delegation Token feature is not enabled.",
    ),
    (
        62,
        "DELEGATION_TOKEN_NOT_FOUND",
        "DelegationTokenNotFoundException",
        False,
        "Delegation Token is not found on server.",
    ),
    (
        63,
        "DELEGATION_TOKEN_OWNER_MISMATCH",
        "DelegationTokenOwnerMismatchException",
        False,
        "Specified Principal is not valid Owner/Renewer.",
    ),
    (
        64,
        "DELEGATION_TOKEN_REQUEST_NOT_ALLOWED",
        "UnsupportedByAuthenticationException",
        False,
        "Delegation Token requests are not allowed on PLAINTEXT/1-way SSL channels and on delegation token authenticated channels.",
    ),
    (
        65,
        "DELEGATION_TOKEN_AUTHORIZATION_FAILED",
        "DelegationTokenAuthorizationException",
        False,
        "Delegation Token authorization failed.",
    ),
    (
        66,
        "DELEGATION_TOKEN_EXPIRED",
        "DelegationTokenExpiredException",
        False,
        "Delegation Token is expired.",
    ),
    (
        67,
        "INVALID_PRINCIPAL_TYPE",
        "InvalidPrincipalTypeException",
        False,
        "Supplied principalType is not supported.",
    ),
    (68, "NON_EMPTY_GROUP", "GroupNotEmptyException", False, "The group is not empty."),
    (69, "GROUP_ID_NOT_FOUND", "GroupIdNotFoundException", False, "The group id does not exist."),
    (
        70,
        "FETCH_SESSION_ID_NOT_FOUND",
        "FetchSessionIdNotFoundException",
        True,
        "The fetch session ID was not found.",
    ),
    (
        71,
        "INVALID_FETCH_SESSION_EPOCH",
        "InvalidFetchSessionEpochException",
        True,
        "The fetch session epoch is invalid.",
    ),
    (
        72,
        "LISTENER_NOT_FOUND",
        "ListenerNotFoundException",
        True,
        "There is no listener on the leader broker that matches the listener on which metadata request was processed.",
    ),
    (
        73,
        "TOPIC_DELETION_DISABLED",
        "TopicDeletionDisabledException",
        False,
        "Topic deletion is disabled.",
    ),
    (
        74,
        "FENCED_LEADER_EPOCH",
        "FencedLeaderEpochException",
        True,
        "The leader epoch in the request is older than the epoch on the broker.",
    ),
    (
        75,
        "UNKNOWN_LEADER_EPOCH",
        "UnknownLeaderEpochException",
        True,
        "The leader epoch in the request is newer than the epoch on the broker.",
    ),
    (
        76,
        "UNSUPPORTED_COMPRESSION_TYPE",
        "UnsupportedCompressionTypeException",
        False,
        "The requesting client does not support the compression type of given partition.",
    ),
    (77, "STALE_BROKER_EPOCH", "StaleBrokerEpochException", False, "Broker epoch has changed."),
    (
        78,
        "OFFSET_NOT_AVAILABLE",
        "OffsetNotAvailableException",
        True,
        "The leader high watermark has not caught up from a recent leader election so the offsets cannot be guaranteed to be monotonically increasing.",
    ),
    (
        79,
        "MEMBER_ID_REQUIRED",
        "MemberIdRequiredException",
        False,
        "The group member needs to have a valid member id before actually entering a consumer group.",
    ),
    (
        80,
        "PREFERRED_LEADER_NOT_AVAILABLE",
        "PreferredLeaderNotAvailableException",
        True,
        "The preferred leader was not available.",
    ),
    (
        81,
        "GROUP_MAX_SIZE_REACHED",
        "GroupMaxSizeReachedException",
        False,
        "The consumer group has reached its max size.",
    ),
    (
        82,
        "FENCED_INSTANCE_ID",
        "FencedInstanceIdException",
        False,
        "The broker rejected this static consumer since another consumer with the same group.instance.id has registered with a different member.id.",
    ),
    (
        83,
        "ELIGIBLE_LEADERS_NOT_AVAILABLE",
        "EligibleLeadersNotAvailableException",
        True,
        "Eligible topic partition leaders are not available.",
    ),
    (
        84,
        "ELECTION_NOT_NEEDED",
        "ElectionNotNeededException",
        True,
        "Leader election not needed for topic partition.",
    ),
    (
        85,
        "NO_REASSIGNMENT_IN_PROGRESS",
        "NoReassignmentInProgressException",
        False,
        "No partition reassignment is in progress.",
    ),
    (
        86,
        "GROUP_SUBSCRIBED_TO_TOPIC",
        "GroupSubscribedToTopicException",
        False,
        "Deleting offsets of a topic is forbidden while the consumer group is actively subscribed to it.",
    ),
    (
        87,
        "INVALID_RECORD",
        "InvalidRecordException",
        False,
        "This record has failed the validation on broker and hence will be rejected.",
    ),
    (
        88,
        "UNSTABLE_OFFSET_COMMIT",
        "UnstableOffsetCommitException",
        True,
        "There are unstable offsets that need to be cleared.",
    ),
    (
        89,
        "THROTTLING_QUOTA_EXCEEDED",
        "ThrottlingQuotaExceededException",
        True,
        "The throttling quota has been exceeded.",
    ),
    (
        90,
        "PRODUCER_FENCED",
        "ProducerFencedException",
        False,
        "There is a newer producer with the same transactionalId which fences the current one.",
    ),
    (
        91,
        "RESOURCE_NOT_FOUND",
        "ResourceNotFoundException",
        False,
        "A request illegally referred to a resource that does not exist.",
    ),
    (
        92,
        "DUPLICATE_RESOURCE",
        "DuplicateResourceException",
        False,
        "A request illegally referred to the same resource twice.",
    ),
    (
        93,
        "UNACCEPTABLE_CREDENTIAL",
        "UnacceptableCredentialException",
        False,
        "Requested credential would not meet criteria for acceptability.",
    ),
    (
        94,
        "INCONSISTENT_VOTER_SET",
        "InconsistentVoterSetException",
        False,
        "Indicates that the either the sender or recipient of a voter-only request is not one of the expected voters.",
    ),
    (
        95,
        "INVALID_UPDATE_VERSION",
        "InvalidUpdateVersionException",
        False,
        "The given update version was invalid.",
    ),
    (
        96,
        "FEATURE_UPDATE_FAILED",
        "FeatureUpdateFailedException",
        False,
        "Unable to update finalized features due to an unexpected server error.",
    ),
    (
        97,
        "PRINCIPAL_DESERIALIZATION_FAILURE",
        "PrincipalDeserializationException",
        False,
        "Request principal deserialization failed during forwarding. This indicates an internal error on the broker cluster security setup.",
    ),
    (
        98,
        "SNAPSHOT_NOT_FOUND",
        "SnapshotNotFoundException",
        False,
        "Requested snapshot was not found.",
    ),
    (
        99,
        "POSITION_OUT_OF_RANGE",
        "PositionOutOfRangeException",
        False,
        "Requested position is not greater than or equal to zero, and less than the size of the snapshot.",
    ),
    (
        100,
        "UNKNOWN_TOPIC_ID",
        "UnknownTopicIdException",
        True,
        "This server does not host this topic ID.",
    ),
    (
        101,
        "DUPLICATE_BROKER_REGISTRATION",
        "DuplicateBrokerRegistrationException",
        False,
        "This broker ID is already in use.",
    ),
    (
        102,
        "BROKER_ID_NOT_REGISTERED",
        "BrokerIdNotRegisteredException",
        False,
        "The given broker ID was not registered.",
    ),
    (
        103,
        "INCONSISTENT_TOPIC_ID",
        "InconsistentTopicIdException",
        True,
        "The log's topic ID did not match the topic ID in the request.",
    ),
    (
        104,
        "INCONSISTENT_CLUSTER_ID",
        "InconsistentClusterIdException",
        False,
        "The clusterId in the request does not match that found on the server.",
    ),
    (
        105,
        "TRANSACTIONAL_ID_NOT_FOUND",
        "TransactionalIdNotFoundException",
        False,
        "The transactionalId could not be found.",
    ),
    (
        106,
        "FETCH_SESSION_TOPIC_ID_ERROR",
        "FetchSessionTopicIdException",
        True,
        "The fetch session encountered inconsistent topic ID usage.",
    ),
    (
        107,
        "INELIGIBLE_REPLICA",
        "IneligibleReplicaException",
        False,
        "The new ISR contains at least one ineligible replica.",
    ),
    (
        108,
        "NEW_LEADER_ELECTED",
        "NewLeaderElectedException",
        False,
        "The AlterPartition request successfully updated the partition state but the leader has changed.",
    ),
    (
        109,
        "OFFSET_MOVED_TO_TIERED_STORAGE",
        "OffsetMovedToTieredStorageException",
        False,
        "The requested offset is moved to tiered storage.",
    ),
    (
        110,
        "FENCED_MEMBER_EPOCH",
        "FencedMemberEpochException",
        False,
        "The member epoch is fenced by the group coordinator. The member must abandon all its partitions and rejoin.",
    ),
    (
        111,
        "UNRELEASED_INSTANCE_ID",
        "UnreleasedInstanceIdException",
        False,
        "The instance ID is still used by another member in the consumer group. That member must leave first.",
    ),
    (
        112,
        "UNSUPPORTED_ASSIGNOR",
        "UnsupportedAssignorException",
        False,
        "The assignor or its version range is not supported by the consumer group.",
    ),
    (
        113,
        "STALE_MEMBER_EPOCH",
        "StaleMemberEpochException",
        False,
        "The member epoch is stale. The member must retry after receiving its updated member epoch via the ConsumerGroupHeartbeat API.",
    ),
    (
        114,
        "MISMATCHED_ENDPOINT_TYPE",
        "MismatchedEndpointTypeException",
        False,
        "The request was sent to an endpoint of the wrong type.",
    ),
    (
        115,
        "UNSUPPORTED_ENDPOINT_TYPE",
        "UnsupportedEndpointTypeException",
        False,
        "This endpoint type is not supported yet.",
    ),
    (
        116,
        "UNKNOWN_CONTROLLER_ID",
        "UnknownControllerIdException",
        False,
        "This controller ID is not known.",
    ),
    (
        117,
        "UNKNOWN_SUBSCRIPTION_ID",
        "UnknownSubscriptionIdException",
        False,
        "Client sent a push telemetry request with an invalid or outdated subscription ID.",
    ),
    (
        118,
        "TELEMETRY_TOO_LARGE",
        "TelemetryTooLargeException",
        False,
        "Client sent a push telemetry request larger than the maximum size the broker will accept.",
    ),
    (
        119,
        "INVALID_REGISTRATION",
        "InvalidRegistrationException",
        False,
        "The controller has considered the broker registration to be invalid.",
    ),
    (
        120,
        "TRANSACTION_ABORTABLE",
        "TransactionAbortableException",
        False,
        "The server encountered an error with the transaction. The client can abort the transaction to continue using this transactional ID.",
    ),
    (
        121,
        "INVALID_RECORD_STATE",
        "InvalidRecordStateException",
        False,
        "The record state is invalid. The acknowledgement of delivery could not be completed.",
    ),
    (
        122,
        "SHARE_SESSION_NOT_FOUND",
        "ShareSessionNotFoundException",
        True,
        "The share session was not found.",
    ),
    (
        123,
        "INVALID_SHARE_SESSION_EPOCH",
        "InvalidShareSessionEpochException",
        True,
        "The share session epoch is invalid.",
    ),
    (
        124,
        "FENCED_STATE_EPOCH",
        "FencedStateEpochException",
        False,
        "The share coordinator rejected the request because the share-group state epoch did not match.",
    ),
    (
        125,
        "INVALID_VOTER_KEY",
        "InvalidVoterKeyException",
        False,
        "The voter key doesn't match the receiving replica's key.",
    ),
    (
        126,
        "DUPLICATE_VOTER",
        "DuplicateVoterException",
        False,
        "The voter is already part of the set of voters.",
    ),
    (
        127,
        "VOTER_NOT_FOUND",
        "VoterNotFoundException",
        False,
        "The voter is not part of the set of voters.",
    ),
    (
        128,
        "INVALID_REGULAR_EXPRESSION",
        "InvalidRegularExpression",
        False,
        "The regular expression is not valid.",
    ),
    (
        129,
        "REBOOTSTRAP_REQUIRED",
        "RebootstrapRequiredException",
        False,
        "Client metadata is stale. The client should rebootstrap to obtain new metadata.",
    ),
    (
        130,
        "STREAMS_INVALID_TOPOLOGY",
        "StreamsInvalidTopologyException",
        False,
        "The supplied topology is invalid.",
    ),
    (
        131,
        "STREAMS_INVALID_TOPOLOGY_EPOCH",
        "StreamsInvalidTopologyEpochException",
        False,
        "The supplied topology epoch is invalid.",
    ),
    (
        132,
        "STREAMS_TOPOLOGY_FENCED",
        "StreamsTopologyFencedException",
        False,
        "The supplied topology epoch is outdated.",
    ),
    (
        133,
        "SHARE_SESSION_LIMIT_REACHED",
        "ShareSessionLimitReachedException",
        True,
        "The limit of share sessions has been reached.",
    ),
]

_BY_CODE: dict[int, type[KafkaError]] = {}
ERRORS: dict[int, ErrorCode] = {}


def _define(row: tuple) -> None:
    info = ErrorCode(*row)
    ERRORS[info.code] = info
    cls = type(
        info.exception_name,
        (KafkaError,),
        {
            "code": info.code,
            "name": info.name,
            "retriable": info.retriable,
            "default_message": info.message,
            "__doc__": f"Kafka error {info.code} {info.name}: {info.message}",
            "__module__": __name__,
        },
    )
    globals()[info.exception_name] = cls
    _BY_CODE[info.code] = cls


for _row in _TABLE:
    _define(_row)
del _row


class MalformedRequestException(InvalidRequestException):  # noqa: F821 (defined by the table)
    """A request or response whose bytes do not parse: truncated, a negative or
    oversized length, an array count larger than the bytes that remain, a tagged
    field whose size does not match its value. Raised by ``kfast.protocol``
    decoders before anything the input claims is allocated; on the wire it is
    INVALID_REQUEST (42), as Kafka answers unparseable requests."""


def for_code(code: int) -> type[KafkaError]:
    """The exception class for a wire error code (UnknownServerException if unknown)."""
    return _BY_CODE.get(code, _BY_CODE[-1])
