"""The broker's log output: per-logger levels from the server config, and
optional JSON lines.

Kafka sets logger levels in log4j's properties file; kfast reads the same
lines from server.properties (or ``--override``), so a Kafka user's
``log4j.properties`` lines work as they are:

    log4j.rootLogger=INFO, stdout          # the root level (appenders ignored)
    log4j.logger.kfast.server=DEBUG        # one logger (and those below it)
    kfast.log.format=json                  # one JSON object per line

Level names are log4j's (TRACE, DEBUG, INFO, WARN, ERROR, FATAL, OFF;
kfast.controller.config_describer.LOG4J_LEVELS). At runtime the same levels
are read and changed with DescribeConfigs / IncrementalAlterConfigs on the
BROKER_LOGGER resource (``kfast configs --entity-type broker-loggers``);
like Kafka's, those runtime changes are not persisted.

A JSON line holds ``time`` (ISO 8601, UTC, milliseconds), ``level`` (log4j's
name), ``logger`` and ``message``, plus ``exception`` (the formatted
traceback) when one was logged.
"""

from __future__ import annotations

import datetime
import json
import logging
import sys
from typing import TextIO

from kfast.config import (
    LOG4J_LOGGER_PREFIX,
    LOG4J_ROOT_LOGGER,
    LOG_FORMAT,
    ConfigException,
    KafkaConfig,
)
from kfast.controller.config_describer import LOG4J_LEVELS, kafka_level_name

TEXT_FORMAT = "[%(asctime)s] %(levelname)s %(message)s (%(name)s)"


class JsonFormatter(logging.Formatter):
    """One JSON object per record, on one line."""

    def format(self, record: logging.LogRecord) -> str:
        line = {
            "time": datetime.datetime.fromtimestamp(record.created, datetime.UTC)
            .isoformat(timespec="milliseconds")
            .replace("+00:00", "Z"),
            "level": kafka_level_name(record.levelno),
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return json.dumps(line, ensure_ascii=False)


def configured_levels(config: KafkaConfig) -> dict[str, int]:
    """{logger name ("" for the root): level} from the log4j lines of the
    config; ConfigException for a level log4j does not know."""
    levels = {}
    for name, raw in config.extra.items():
        if name == LOG4J_ROOT_LOGGER:
            logger = ""
        elif name.startswith(LOG4J_LOGGER_PREFIX) and len(name) > len(LOG4J_LOGGER_PREFIX):
            logger = name[len(LOG4J_LOGGER_PREFIX) :]
        else:
            continue
        # log4j's value is "LEVEL, appender, ...": the level comes first.
        level = str(raw).split(",")[0].strip().upper()
        if level not in LOG4J_LEVELS:
            raise ConfigException(name, raw, f"not a log level: one of {', '.join(LOG4J_LEVELS)}")
        levels[logger] = LOG4J_LEVELS[level]
    return levels


def configure_logging(config: KafkaConfig | None = None, stream: TextIO | None = None) -> None:
    """The process's log handler (text or JSON lines on stderr) and the
    configured logger levels; INFO for the root unless configured."""
    fmt = str(config.extra.get(LOG_FORMAT, "text")).strip().lower() if config else "text"
    if fmt not in ("text", "json"):
        raise ConfigException(LOG_FORMAT, fmt, "expected text or json")
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else logging.Formatter(TEXT_FORMAT))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    for name, level in (configured_levels(config) if config else {}).items():
        (logging.getLogger(name) if name else root).setLevel(level)
