"""kraft.version (KIP-853) as a feature: supported 0-1, finalized at the level
of the node's Raft log (0 static voters, 1 dynamic), never a metadata record;
UpdateFeatures accepts only that level; a broker registering must support it."""

from kfast.controller.feature_control import (
    KRAFT_VERSION,
    UNSAFE_DOWNGRADE,
    UPGRADE,
    FeatureControlManager,
)
from kfast.controller.metadata.image import MetadataImage
from kfast.controller.snapshot import image_records
from kfast.protocol import errors


def test_supported_from_static_to_dynamic():
    assert FeatureControlManager().supported_features()[KRAFT_VERSION] == (0, 1)


def test_update_features_accepts_only_the_raft_logs_level():
    control = FeatureControlManager()
    for current in (0, 1):
        result = control.update_features(
            [(KRAFT_VERSION, current, UPGRADE)], 1, kraft_version=current
        )
        assert result.response == {KRAFT_VERSION: None} and result.records == []
        other = control.update_features(
            [(KRAFT_VERSION, 1 - current, UNSAFE_DOWNGRADE)], 1, kraft_version=current
        )
        error = other.response[KRAFT_VERSION]
        assert isinstance(error, errors.InvalidUpdateVersionException)
        assert f"only supports versions {current}-{current}" in str(error)


def test_not_written_as_a_feature_level_record():
    """The Raft layer's KRaftVersionRecord carries it: snapshots of the
    metadata image hold no FeatureLevelRecord for it."""
    image = MetadataImage(cluster_id="c", features={"metadata.version": 21})
    names = [getattr(r, "name", None) for r in image_records(image, 0)]
    assert KRAFT_VERSION not in names and "metadata.version" in names
