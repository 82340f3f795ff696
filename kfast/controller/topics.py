"""Topic names (Kafka's org.apache.kafka.common.internals.Topic).

Legal names are 1..249 characters of [a-zA-Z0-9._-], not "." or "..".
'.' and '_' may collide in metric names, so two topics whose names differ
only there cannot both exist.
"""

from __future__ import annotations

import re

from kfast.protocol import errors

# Defined by the storage layer, which must know it without importing up.
from kfast.storage.manager import CLUSTER_METADATA_TOPIC_NAME  # noqa: F401

TOPIC_MAX_NAME_LENGTH = 249
GROUP_METADATA_TOPIC_NAME = "__consumer_offsets"
TRANSACTION_STATE_TOPIC_NAME = "__transaction_state"
INTERNAL_TOPICS = frozenset({GROUP_METADATA_TOPIC_NAME, TRANSACTION_STATE_TOPIC_NAME})
_LEGAL_TOPIC_NAME = re.compile(r"[a-zA-Z0-9._-]+")


def validate_topic_name(name: str | None) -> None:
    """Raise InvalidTopicException for an illegal name (Topic.validate)."""
    if not name:
        raise errors.InvalidTopicException("Topic name is illegal, it can't be empty")
    if name in (".", ".."):
        raise errors.InvalidTopicException('Topic name cannot be "." or ".."')
    if len(name) > TOPIC_MAX_NAME_LENGTH:
        raise errors.InvalidTopicException(
            f"Topic name is illegal, it can't be longer than {TOPIC_MAX_NAME_LENGTH} "
            f"characters, topic name: {name}"
        )
    if not _LEGAL_TOPIC_NAME.fullmatch(name):
        raise errors.InvalidTopicException(
            f'Topic name "{name}" is illegal, it contains a character other than ASCII '
            f"alphanumerics, '.', '_' and '-'"
        )


def unify_collision_chars(name: str) -> str:
    """The form in which colliding names are equal (Topic.unifyCollisionChars)."""
    return name.replace(".", "_")


def is_internal(name: str) -> bool:
    return name in INTERNAL_TOPICS
