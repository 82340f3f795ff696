"""A server that cannot go on: the one rule for KafkaBroker and
ControllerServer (a failed fsync of the metadata log, every log dir
failed). Kafka halts the process there; kfast sets ``failed``, which
``kfast serve`` (and the embedded node) waits on, and keeps ``fatal_error``
to say why before it shuts the server down and exits 1."""

from __future__ import annotations

import asyncio
import logging

logger = logging.getLogger(__name__)


class Halts:
    """Mixed into a server class; its ``__init__`` calls ``init_halt``."""

    failed: asyncio.Event
    fatal_error: str | None

    def init_halt(self) -> None:
        self.failed = asyncio.Event()
        self.fatal_error = None

    def halt(self, message: str) -> None:
        """The first reason wins; later ones are the same failure seen again."""
        if self.fatal_error is not None:
            return
        self.fatal_error = message
        logger.critical("%s", message)
        self.failed.set()
