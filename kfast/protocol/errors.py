"""Kafka error codes, defined once.

Each error is one class statement named as Kafka's exception class, carrying
its wire code, Kafka's constant name (as in
``org.apache.kafka.common.protocol.Errors``), whether a client may retry, and
Kafka's default message. Python code raises and catches the same names a Kafka
engineer knows (and type checkers see them), and the broker turns any of them
into its wire code with ``exc.code``.

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


_BY_CODE: dict[int, type[KafkaError]] = {}
ERRORS: dict[int, ErrorCode] = {}


class KafkaError(Exception):
    """Base of every Kafka error; subclasses carry their wire code.

    A class statement naming a ``code`` defines that code (the table below);
    a subclass without one is a finer-grained name for its parent's code
    (MalformedRequestException is INVALID_REQUEST)."""

    code: int = -1
    name: str = "UNKNOWN_SERVER_ERROR"
    retriable: bool = False
    default_message: str = ""
    # What kfast's client attaches to an error it raises for one resource of a
    # request: the resource's name (admin), or the partition with its log start
    # offset and high watermark (a fetch's OFFSET_OUT_OF_RANGE).
    resource: str | None = None
    topic_partition: tuple[str, int] | None = None
    log_start_offset: int | None = None
    high_watermark: int | None = None

    def __init_subclass__(
        cls,
        *,
        code: int | None = None,
        name: str = "",
        retriable: bool = False,
        message: str = "",
    ) -> None:
        super().__init_subclass__()
        if code is None:
            return
        cls.code, cls.name, cls.retriable, cls.default_message = code, name, retriable, message
        cls.__doc__ = f"Kafka error {code} {name}: {message}"
        ERRORS[code] = ErrorCode(code, name, cls.__name__, retriable, message)
        _BY_CODE[code] = cls

    def __init__(self, message: str | None = None):
        super().__init__(message or self.default_message)

    @property
    def message(self) -> str:
        return str(self)


# Every code of org.apache.kafka.common.protocol.Errors as of Kafka 4.2 (-1 and
# 0..133), one class each: Kafka's exception class name, its wire code and
# constant name, whether a client may retry, and Kafka's default message.
# `retriable` is true exactly when Kafka's exception class extends
# RetriableException. Messages are Kafka's, because clients log them verbatim.


class UnknownServerException(
    KafkaError,
    code=-1,
    name="UNKNOWN_SERVER_ERROR",
    retriable=False,
    message="The server experienced an unexpected error when processing the request.",
):
    pass


class NoError(
    KafkaError,
    code=0,
    name="NONE",
    retriable=False,
    message="",
):
    pass


class OffsetOutOfRangeException(
    KafkaError,
    code=1,
    name="OFFSET_OUT_OF_RANGE",
    retriable=False,
    message="The requested offset is not within the range of offsets maintained by the server.",
):
    pass


class CorruptRecordException(
    KafkaError,
    code=2,
    name="CORRUPT_MESSAGE",
    retriable=True,
    message="This message has failed its CRC checksum, exceeds the valid size, has a null key for a compacted topic, or is otherwise corrupt.",
):
    pass


class UnknownTopicOrPartitionException(
    KafkaError,
    code=3,
    name="UNKNOWN_TOPIC_OR_PARTITION",
    retriable=True,
    message="This server does not host this topic-partition.",
):
    pass


class InvalidFetchSizeException(
    KafkaError,
    code=4,
    name="INVALID_FETCH_SIZE",
    retriable=False,
    message="The requested fetch size is invalid.",
):
    pass


class LeaderNotAvailableException(
    KafkaError,
    code=5,
    name="LEADER_NOT_AVAILABLE",
    retriable=True,
    message="There is no leader for this topic-partition as we are in the middle of a leadership election.",
):
    pass


class NotLeaderOrFollowerException(
    KafkaError,
    code=6,
    name="NOT_LEADER_OR_FOLLOWER",
    retriable=True,
    message="For requests intended only for the leader, this error indicates that the broker is not the current leader. For requests intended for any replica, this error indicates that the broker is not a replica of the topic partition.",
):
    pass


class TimeoutException(
    KafkaError,
    code=7,
    name="REQUEST_TIMED_OUT",
    retriable=True,
    message="The request timed out.",
):
    pass


class BrokerNotAvailableException(
    KafkaError,
    code=8,
    name="BROKER_NOT_AVAILABLE",
    retriable=False,
    message="The broker is not available.",
):
    pass


class ReplicaNotAvailableException(
    KafkaError,
    code=9,
    name="REPLICA_NOT_AVAILABLE",
    retriable=True,
    message="The replica is not available for the requested topic-partition. Produce/Fetch requests and other requests intended only for the leader or follower return NOT_LEADER_OR_FOLLOWER if the broker is not a replica of the topic-partition.",
):
    pass


class RecordTooLargeException(
    KafkaError,
    code=10,
    name="MESSAGE_TOO_LARGE",
    retriable=False,
    message="The request included a message larger than the max message size the server will accept.",
):
    pass


class ControllerMovedException(
    KafkaError,
    code=11,
    name="STALE_CONTROLLER_EPOCH",
    retriable=False,
    message="The controller moved to another broker.",
):
    pass


class OffsetMetadataTooLarge(
    KafkaError,
    code=12,
    name="OFFSET_METADATA_TOO_LARGE",
    retriable=False,
    message="The metadata field of the offset request was too large.",
):
    pass


class NetworkException(
    KafkaError,
    code=13,
    name="NETWORK_EXCEPTION",
    retriable=True,
    message="The server disconnected before a response was received.",
):
    pass


class CoordinatorLoadInProgressException(
    KafkaError,
    code=14,
    name="COORDINATOR_LOAD_IN_PROGRESS",
    retriable=True,
    message="The coordinator is loading and hence can't process requests.",
):
    pass


class CoordinatorNotAvailableException(
    KafkaError,
    code=15,
    name="COORDINATOR_NOT_AVAILABLE",
    retriable=True,
    message="The coordinator is not available.",
):
    pass


class NotCoordinatorException(
    KafkaError,
    code=16,
    name="NOT_COORDINATOR",
    retriable=True,
    message="This is not the correct coordinator.",
):
    pass


class InvalidTopicException(
    KafkaError,
    code=17,
    name="INVALID_TOPIC_EXCEPTION",
    retriable=False,
    message="The request attempted to perform an operation on an invalid topic.",
):
    pass


class RecordBatchTooLargeException(
    KafkaError,
    code=18,
    name="RECORD_LIST_TOO_LARGE",
    retriable=False,
    message="The request included message batch larger than the configured segment size on the server.",
):
    pass


class NotEnoughReplicasException(
    KafkaError,
    code=19,
    name="NOT_ENOUGH_REPLICAS",
    retriable=True,
    message="Messages are rejected since there are fewer in-sync replicas than required.",
):
    pass


class NotEnoughReplicasAfterAppendException(
    KafkaError,
    code=20,
    name="NOT_ENOUGH_REPLICAS_AFTER_APPEND",
    retriable=True,
    message="Messages are written to the log, but to fewer in-sync replicas than required.",
):
    pass


class InvalidRequiredAcksException(
    KafkaError,
    code=21,
    name="INVALID_REQUIRED_ACKS",
    retriable=False,
    message="Produce request specified an invalid value for required acks.",
):
    pass


class IllegalGenerationException(
    KafkaError,
    code=22,
    name="ILLEGAL_GENERATION",
    retriable=False,
    message="Specified group generation id is not valid.",
):
    pass


class InconsistentGroupProtocolException(
    KafkaError,
    code=23,
    name="INCONSISTENT_GROUP_PROTOCOL",
    retriable=False,
    message="The group member's supported protocols are incompatible with those of existing members or first group member tried to join with empty protocol type or empty protocol list.",
):
    pass


class InvalidGroupIdException(
    KafkaError,
    code=24,
    name="INVALID_GROUP_ID",
    retriable=False,
    message="The configured groupId is invalid.",
):
    pass


class UnknownMemberIdException(
    KafkaError,
    code=25,
    name="UNKNOWN_MEMBER_ID",
    retriable=False,
    message="The coordinator is not aware of this member.",
):
    pass


class InvalidSessionTimeoutException(
    KafkaError,
    code=26,
    name="INVALID_SESSION_TIMEOUT",
    retriable=False,
    message="The session timeout is not within the range allowed by the broker (as configured by group.min.session.timeout.ms and group.max.session.timeout.ms).",
):
    pass


class RebalanceInProgressException(
    KafkaError,
    code=27,
    name="REBALANCE_IN_PROGRESS",
    retriable=False,
    message="The group is rebalancing, so a rejoin is needed.",
):
    pass


class InvalidCommitOffsetSizeException(
    KafkaError,
    code=28,
    name="INVALID_COMMIT_OFFSET_SIZE",
    retriable=False,
    message="The committing offset data size is not valid.",
):
    pass


class TopicAuthorizationException(
    KafkaError,
    code=29,
    name="TOPIC_AUTHORIZATION_FAILED",
    retriable=False,
    message="Topic authorization failed.",
):
    pass


class GroupAuthorizationException(
    KafkaError,
    code=30,
    name="GROUP_AUTHORIZATION_FAILED",
    retriable=False,
    message="Group authorization failed.",
):
    pass


class ClusterAuthorizationException(
    KafkaError,
    code=31,
    name="CLUSTER_AUTHORIZATION_FAILED",
    retriable=False,
    message="Cluster authorization failed.",
):
    pass


class InvalidTimestampException(
    KafkaError,
    code=32,
    name="INVALID_TIMESTAMP",
    retriable=False,
    message="The timestamp of the message is out of acceptable range.",
):
    pass


class UnsupportedSaslMechanismException(
    KafkaError,
    code=33,
    name="UNSUPPORTED_SASL_MECHANISM",
    retriable=False,
    message="The broker does not support the requested SASL mechanism.",
):
    pass


class IllegalSaslStateException(
    KafkaError,
    code=34,
    name="ILLEGAL_SASL_STATE",
    retriable=False,
    message="Request is not valid given the current SASL state.",
):
    pass


class UnsupportedVersionException(
    KafkaError,
    code=35,
    name="UNSUPPORTED_VERSION",
    retriable=False,
    message="The version of API is not supported.",
):
    # Set by kfast.protocol.decode_request_body: the request's header (a
    # kfast.protocol.RequestHeader, which this lower layer does not import), so
    # an unsupported version can still be answered.
    header: tuple[int, int, int, str | None, int] | None = None


class TopicExistsException(
    KafkaError,
    code=36,
    name="TOPIC_ALREADY_EXISTS",
    retriable=False,
    message="Topic with this name already exists.",
):
    pass


class InvalidPartitionsException(
    KafkaError,
    code=37,
    name="INVALID_PARTITIONS",
    retriable=False,
    message="Number of partitions is below 1.",
):
    pass


class InvalidReplicationFactorException(
    KafkaError,
    code=38,
    name="INVALID_REPLICATION_FACTOR",
    retriable=False,
    message="Replication factor is below 1 or larger than the number of available brokers.",
):
    pass


class InvalidReplicaAssignmentException(
    KafkaError,
    code=39,
    name="INVALID_REPLICA_ASSIGNMENT",
    retriable=False,
    message="Replica assignment is invalid.",
):
    pass


class InvalidConfigurationException(
    KafkaError,
    code=40,
    name="INVALID_CONFIG",
    retriable=False,
    message="Configuration is invalid.",
):
    pass


class NotControllerException(
    KafkaError,
    code=41,
    name="NOT_CONTROLLER",
    retriable=True,
    message="This is not the correct controller for this cluster.",
):
    pass


class InvalidRequestException(
    KafkaError,
    code=42,
    name="INVALID_REQUEST",
    retriable=False,
    message="This most likely occurs because of a request being malformed by the client library or the message was sent to an incompatible broker. See the broker logs for more details.",
):
    pass


class UnsupportedForMessageFormatException(
    KafkaError,
    code=43,
    name="UNSUPPORTED_FOR_MESSAGE_FORMAT",
    retriable=False,
    message="The message format version on the broker does not support the request.",
):
    pass


class PolicyViolationException(
    KafkaError,
    code=44,
    name="POLICY_VIOLATION",
    retriable=False,
    message="Request parameters do not satisfy the configured policy.",
):
    pass


class OutOfOrderSequenceException(
    KafkaError,
    code=45,
    name="OUT_OF_ORDER_SEQUENCE_NUMBER",
    retriable=False,
    message="The broker received an out of order sequence number.",
):
    pass


class DuplicateSequenceException(
    KafkaError,
    code=46,
    name="DUPLICATE_SEQUENCE_NUMBER",
    retriable=False,
    message="The broker received a duplicate sequence number.",
):
    pass


class InvalidProducerEpochException(
    KafkaError,
    code=47,
    name="INVALID_PRODUCER_EPOCH",
    retriable=False,
    message="Producer attempted to produce with an old epoch.",
):
    pass


class InvalidTxnStateException(
    KafkaError,
    code=48,
    name="INVALID_TXN_STATE",
    retriable=False,
    message="The producer attempted a transactional operation in an invalid state.",
):
    pass


class InvalidPidMappingException(
    KafkaError,
    code=49,
    name="INVALID_PRODUCER_ID_MAPPING",
    retriable=False,
    message="The producer attempted to use a producer id which is not currently assigned to its transactional id.",
):
    pass


class InvalidTxnTimeoutException(
    KafkaError,
    code=50,
    name="INVALID_TRANSACTION_TIMEOUT",
    retriable=False,
    message="The transaction timeout is larger than the maximum value allowed by the broker (as configured by transaction.max.timeout.ms).",
):
    pass


class ConcurrentTransactionsException(
    KafkaError,
    code=51,
    name="CONCURRENT_TRANSACTIONS",
    retriable=True,
    message="The producer attempted to update a transaction while another concurrent operation on the same transaction was ongoing.",
):
    pass


class TransactionCoordinatorFencedException(
    KafkaError,
    code=52,
    name="TRANSACTION_COORDINATOR_FENCED",
    retriable=False,
    message="Indicates that the transaction coordinator sending a WriteTxnMarker is no longer the current coordinator for a given producer.",
):
    pass


class TransactionalIdAuthorizationException(
    KafkaError,
    code=53,
    name="TRANSACTIONAL_ID_AUTHORIZATION_FAILED",
    retriable=False,
    message="Transactional Id authorization failed.",
):
    pass


class SecurityDisabledException(
    KafkaError,
    code=54,
    name="SECURITY_DISABLED",
    retriable=False,
    message="Security features are disabled.",
):
    pass


class OperationNotAttemptedException(
    KafkaError,
    code=55,
    name="OPERATION_NOT_ATTEMPTED",
    retriable=False,
    message="The broker did not attempt to execute this operation. This may happen for batched RPCs where some operations in the batch failed, causing the broker to respond without trying the rest.",
):
    pass


class KafkaStorageException(
    KafkaError,
    code=56,
    name="KAFKA_STORAGE_ERROR",
    retriable=True,
    message="Disk error when trying to access log file on the disk.",
):
    pass


class LogDirNotFoundException(
    KafkaError,
    code=57,
    name="LOG_DIR_NOT_FOUND",
    retriable=False,
    message="The user-specified log directory is not found in the broker config.",
):
    pass


class SaslAuthenticationException(
    KafkaError,
    code=58,
    name="SASL_AUTHENTICATION_FAILED",
    retriable=False,
    message="SASL Authentication failed.",
):
    pass


class UnknownProducerIdException(
    KafkaError,
    code=59,
    name="UNKNOWN_PRODUCER_ID",
    retriable=False,
    message="This exception is raised by the broker if it could not locate the producer metadata associated with the producerId in question. This could happen if, for instance, the producer's records were deleted because their retention time had elapsed. Once the last records of the producerId are removed, the producer's metadata is removed from the broker, and future appends by the producer will return this exception.",
):
    pass


class ReassignmentInProgressException(
    KafkaError,
    code=60,
    name="REASSIGNMENT_IN_PROGRESS",
    retriable=False,
    message="A partition reassignment is in progress.",
):
    pass


class DelegationTokenDisabledException(
    KafkaError,
    code=61,
    name="DELEGATION_TOKEN_AUTH_DISABLED",
    retriable=False,
    message="Delegation Token feature is not enabled.",
):
    pass


class DelegationTokenNotFoundException(
    KafkaError,
    code=62,
    name="DELEGATION_TOKEN_NOT_FOUND",
    retriable=False,
    message="Delegation Token is not found on server.",
):
    pass


class DelegationTokenOwnerMismatchException(
    KafkaError,
    code=63,
    name="DELEGATION_TOKEN_OWNER_MISMATCH",
    retriable=False,
    message="Specified Principal is not valid Owner/Renewer.",
):
    pass


class UnsupportedByAuthenticationException(
    KafkaError,
    code=64,
    name="DELEGATION_TOKEN_REQUEST_NOT_ALLOWED",
    retriable=False,
    message="Delegation Token requests are not allowed on PLAINTEXT/1-way SSL channels and on delegation token authenticated channels.",
):
    pass


class DelegationTokenAuthorizationException(
    KafkaError,
    code=65,
    name="DELEGATION_TOKEN_AUTHORIZATION_FAILED",
    retriable=False,
    message="Delegation Token authorization failed.",
):
    pass


class DelegationTokenExpiredException(
    KafkaError,
    code=66,
    name="DELEGATION_TOKEN_EXPIRED",
    retriable=False,
    message="Delegation Token is expired.",
):
    pass


class InvalidPrincipalTypeException(
    KafkaError,
    code=67,
    name="INVALID_PRINCIPAL_TYPE",
    retriable=False,
    message="Supplied principalType is not supported.",
):
    pass


class GroupNotEmptyException(
    KafkaError,
    code=68,
    name="NON_EMPTY_GROUP",
    retriable=False,
    message="The group is not empty.",
):
    pass


class GroupIdNotFoundException(
    KafkaError,
    code=69,
    name="GROUP_ID_NOT_FOUND",
    retriable=False,
    message="The group id does not exist.",
):
    pass


class FetchSessionIdNotFoundException(
    KafkaError,
    code=70,
    name="FETCH_SESSION_ID_NOT_FOUND",
    retriable=True,
    message="The fetch session ID was not found.",
):
    pass


class InvalidFetchSessionEpochException(
    KafkaError,
    code=71,
    name="INVALID_FETCH_SESSION_EPOCH",
    retriable=True,
    message="The fetch session epoch is invalid.",
):
    pass


class ListenerNotFoundException(
    KafkaError,
    code=72,
    name="LISTENER_NOT_FOUND",
    retriable=True,
    message="There is no listener on the leader broker that matches the listener on which metadata request was processed.",
):
    pass


class TopicDeletionDisabledException(
    KafkaError,
    code=73,
    name="TOPIC_DELETION_DISABLED",
    retriable=False,
    message="Topic deletion is disabled.",
):
    pass


class FencedLeaderEpochException(
    KafkaError,
    code=74,
    name="FENCED_LEADER_EPOCH",
    retriable=True,
    message="The leader epoch in the request is older than the epoch on the broker.",
):
    pass


class UnknownLeaderEpochException(
    KafkaError,
    code=75,
    name="UNKNOWN_LEADER_EPOCH",
    retriable=True,
    message="The leader epoch in the request is newer than the epoch on the broker.",
):
    pass


class UnsupportedCompressionTypeException(
    KafkaError,
    code=76,
    name="UNSUPPORTED_COMPRESSION_TYPE",
    retriable=False,
    message="The requesting client does not support the compression type of given partition.",
):
    pass


class StaleBrokerEpochException(
    KafkaError,
    code=77,
    name="STALE_BROKER_EPOCH",
    retriable=False,
    message="Broker epoch has changed.",
):
    pass


class OffsetNotAvailableException(
    KafkaError,
    code=78,
    name="OFFSET_NOT_AVAILABLE",
    retriable=True,
    message="The leader high watermark has not caught up from a recent leader election so the offsets cannot be guaranteed to be monotonically increasing.",
):
    pass


class MemberIdRequiredException(
    KafkaError,
    code=79,
    name="MEMBER_ID_REQUIRED",
    retriable=False,
    message="The group member needs to have a valid member id before actually entering a consumer group.",
):
    pass


class PreferredLeaderNotAvailableException(
    KafkaError,
    code=80,
    name="PREFERRED_LEADER_NOT_AVAILABLE",
    retriable=True,
    message="The preferred leader was not available.",
):
    pass


class GroupMaxSizeReachedException(
    KafkaError,
    code=81,
    name="GROUP_MAX_SIZE_REACHED",
    retriable=False,
    message="The consumer group has reached its max size.",
):
    pass


class FencedInstanceIdException(
    KafkaError,
    code=82,
    name="FENCED_INSTANCE_ID",
    retriable=False,
    message="The broker rejected this static consumer since another consumer with the same group.instance.id has registered with a different member.id.",
):
    pass


class EligibleLeadersNotAvailableException(
    KafkaError,
    code=83,
    name="ELIGIBLE_LEADERS_NOT_AVAILABLE",
    retriable=True,
    message="Eligible topic partition leaders are not available.",
):
    pass


class ElectionNotNeededException(
    KafkaError,
    code=84,
    name="ELECTION_NOT_NEEDED",
    retriable=True,
    message="Leader election not needed for topic partition.",
):
    pass


class NoReassignmentInProgressException(
    KafkaError,
    code=85,
    name="NO_REASSIGNMENT_IN_PROGRESS",
    retriable=False,
    message="No partition reassignment is in progress.",
):
    pass


class GroupSubscribedToTopicException(
    KafkaError,
    code=86,
    name="GROUP_SUBSCRIBED_TO_TOPIC",
    retriable=False,
    message="Deleting offsets of a topic is forbidden while the consumer group is actively subscribed to it.",
):
    pass


class InvalidRecordException(
    KafkaError,
    code=87,
    name="INVALID_RECORD",
    retriable=False,
    message="This record has failed the validation on broker and hence will be rejected.",
):
    pass


class UnstableOffsetCommitException(
    KafkaError,
    code=88,
    name="UNSTABLE_OFFSET_COMMIT",
    retriable=True,
    message="There are unstable offsets that need to be cleared.",
):
    pass


class ThrottlingQuotaExceededException(
    KafkaError,
    code=89,
    name="THROTTLING_QUOTA_EXCEEDED",
    retriable=True,
    message="The throttling quota has been exceeded.",
):
    pass


class ProducerFencedException(
    KafkaError,
    code=90,
    name="PRODUCER_FENCED",
    retriable=False,
    message="There is a newer producer with the same transactionalId which fences the current one.",
):
    pass


class ResourceNotFoundException(
    KafkaError,
    code=91,
    name="RESOURCE_NOT_FOUND",
    retriable=False,
    message="A request illegally referred to a resource that does not exist.",
):
    pass


class DuplicateResourceException(
    KafkaError,
    code=92,
    name="DUPLICATE_RESOURCE",
    retriable=False,
    message="A request illegally referred to the same resource twice.",
):
    pass


class UnacceptableCredentialException(
    KafkaError,
    code=93,
    name="UNACCEPTABLE_CREDENTIAL",
    retriable=False,
    message="Requested credential would not meet criteria for acceptability.",
):
    pass


class InconsistentVoterSetException(
    KafkaError,
    code=94,
    name="INCONSISTENT_VOTER_SET",
    retriable=False,
    message="Indicates that the either the sender or recipient of a voter-only request is not one of the expected voters.",
):
    pass


class InvalidUpdateVersionException(
    KafkaError,
    code=95,
    name="INVALID_UPDATE_VERSION",
    retriable=False,
    message="The given update version was invalid.",
):
    pass


class FeatureUpdateFailedException(
    KafkaError,
    code=96,
    name="FEATURE_UPDATE_FAILED",
    retriable=False,
    message="Unable to update finalized features due to an unexpected server error.",
):
    pass


class PrincipalDeserializationException(
    KafkaError,
    code=97,
    name="PRINCIPAL_DESERIALIZATION_FAILURE",
    retriable=False,
    message="Request principal deserialization failed during forwarding. This indicates an internal error on the broker cluster security setup.",
):
    pass


class SnapshotNotFoundException(
    KafkaError,
    code=98,
    name="SNAPSHOT_NOT_FOUND",
    retriable=False,
    message="Requested snapshot was not found.",
):
    pass


class PositionOutOfRangeException(
    KafkaError,
    code=99,
    name="POSITION_OUT_OF_RANGE",
    retriable=False,
    message="Requested position is not greater than or equal to zero, and less than the size of the snapshot.",
):
    pass


class UnknownTopicIdException(
    KafkaError,
    code=100,
    name="UNKNOWN_TOPIC_ID",
    retriable=True,
    message="This server does not host this topic ID.",
):
    pass


class DuplicateBrokerRegistrationException(
    KafkaError,
    code=101,
    name="DUPLICATE_BROKER_REGISTRATION",
    retriable=False,
    message="This broker ID is already in use.",
):
    pass


class BrokerIdNotRegisteredException(
    KafkaError,
    code=102,
    name="BROKER_ID_NOT_REGISTERED",
    retriable=False,
    message="The given broker ID was not registered.",
):
    pass


class InconsistentTopicIdException(
    KafkaError,
    code=103,
    name="INCONSISTENT_TOPIC_ID",
    retriable=True,
    message="The log's topic ID did not match the topic ID in the request.",
):
    pass


class InconsistentClusterIdException(
    KafkaError,
    code=104,
    name="INCONSISTENT_CLUSTER_ID",
    retriable=False,
    message="The clusterId in the request does not match that found on the server.",
):
    pass


class TransactionalIdNotFoundException(
    KafkaError,
    code=105,
    name="TRANSACTIONAL_ID_NOT_FOUND",
    retriable=False,
    message="The transactionalId could not be found.",
):
    pass


class FetchSessionTopicIdException(
    KafkaError,
    code=106,
    name="FETCH_SESSION_TOPIC_ID_ERROR",
    retriable=True,
    message="The fetch session encountered inconsistent topic ID usage.",
):
    pass


class IneligibleReplicaException(
    KafkaError,
    code=107,
    name="INELIGIBLE_REPLICA",
    retriable=False,
    message="The new ISR contains at least one ineligible replica.",
):
    pass


class NewLeaderElectedException(
    KafkaError,
    code=108,
    name="NEW_LEADER_ELECTED",
    retriable=False,
    message="The AlterPartition request successfully updated the partition state but the leader has changed.",
):
    pass


class OffsetMovedToTieredStorageException(
    KafkaError,
    code=109,
    name="OFFSET_MOVED_TO_TIERED_STORAGE",
    retriable=False,
    message="The requested offset is moved to tiered storage.",
):
    pass


class FencedMemberEpochException(
    KafkaError,
    code=110,
    name="FENCED_MEMBER_EPOCH",
    retriable=False,
    message="The member epoch is fenced by the group coordinator. The member must abandon all its partitions and rejoin.",
):
    pass


class UnreleasedInstanceIdException(
    KafkaError,
    code=111,
    name="UNRELEASED_INSTANCE_ID",
    retriable=False,
    message="The instance ID is still used by another member in the consumer group. That member must leave first.",
):
    pass


class UnsupportedAssignorException(
    KafkaError,
    code=112,
    name="UNSUPPORTED_ASSIGNOR",
    retriable=False,
    message="The assignor or its version range is not supported by the consumer group.",
):
    pass


class StaleMemberEpochException(
    KafkaError,
    code=113,
    name="STALE_MEMBER_EPOCH",
    retriable=False,
    message="The member epoch is stale. The member must retry after receiving its updated member epoch via the ConsumerGroupHeartbeat API.",
):
    pass


class MismatchedEndpointTypeException(
    KafkaError,
    code=114,
    name="MISMATCHED_ENDPOINT_TYPE",
    retriable=False,
    message="The request was sent to an endpoint of the wrong type.",
):
    pass


class UnsupportedEndpointTypeException(
    KafkaError,
    code=115,
    name="UNSUPPORTED_ENDPOINT_TYPE",
    retriable=False,
    message="This endpoint type is not supported yet.",
):
    pass


class UnknownControllerIdException(
    KafkaError,
    code=116,
    name="UNKNOWN_CONTROLLER_ID",
    retriable=False,
    message="This controller ID is not known.",
):
    pass


class UnknownSubscriptionIdException(
    KafkaError,
    code=117,
    name="UNKNOWN_SUBSCRIPTION_ID",
    retriable=False,
    message="Client sent a push telemetry request with an invalid or outdated subscription ID.",
):
    pass


class TelemetryTooLargeException(
    KafkaError,
    code=118,
    name="TELEMETRY_TOO_LARGE",
    retriable=False,
    message="Client sent a push telemetry request larger than the maximum size the broker will accept.",
):
    pass


class InvalidRegistrationException(
    KafkaError,
    code=119,
    name="INVALID_REGISTRATION",
    retriable=False,
    message="The controller has considered the broker registration to be invalid.",
):
    pass


class TransactionAbortableException(
    KafkaError,
    code=120,
    name="TRANSACTION_ABORTABLE",
    retriable=False,
    message="The server encountered an error with the transaction. The client can abort the transaction to continue using this transactional ID.",
):
    pass


class InvalidRecordStateException(
    KafkaError,
    code=121,
    name="INVALID_RECORD_STATE",
    retriable=False,
    message="The record state is invalid. The acknowledgement of delivery could not be completed.",
):
    pass


class ShareSessionNotFoundException(
    KafkaError,
    code=122,
    name="SHARE_SESSION_NOT_FOUND",
    retriable=True,
    message="The share session was not found.",
):
    pass


class InvalidShareSessionEpochException(
    KafkaError,
    code=123,
    name="INVALID_SHARE_SESSION_EPOCH",
    retriable=True,
    message="The share session epoch is invalid.",
):
    pass


class FencedStateEpochException(
    KafkaError,
    code=124,
    name="FENCED_STATE_EPOCH",
    retriable=False,
    message="The share coordinator rejected the request because the share-group state epoch did not match.",
):
    pass


class InvalidVoterKeyException(
    KafkaError,
    code=125,
    name="INVALID_VOTER_KEY",
    retriable=False,
    message="The voter key doesn't match the receiving replica's key.",
):
    pass


class DuplicateVoterException(
    KafkaError,
    code=126,
    name="DUPLICATE_VOTER",
    retriable=False,
    message="The voter is already part of the set of voters.",
):
    pass


class VoterNotFoundException(
    KafkaError,
    code=127,
    name="VOTER_NOT_FOUND",
    retriable=False,
    message="The voter is not part of the set of voters.",
):
    pass


class InvalidRegularExpression(
    KafkaError,
    code=128,
    name="INVALID_REGULAR_EXPRESSION",
    retriable=False,
    message="The regular expression is not valid.",
):
    pass


class RebootstrapRequiredException(
    KafkaError,
    code=129,
    name="REBOOTSTRAP_REQUIRED",
    retriable=False,
    message="Client metadata is stale. The client should rebootstrap to obtain new metadata.",
):
    pass


class StreamsInvalidTopologyException(
    KafkaError,
    code=130,
    name="STREAMS_INVALID_TOPOLOGY",
    retriable=False,
    message="The supplied topology is invalid.",
):
    pass


class StreamsInvalidTopologyEpochException(
    KafkaError,
    code=131,
    name="STREAMS_INVALID_TOPOLOGY_EPOCH",
    retriable=False,
    message="The supplied topology epoch is invalid.",
):
    pass


class StreamsTopologyFencedException(
    KafkaError,
    code=132,
    name="STREAMS_TOPOLOGY_FENCED",
    retriable=False,
    message="The supplied topology epoch is outdated.",
):
    pass


class ShareSessionLimitReachedException(
    KafkaError,
    code=133,
    name="SHARE_SESSION_LIMIT_REACHED",
    retriable=True,
    message="The limit of share sessions has been reached.",
):
    pass


class MalformedRequestException(InvalidRequestException):
    """A request or response whose bytes do not parse: truncated, a negative or
    oversized length, an array count larger than the bytes that remain, a tagged
    field whose size does not match its value. Raised by ``kfast.protocol``
    decoders before anything the input claims is allocated; on the wire it is
    INVALID_REQUEST (42), as Kafka answers unparseable requests."""


def for_code(code: int) -> type[KafkaError]:
    """The exception class for a wire error code (UnknownServerException if unknown)."""
    return _BY_CODE.get(code, _BY_CODE[-1])
