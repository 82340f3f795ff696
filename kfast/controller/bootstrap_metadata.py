"""The bootstrap metadata of a new cluster (Kafka's BootstrapDirectory and
BootstrapMetadata).

``kfast storage format --add-scram`` writes ``bootstrap.checkpoint`` into the
metadata log directory (beside ``__cluster_metadata-0/``, not in it): a file
in KRaft snapshot format (kfast.raft.snapshots) whose data records are the
records the first active controller commits into an empty metadata log, the
FeatureLevelRecords and then the UserScramCredentialRecords given. Without
the file the controller commits the default records
(FeatureControlManager.bootstrap_records), as Kafka falls back to the
configured metadata.version.

The file is read when the controller is built; a file that is not a whole
snapshot stops the start, as Kafka's BatchFileReader fails on it.
"""

from __future__ import annotations

import os

from kfast.controller.metadata.records import MetadataRecord, decode_record, encode_record
from kfast.raft.snapshots import (
    BOOTSTRAP_SNAPSHOT_ID,
    iter_snapshot_batches,
    read_snapshot_file,
    write_snapshot_file,
)

BOOTSTRAP_FILENAME = "bootstrap.checkpoint"


class BootstrapMetadataError(Exception):
    """A bootstrap.checkpoint the controller cannot read."""


def bootstrap_path(metadata_dir: str) -> str:
    return os.path.join(metadata_dir, BOOTSTRAP_FILENAME)


def write_bootstrap_metadata(metadata_dir: str, records: list[MetadataRecord]) -> str:
    """Write ``records`` as the bootstrap metadata (atomically, fsynced)."""
    path = bootstrap_path(metadata_dir)
    write_snapshot_file(
        path, iter_snapshot_batches(records, BOOTSTRAP_SNAPSHOT_ID.epoch, encode_record)
    )
    return path


def read_bootstrap_records(metadata_dir: str) -> list[MetadataRecord] | None:
    """The records of ``metadata_dir``'s bootstrap.checkpoint, None without one."""
    path = bootstrap_path(metadata_dir)
    if not os.path.exists(path):
        return None
    records = read_snapshot_file(path, lambda value: decode_record(value)[0])
    if records is None:
        raise BootstrapMetadataError(f"{path} is not a valid bootstrap metadata file")
    return records
