"""meta.properties: which cluster and node a log directory belongs to.

    meta.properties := Java properties text
        version=1           (KRaft; version 0 is the ZooKeeper-era layout)
        cluster.id=<base64 uuid>
        node.id=<int>       (version 0: broker.id)
        directory.id=<base64 uuid>   (optional)

Every log dir of a node must name the same cluster and node, and they must
agree with node.id in the configuration; otherwise the node refuses to start
and the error names the files involved.
"""

from __future__ import annotations

import base64
import os
import time
import uuid
from collections.abc import Iterable
from typing import NamedTuple

from kfast.config import format_properties, parse_properties
from kfast.protocol.errors import InconsistentClusterIdException
from kfast.storage.atomic_file import write_atomically

META_PROPERTIES_FILE = "meta.properties"


class InconsistentBrokerIdException(RuntimeError):
    """Log dirs disagree with each other or with node.id (Kafka's exception name)."""


class MetaPropertiesException(RuntimeError):
    """A meta.properties file is malformed."""


class MetaProperties(NamedTuple):
    version: int
    cluster_id: str | None
    node_id: int
    directory_id: str | None = None


def random_uuid_base64() -> str:
    """A Kafka Uuid in its string form: URL-safe base64 of 16 bytes, unpadded.
    As Kafka's Uuid.randomUuid, never one starting with "-" (a command line
    would take it for an option) nor the reserved zero uuid."""
    while True:
        text = uuid_base64(uuid.uuid4())
        if not text.startswith("-") and text != "AAAAAAAAAAAAAAAAAAAAAA":
            return text


def uuid_base64(value: uuid.UUID) -> str:
    """Kafka's Uuid.toString: URL-safe base64 of the 16 bytes, unpadded."""
    return base64.urlsafe_b64encode(value.bytes).rstrip(b"=").decode()


def parse_uuid_base64(text: str) -> uuid.UUID:
    """Kafka's Uuid.fromString: 22 characters of URL-safe base64 (ValueError otherwise)."""
    if len(text) != 22:
        raise ValueError(
            f"Input string with prefix `{text[:22]}` is too long to be decoded as a base64 UUID"
            if len(text) > 22
            else f"Input string `{text}` decoded as {len(text) * 3 // 4} bytes, which "
            f"is not equal to the expected 16 bytes of a base64-encoded UUID"
        )
    try:
        raw = base64.urlsafe_b64decode(text + "==")
    except (ValueError, TypeError) as exc:
        raise ValueError(f"Input string `{text}` is not base64: {exc}") from None
    if len(raw) != 16:
        raise ValueError(f"Input string `{text}` is not a 16-byte UUID")
    return uuid.UUID(bytes=raw)


def read_meta_properties(log_dir: str) -> MetaProperties | None:
    path = os.path.join(log_dir, META_PROPERTIES_FILE)
    try:
        with open(path, encoding="utf-8") as f:
            props = parse_properties(f.read())
    except FileNotFoundError:
        return None
    try:
        version = int(props.get("version", "0"))
        if version == 1:
            node = int(props["node.id"])
        elif version == 0:
            node = int(props["broker.id"])
        else:
            raise MetaPropertiesException(f"Unknown version {version} in {path}")
    except (KeyError, ValueError) as exc:
        raise MetaPropertiesException(f"Malformed {path}: {exc}") from None
    return MetaProperties(version, props.get("cluster.id"), node, props.get("directory.id"))


def write_meta_properties(log_dir: str, meta: MetaProperties) -> None:
    props = {
        "cluster.id": meta.cluster_id,
        "directory.id": meta.directory_id,
        "node.id": meta.node_id,
        "version": meta.version,
    }
    if meta.version == 0:
        props["broker.id"] = props.pop("node.id")
    props = {k: v for k, v in props.items() if v is not None}
    text = format_properties(
        props, header=["", time.strftime("%a %b %d %H:%M:%S UTC %Y", time.gmtime())]
    )
    write_atomically(os.path.join(log_dir, META_PROPERTIES_FILE), text.encode())


def ensure_meta_properties(
    log_dirs: list[str],
    node_id: int,
    cluster_id: str | None = None,
    reserved_broker_max_id: int = 1000,
) -> tuple[str, int]:
    """Check the meta.properties of every dir against each other and the
    configuration, write one into dirs that have none, and return the
    (cluster_id, node_id) in force. A configured node.id of -1 is taken from
    the dirs or generated above reserved.broker.max.id."""
    found = {d: read_meta_properties(d) for d in log_dirs}
    present = {d: m for d, m in found.items() if m is not None}

    def files(dirs: Iterable[str]) -> str:
        return ", ".join(os.path.join(d, META_PROPERTIES_FILE) for d in dirs)

    cluster_ids = {m.cluster_id for m in present.values() if m.cluster_id}
    if len(cluster_ids) > 1:
        raise InconsistentClusterIdException(
            f"Found different cluster ids {sorted(cluster_ids)} in {files(present)}"
        )
    if cluster_ids:
        stored = next(iter(cluster_ids))
        if cluster_id is not None and cluster_id != stored:
            raise InconsistentClusterIdException(
                f"The cluster id {cluster_id} does not match the stored cluster id {stored} in "
                f"{files(present)}"
            )
        cluster_id = stored
    node_ids = {m.node_id for m in present.values()}
    if len(node_ids) > 1:
        raise InconsistentBrokerIdException(
            f"Failed to match node.id across log.dirs: found {sorted(node_ids)} in {files(present)}"
        )
    if node_ids:
        stored_node = next(iter(node_ids))
        if node_id >= 0 and node_id != stored_node:
            raise InconsistentBrokerIdException(
                f"Configured node.id {node_id} doesn't match stored node.id {stored_node} in "
                f"{files(present)}. If you moved your data, make sure your configured node.id "
                f"matches. If you intend to create a new node, you should remove all data in "
                f"your data directories."
            )
        node_id = stored_node
    if node_id < 0:
        node_id = reserved_broker_max_id + 1 + (uuid.uuid4().int % 1_000_000)
    if cluster_id is None:
        cluster_id = random_uuid_base64()
    for d, meta in found.items():
        if meta is None:
            os.makedirs(d, exist_ok=True)
            write_meta_properties(d, MetaProperties(1, cluster_id, node_id, random_uuid_base64()))
    return cluster_id, node_id


def ensure_directory_id(log_dir: str) -> uuid.UUID:
    """The dir's directory.id (KIP-858), written into its meta.properties
    first if it has none (a dir formatted before directory ids, as Kafka's
    MetaPropertiesEnsemble does at start)."""
    meta = read_meta_properties(log_dir)
    if meta is None:
        raise FileNotFoundError(os.path.join(log_dir, META_PROPERTIES_FILE))
    if meta.directory_id is not None:
        return parse_uuid_base64(meta.directory_id)
    directory_id = random_uuid_base64()
    write_meta_properties(log_dir, meta._replace(directory_id=directory_id))
    return parse_uuid_base64(directory_id)
