"""ScramControlManager: SCRAM credentials as metadata records (Kafka's
ScramControlManager).

State: (user, mechanism type) -> ScramCredential, built from
UserScramCredentialRecords and RemoveUserScramCredentialRecords. The client
of AlterUserScramCredentials sends the salted password (never the
password); the controller derives the stored and server keys from it, so the
log holds what a SCRAM server needs and nothing that logs in by itself.

Validation, per user, as Kafka's alterCredentials: a (user, mechanism) pair
named twice in one request (deletions and upsertions together) is
DUPLICATE_RESOURCE for that user (the pair rule of Kafka's ZkAdminManager
and of kafka-configs.sh's documented example, which sets SCRAM-SHA-256 and
SCRAM-SHA-512 for one user in one request; Kafka 3.x's KRaft controller keys
the check by user alone and refuses that example); an empty
name UNACCEPTABLE_CREDENTIAL; an unknown mechanism UNSUPPORTED_SASL_MECHANISM;
iterations outside [4096, 16384] UNACCEPTABLE_CREDENTIAL; deleting a
credential that does not exist RESOURCE_NOT_FOUND. The records of every
valid alteration are committed in one batch.
"""

from __future__ import annotations

from kfast.controller.controller_result import ControllerResult
from kfast.controller.metadata.records import (
    MetadataRecord,
    RemoveUserScramCredentialRecord,
    UserScramCredentialRecord,
)
from kfast.protocol import errors
from kfast.security.scram import MECHANISM_TYPES, ScramCredential

__all__ = ["ScramControlManager", "scram_record"]

_TWICE = "A user credential cannot be altered twice in the same request"


def scram_record(
    user: str, mechanism_type: int, credential: ScramCredential
) -> UserScramCredentialRecord:
    return UserScramCredentialRecord(
        name=user,
        mechanism=mechanism_type,
        salt=credential.salt,
        stored_key=credential.stored_key,
        server_key=credential.server_key,
        iterations=credential.iterations,
    )


class ScramControlManager:
    def __init__(self) -> None:
        self.credentials: dict[tuple[str, int], ScramCredential] = {}

    @staticmethod
    def _check_user_and_mechanism(user: str, mechanism_type: int) -> errors.KafkaError | None:
        if not user:
            return errors.UnacceptableCredentialException("Username must not be empty")
        if mechanism_type not in MECHANISM_TYPES:
            return errors.UnsupportedSaslMechanismException("Unknown SCRAM mechanism")
        return None

    def alter_credentials(
        self, deletions: list[tuple[str, int]], upsertions: list[tuple[str, int, int, bytes, bytes]]
    ) -> ControllerResult[list[tuple[str, errors.KafkaError | None]]]:
        """deletions: (user, mechanism type); upsertions: (user, mechanism
        type, iterations, salt, salted password). Response: [(user,
        KafkaError | None)], deletions first, then upsertions, then errors."""
        to_delete: dict[tuple[str, int], tuple[str, int]] = {}
        to_upsert: dict[tuple[str, int], tuple[str, int, int, bytes, bytes]] = {}
        failed: dict[str, errors.KafkaError] = {}
        for user, mechanism_type in deletions:
            key = (user, mechanism_type)
            if user in failed:
                continue
            if to_delete.pop(key, None) is not None:
                failed[user] = errors.DuplicateResourceException(_TWICE)
                continue
            error = self._check_user_and_mechanism(user, mechanism_type)
            if error is None and key not in self.credentials:
                error = errors.ResourceNotFoundException(
                    "Attempt to delete a user credential that does not exist"
                )
            if error is not None:
                failed[user] = error
            else:
                to_delete[key] = key
        for upsertion in upsertions:
            user, mechanism_type, iterations = upsertion[0], upsertion[1], upsertion[2]
            key = (user, mechanism_type)
            if user in failed:
                continue
            if to_delete.pop(key, None) is not None or to_upsert.pop(key, None) is not None:
                failed[user] = errors.DuplicateResourceException(_TWICE)
                continue
            error = self._check_user_and_mechanism(user, mechanism_type)
            if error is None:
                mechanism = MECHANISM_TYPES[mechanism_type]
                if iterations < mechanism.min_iterations:
                    error = errors.UnacceptableCredentialException("Too few iterations")
                elif iterations > mechanism.max_iterations:
                    error = errors.UnacceptableCredentialException("Too many iterations")
            if error is not None:
                failed[user] = error
            else:
                to_upsert[key] = upsertion
        # A user with one failed alteration has none applied (one result per user).
        results: list[tuple[str, errors.KafkaError | None]] = []
        records: list[MetadataRecord] = []
        succeeded: dict[str, errors.KafkaError | None] = {}
        for user, mechanism_type in to_delete.values():
            if user not in failed:
                succeeded[user] = None
                records.append(RemoveUserScramCredentialRecord(name=user, mechanism=mechanism_type))
        for user, mechanism_type, iterations, salt, salted_password in to_upsert.values():
            if user not in failed:
                credential = ScramCredential.from_salted_password(
                    MECHANISM_TYPES[mechanism_type], bytes(salt), bytes(salted_password), iterations
                )
                succeeded[user] = None
                records.append(scram_record(user, mechanism_type, credential))
        results.extend(succeeded.items())
        results.extend(failed.items())
        return ControllerResult(results, records)

    def replay(self, record: UserScramCredentialRecord | RemoveUserScramCredentialRecord) -> None:
        key = (record.name, record.mechanism)
        if isinstance(record, UserScramCredentialRecord):
            self.credentials[key] = ScramCredential(
                bytes(record.salt),
                bytes(record.stored_key),
                bytes(record.server_key),
                record.iterations,
            )
        elif self.credentials.pop(key, None) is None:
            raise ValueError(f"Unable to find credential to delete: {key}")
