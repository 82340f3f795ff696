"""Coordinators: deterministic state machines over internal topics.

``group/``: the group coordinator (classic JoinGroup/SyncGroup groups and
committed offsets on __consumer_offsets).
"""
