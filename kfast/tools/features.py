"""``kfast features``: the cluster's feature levels, like kafka-features.sh.

    kfast features -b H:P describe
    kfast features -b H:P upgrade --feature transaction.version=2 [--dry-run]
    kfast features -b H:P downgrade --feature transaction.version=0 [--unsafe] [--dry-run]
    kfast features -b H:P disable --feature transaction.version [--dry-run]

``describe`` asks a broker (ApiVersions v4: supported ranges, finalized
levels and their epoch) and prints Kafka's line per feature, sorted by name,
metadata.version levels by their release names. The others send
UpdateFeatures (v1, so each feature gets its own answer; a broker forwards it
to the active controller) with Kafka's upgrade types: upgrade, a safe
downgrade (``--unsafe``: unsafe), disable = a safe downgrade to level 0;
``--dry-run`` is validate_only. One line per feature as the Kafka tool
prints it; any failure ends with "N out of M operation(s) failed." and exit
status 1.
"""

from __future__ import annotations

import sys

from kfast.controller.feature_control import (
    METADATA_VERSION,
    SAFE_DOWNGRADE,
    UNSAFE_DOWNGRADE,
    UPGRADE,
)
from kfast.protocol import ApiVersionsRequest, UpdateFeaturesRequest, errors
from kfast.tools.cluster import EXIT_FAILURE, _connect
from kfast.tools.command_config import add_command_config

# metadata.version levels by their MetadataVersion names (the ones a kfast
# cluster can report; others print as numbers).
_METADATA_VERSION_NAMES = {21: "3.9-IV0"}


def _level_text(feature: str, level: int) -> str:
    if feature == METADATA_VERSION:
        return _METADATA_VERSION_NAMES.get(level, str(level))
    return str(level)


def describe(args) -> int:
    try:
        with _connect(args) as connection:
            response = connection.send(
                ApiVersionsRequest(
                    client_software_name="kfast-features", client_software_version="1"
                ),
                api_key=18,
                version=4,
            )
    except Exception as exc:
        print(f"Error while making request: {exc}", file=sys.stderr)
        return EXIT_FAILURE
    finalized = {f.name: f.max_version_level for f in response.finalized_features}
    epoch = response.finalized_features_epoch
    for feature in sorted(response.supported_features, key=lambda f: f.name):
        name = feature.name
        print(
            f"Feature: {name}\tSupportedMinVersion: {_level_text(name, feature.min_version)}"
            f"\tSupportedMaxVersion: {_level_text(name, feature.max_version)}"
            f"\tFinalizedVersionLevel: {_level_text(name, finalized.get(name, 0))}"
            f"\tEpoch: {epoch if epoch >= 0 else '-'}"
        )
    return 0


def _updates(args) -> list[tuple[str, int, int]] | str:
    """(feature, level, upgrade type) per --feature, or the problem."""
    found = []
    for text in args.feature:
        if args.action == "disable":
            name, level = text, 0
        else:
            name, sep, value = text.partition("=")
            if not sep or not value.strip().lstrip("-").isdigit():
                return f"Can't parse feature={text}: the format is feature=level"
            level = int(value)
        name = name.strip()
        if args.action == "upgrade":
            kind = UPGRADE
        else:
            kind = UNSAFE_DOWNGRADE if getattr(args, "unsafe", False) else SAFE_DOWNGRADE
        found.append((name, level, kind))
    if len({name for name, _, _ in found}) != len(found):
        return "A feature was named more than once."
    return found


def update(args) -> int:
    updates = _updates(args)
    if isinstance(updates, str):
        print(updates, file=sys.stderr)
        return EXIT_FAILURE
    Key = UpdateFeaturesRequest.FeatureUpdateKey
    request = UpdateFeaturesRequest(
        timeout_ms=args.timeout_ms,
        validate_only=args.dry_run,
        feature_updates=[
            Key(feature=name, max_version_level=level, upgrade_type=kind)
            for name, level, kind in updates
        ],
    )
    try:
        with _connect(args) as connection:
            response = connection.send(request, version=1, timeout=args.timeout_ms / 1000 + 5)
    except Exception as exc:
        print(f"Error while making request: {exc}", file=sys.stderr)
        return EXIT_FAILURE
    answers = {r.feature: (r.error_code, r.error_message) for r in response.results}
    failed = 0
    for name, level, kind in updates:
        code, message = answers.get(name, (response.error_code, response.error_message))
        if level == 0:
            verb, done = "disable", "disabled"
        elif kind == UPGRADE:
            verb, done = f"upgrade {name} to", f"upgraded to {_level_text(name, level)}"
        else:
            verb, done = f"downgrade {name} to", f"downgraded to {_level_text(name, level)}"
        if code == 0:
            print(f"{name} {'can be' if args.dry_run else 'was'} {done}.")
            continue
        failed += 1
        target = f"{name}" if level == 0 else _level_text(name, level)
        what = f"disable {target}" if level == 0 else f"{verb} {target}"
        reason = message or errors.for_code(code).__name__
        print(f"{'Can not' if args.dry_run else 'Could not'} {what}. {reason}")
    if failed:
        print(f"{failed} out of {len(updates)} operation(s) failed.", file=sys.stderr)
        return EXIT_FAILURE
    return 0


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "features",
        help="describe and update feature levels (like kafka-features.sh)",
        description="The cluster's finalized feature levels, like kafka-features.sh.",
    )
    p.add_argument("--bootstrap-server", "-b", required=True, metavar="HOST:PORT")
    add_command_config(p)
    actions = p.add_subparsers(dest="action", metavar="ACTION")
    actions.required = True
    d = actions.add_parser("describe", help="supported and finalized levels")
    d.set_defaults(handler=describe)
    for action, help_text in (
        ("upgrade", "raise features (--feature NAME=LEVEL)"),
        ("downgrade", "lower features (--feature NAME=LEVEL)"),
        ("disable", "set features to 0 (--feature NAME)"),
    ):
        a = actions.add_parser(action, help=help_text)
        a.add_argument(
            "--feature",
            action="append",
            required=True,
            metavar="NAME" if action == "disable" else "NAME=LEVEL",
        )
        if action == "downgrade":
            a.add_argument(
                "--unsafe", action="store_true", help="an unsafe downgrade (metadata may be lost)"
            )
        a.add_argument("--dry-run", action="store_true", help="validate only")
        a.add_argument("--timeout-ms", type=int, default=30000)
        a.set_defaults(handler=update)
