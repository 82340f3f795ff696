"""Counters and histograms the broker's hot paths update in place.

Everything here is plain Python objects with int/float attributes: a produce
or a fetch adds to them on the event loop's thread, with no lock and no
Prometheus object involved. The Prometheus endpoint
(``kfast.server.metrics_exporter``) copies them on the loop at scrape time
and turns the copy into Kafka's metric names. ``kfast.metrics.otlp`` decodes
the OTLP payloads clients push with KIP-714's PushTelemetry.
"""
