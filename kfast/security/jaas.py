"""sasl.jaas.config values (Kafka's JaasConfig parser, one login module).

Grammar (JAAS configuration file syntax, as Kafka reads the property)::

    config  := entry+
    entry   := class flag option* ";"
    flag    := "required" | "requisite" | "sufficient" | "optional"
    option  := name "=" value
    value   := '"' (any char but '"', "\\" escapes the next) * '"' | bare word

Kafka requires exactly one entry per listener and mechanism; so does kfast.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from kfast.config import ConfigException

__all__ = ["JaasEntry", "parse_jaas_config"]

_FLAGS = ("required", "requisite", "sufficient", "optional")
_TOKEN = re.compile(
    r'\s*(?:(?P<quoted>"(?:\\.|[^"\\])*")|(?P<punct>[=;])|(?P<word>[^\s=;"]+))', re.S
)


@dataclass(frozen=True)
class JaasEntry:
    login_module: str
    flag: str
    options: dict[str, str] = field(default_factory=dict)


def _tokens(text: str, name: str):
    position = 0
    text = text.rstrip()
    while position < len(text):
        match = _TOKEN.match(text, position)
        if match is None or match.end() == position:
            raise ConfigException(
                name, "[hidden]", f"Invalid JAAS config: unexpected text at position {position}"
            )
        position = match.end()
        if match.group("quoted") is not None:
            yield "value", re.sub(r"\\(.)", r"\1", match.group("quoted")[1:-1], flags=re.S)
        elif match.group("punct") is not None:
            yield match.group("punct"), match.group("punct")
        else:
            yield "word", match.group("word")


def parse_jaas_config(text: str, name: str = "sasl.jaas.config") -> JaasEntry:
    """The one login module of ``text``; ConfigException (never echoing the
    value: it holds passwords) when it does not parse."""

    def fail(reason: str) -> ConfigException:
        return ConfigException(name, "[hidden]", f"Invalid JAAS config: {reason}")

    tokens = list(_tokens(text or "", name))
    entries, i = [], 0
    while i < len(tokens):
        if i + 1 >= len(tokens) or tokens[i][0] != "word" or tokens[i + 1][0] != "word":
            raise fail("expected a login module class and a control flag")
        module, flag = tokens[i][1], tokens[i + 1][1].lower()
        if flag not in _FLAGS:
            raise fail(f"invalid control flag {tokens[i + 1][1]}")
        i += 2
        options = {}
        while i < len(tokens) and tokens[i][0] != ";":
            if not (
                i + 2 < len(tokens)
                and tokens[i][0] == "word"
                and tokens[i + 1][0] == "="
                and tokens[i + 2][0] in ("word", "value")
            ):
                raise fail("expected option=value")
            options[tokens[i][1]] = tokens[i + 2][1]
            i += 3
        if i >= len(tokens):
            raise fail("a login module must end with ';'")
        i += 1
        entries.append(JaasEntry(module, flag, options))
    if len(entries) != 1:
        raise fail(f"expected one login module, found {len(entries)}")
    return entries[0]
