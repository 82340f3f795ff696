"""``kfast console``: a read-only web console for any Kafka-compatible
cluster, speaking only the Kafka protocol (``kfast serve --console-port``
runs it beside the broker).

- ``queries``: what is asked of the cluster, as JSON-ready dicts
- ``app``: the aiohttp server: JSON API and the static page
- ``command``: the ``kfast console`` subcommand
- ``static/``: the page, its script (charts drawn as inline SVG) and styles
"""
