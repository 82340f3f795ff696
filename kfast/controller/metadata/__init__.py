"""Cluster metadata: the image brokers serve from, and the records that build it."""
