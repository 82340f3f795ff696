"""ssl.principal.mapping.rules: a client certificate's subject -> a user name
(Kafka's SslPrincipalMapper).

Grammar (Kafka's, rules separated by commas)::

    rules := rule ("," rule)*
    rule  := "DEFAULT"                          the whole distinguished name
           | "RULE:" pattern "/" replacement "/" ["L" | "U"]
                                                pattern must match the whole
                                                DN; the name is the DN with
                                                pattern replaced ($1.. groups),
                                                lower- or upper-cased

A "/" or "\\" inside pattern or replacement is escaped with "\\". The first
rule that applies wins; a DN no rule applies to fails the connection's
authentication, as in Kafka.
"""

from __future__ import annotations

import re
from collections.abc import Callable

__all__ = ["NoMatchingRule", "SslPrincipalMapper"]

# Kafka's RULE_PATTERN and RULE_SPLITTER, in Python's regex dialect.
_RULE = r"(DEFAULT)|RULE:((\\.|[^\\/])*)/((\\.|[^\\/])*)/([LU]?).*?|(.*?)"
_SPLITTER = re.compile(r"\s*(" + _RULE + r")\s*(,\s*|$)")
_PARSER = re.compile(_RULE)
_BACK_REFERENCE = re.compile(r"\$(\d+)")


class NoMatchingRule(ValueError):
    pass


class _Rule:
    __slots__ = ("pattern", "replacement", "lower", "upper")

    def __init__(
        self,
        pattern: str | None,
        replacement: str = "",  # always given with a pattern (the grammar's group 4)
        lower: bool = False,
        upper: bool = False,
    ):
        self.pattern = None if pattern is None else re.compile(pattern)
        self.replacement = replacement
        self.lower = lower
        self.upper = upper

    def apply(self, dn: str) -> str | None:
        if self.pattern is None:  # DEFAULT
            return dn
        if self.pattern.fullmatch(dn) is None:
            return None
        result = self.pattern.sub(_java_replacement(self.replacement, self.pattern.groups), dn)
        if self.lower:
            return result.lower()
        if self.upper:
            return result.upper()
        return result


def _java_replacement(replacement: str, groups: int) -> Callable[[re.Match[str]], str]:
    """Java's replaceAll replacement: $n is a group (a number above the
    group count loses digits from the right until it is one, as Kafka's
    escapeLiteralBackReferences; with no group it stays literal), "\\x" is x."""

    def expand(match: re.Match[str]) -> str:
        out = []
        i, text = 0, replacement
        while i < len(text):
            ch = text[i]
            if ch == "\\" and i + 1 < len(text):
                out.append(text[i + 1])
                i += 2
                continue
            ref = _BACK_REFERENCE.match(text, i) if ch == "$" else None
            if ref is not None and groups and not ref.group(1).startswith("0"):
                digits = ref.group(1)
                index = int(digits)
                while index > groups and index >= 10:
                    index //= 10
                    digits = digits[:-1]
                if index <= groups:
                    out.append(match.group(index) or "")
                    i += 1 + len(digits)
                    continue
            out.append(ch)
            i += 1
        return "".join(out)

    return expand


class SslPrincipalMapper:
    def __init__(self, rules: str | None = "DEFAULT"):
        parsed = [self._parse(rule) for rule in self._split(rules or "DEFAULT")]
        self.rules = [rule for rule in parsed if rule is not None]

    @staticmethod
    def _split(text: str) -> list[str]:
        text = text.strip()
        found, position = [], 0
        while position <= len(text):
            match = _SPLITTER.search(text, position)
            if match is None:
                break
            found.append(match.group(1))
            if match.end() == position:  # the empty match at the end
                break
            position = match.end()
        return found

    @staticmethod
    def _parse(rule: str) -> _Rule | None:
        match = _PARSER.match(rule)
        if match is None or match.end() != len(rule):
            raise ValueError(f"Invalid rule: {rule}")
        if match.group(1) is not None:
            return _Rule(None)
        if match.group(2) is not None:
            return _Rule(
                match.group(2), match.group(4), match.group(6) == "L", match.group(6) == "U"
            )
        return None  # an empty rule is ignored

    def name(self, distinguished_name: str) -> str:
        for rule in self.rules:
            result = rule.apply(distinguished_name)
            if result is not None:
                return result
        raise NoMatchingRule(f"No rules apply to {distinguished_name}")
