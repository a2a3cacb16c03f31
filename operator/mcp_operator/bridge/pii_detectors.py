"""The PII detectors: the :class:`Detector` interface, the built-in ones, and the plugins'.

Built-in detectors (each a :class:`Detector`: a ``kind`` and a ``find(text)`` that yields
spans) favour precision: a candidate must pass its checksum or structure rules
(:mod:`~mcp_operator.bridge.checksums`) before it counts, and formats that are only digits
need context where a checksum alone would match too often. Kinds: ``email``, ``phone``
(E.164 and common national formats, never a bare digit run), ``card`` (issuer prefix, length
and Luhn), ``iban`` (country length and mod-97), ``us_ssn`` (dashed, SSA structure rules),
``nl_bsn`` (11-test; dotted, or after a ``BSN`` keyword), ``es_dni`` / ``es_nie`` (control
letter), ``ipv4``, ``ipv6``.

More detectors come from the entry point group ``mcp_operator.pii_detectors``: an entry
point names a detector object or a zero-argument factory of one (a Presidio wrapper, say).

A detector reads text already normalised; running the detectors over a JSON value is
:mod:`~mcp_operator.bridge.pii`'s job.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from importlib.metadata import EntryPoint
from typing import Protocol, TypeGuard, runtime_checkable

from mcp_operator.bridge.checksums import (
    IBAN_LENGTHS,
    card_valid,
    es_dni_valid,
    es_nie_valid,
    iban_valid,
    nl_bsn_valid,
    us_ssn_valid,
)
from mcp_operator.bridge.plugins import load_plugins

DETECTOR_GROUP = "mcp_operator.pii_detectors"
"""Entry point group of pluggable detectors."""

Span = tuple[int, int]


@runtime_checkable
class Detector(Protocol):
    """Finds one kind of PII in a string."""

    @property
    def kind(self) -> str:
        """Short name used in audit lines and in ``[REDACTED:<kind>]``."""
        ...

    def find(self, text: str) -> Iterable[Span]:
        """``(start, end)`` of every occurrence in ``text``."""
        ...


# A detector may also say what a text needs before ``find`` is worth calling; the scanner
# checks these once per string, so most strings never reach most patterns:
#   min_digits: int    -- fewer ASCII digits than this: nothing to find
#   trigger: str       -- a substring every finding contains ("@" for e-mail addresses)


@dataclass(frozen=True)
class PatternDetector:
    """A detector from a regular expression and a check of each match (the checksum)."""

    kind: str
    pattern: re.Pattern[str]
    check: Callable[[re.Match[str], str], bool]
    min_digits: int = 0
    trigger: str | None = None

    def find(self, text: str) -> Iterable[Span]:
        return [m.span() for m in self.pattern.finditer(text) if self.check(m, text)]


_NO_ASCII_DIGITS = str.maketrans("", "", "0123456789")


def digit_count(text: str) -> int:
    """ASCII digits in ``text`` (at C speed: most text has too few for any digit-based kind,
    and then those detectors are skipped without running their patterns)."""
    return len(text) - len(text.translate(_NO_ASCII_DIGITS))


def _digits(text: str) -> str:
    return "".join(c for c in text if c.isdigit())


def _always(match: re.Match[str], text: str) -> bool:
    return True


# -- the built-in detectors ------------------------------------------------------------------

_EMAIL = re.compile(
    r"(?<![\w.%+-])[A-Za-z0-9._%+-]{1,64}@(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)+"
    r"[A-Za-z]{2,24}(?![\w-])"
)
_PHONE = re.compile(r"(?<![\w+.:/-])(?:\+|00)?\(?\d[\d ()/.-]{6,20}\d(?![\w:/-]|\.\d)")
_NANP = re.compile(r"\(?[2-9]\d{2}\)?[ .-]?[2-9]\d{2}[ .-]\d{4}")
_TRUNK = re.compile(r"\(?0\d{1,4}\)?(?:[ /.-]?\d{2,4}){2,4}")
_CARD = re.compile(r"(?<![\d-])\d(?:[ -]?\d){11,18}(?![\d]|-\d)")
_CARD_DOTTED = re.compile(r"(?<![\d.])\d{4}(?:\.\d{4}){2,3}(?![\d]|\.\d)")
_IBAN = re.compile(r"(?<![A-Za-z0-9])[A-Z]{2}\d{2}(?: ?[A-Z0-9]){11,30}")
_SSN = re.compile(r"(?<![\d-])(?<!\d\.)(\d{3})([- .])(\d{2})\2(\d{4})(?![\d-])(?!\.\d)")
_BSN_DOTTED = re.compile(r"(?<![\d.])\d{4}\.\d{2}\.\d{3}(?![\d.])")
_BSN_KEYWORD = re.compile(
    r"(?i:\b(?:bsn|burgerservicenummer|sofi-?nummer)\b)[^0-9]{0,24}(?<!\d)(\d{9})(?!\d)"
)
_DNI = re.compile(r"(?<![A-Za-z0-9])(\d{8})-?([A-Z])(?![A-Za-z0-9])")
_NIE = re.compile(r"(?<![A-Za-z0-9])([XYZ])-?(\d{7})-?([A-Z])(?![A-Za-z0-9])")
_IPV4 = re.compile(r"(?<![\w.])(?:\d{1,3}\.){3}\d{1,3}(?![\w]|\.\d)")
_IPV6 = re.compile(
    r"(?<![\w:.])(?:[0-9A-Fa-f]{0,4}:){2,7}(?:(?:\d{1,3}\.){3}\d{1,3}|[0-9A-Fa-f]{0,4})(?![\w:])"
)


def _phone(match: re.Match[str], text: str) -> bool:
    candidate = match.group().strip()
    digits = _digits(candidate)
    if candidate.startswith("+"):
        return 8 <= len(digits) <= 15 and digits[0] != "0"
    if candidate.startswith("00"):
        return 8 <= len(digits) - 2 <= 15 and digits[2] != "0" and not candidate.isdigit()
    if _NANP.fullmatch(candidate):
        return True
    separated = not candidate.isdigit()
    return separated and 9 <= len(digits) <= 11 and _TRUNK.fullmatch(candidate) is not None


def _card(match: re.Match[str], text: str) -> bool:
    return card_valid(_digits(match.group()))


def _ssn(match: re.Match[str], text: str) -> bool:
    return us_ssn_valid(match.group(1), match.group(3), match.group(4))


def _bsn(match: re.Match[str], text: str) -> bool:
    return nl_bsn_valid(_digits(match.group()))


def _ip(match: re.Match[str], text: str) -> bool:
    try:
        ipaddress.ip_address(match.group())
    except ValueError:
        return False
    return True


def _ipv6(match: re.Match[str], text: str) -> bool:
    """A valid IPv6 address with at least three groups written out, or an IPv4 tail: so
    ``::1`` (loopback, not personal) and ``a::b`` (a path in code) are not findings."""
    candidate = match.group()
    groups = [g for g in candidate.split(":") if g]
    return _ip(match, text) and (len(groups) >= 3 or "." in candidate)


class IbanDetector:
    """IBANs, compact or in groups of four; the country's length decides where one ends."""

    kind = "iban"
    min_digits = 4  # the check digits and more (NO's BBAN, the shortest, has eleven)

    def find(self, text: str) -> Iterable[Span]:
        for match in _IBAN.finditer(text):
            expected = IBAN_LENGTHS.get(match.group()[:2])
            if expected is None:
                continue
            taken = 0
            end = match.start()
            for index, char in enumerate(match.group()):
                if char != " ":
                    taken += 1
                if taken == expected:
                    end = match.start() + index + 1
                    break
            compact = text[match.start() : end].replace(" ", "")
            if taken == expected and iban_valid(compact):
                yield match.start(), end


class Ipv6Detector:
    """IPv6 addresses: only in a text with ``::`` or at least seven colons."""

    kind = "ipv6"
    trigger = ":"

    def find(self, text: str) -> Iterable[Span]:
        if "::" not in text and text.count(":") < 7:
            return []
        return [m.span() for m in _IPV6.finditer(text) if _ipv6(m, text)]


class BsnDetector:
    """Dutch BSN: dotted (``1234.56.782``) anywhere, nine bare digits only after a keyword."""

    kind = "nl_bsn"
    min_digits = 9

    def find(self, text: str) -> Iterable[Span]:
        for match in _BSN_DOTTED.finditer(text):
            if _bsn(match, text):
                yield match.span()
        for match in _BSN_KEYWORD.finditer(text):
            if nl_bsn_valid(match.group(1)):
                yield match.span(1)


def builtin_detectors() -> list[Detector]:
    """The built-in detectors, most specific first (it wins where two overlap)."""
    return [
        PatternDetector("email", _EMAIL, _always, trigger="@"),
        IbanDetector(),
        PatternDetector("card", _CARD, _card, min_digits=12),
        PatternDetector("card", _CARD_DOTTED, _card, min_digits=12, trigger="."),
        PatternDetector("us_ssn", _SSN, _ssn, min_digits=9),
        BsnDetector(),
        PatternDetector(
            "es_dni", _DNI, lambda m, t: es_dni_valid(m.group(1), m.group(2)), min_digits=8
        ),
        PatternDetector(
            "es_nie",
            _NIE,
            lambda m, t: es_nie_valid(m.group(1), m.group(2), m.group(3)),
            min_digits=7,
        ),
        PatternDetector("ipv4", _IPV4, _ip, min_digits=4, trigger="."),
        Ipv6Detector(),
        PatternDetector("phone", _PHONE, _phone, min_digits=8),
    ]


class DetectorPluginError(RuntimeError):
    """A detector plugin could not be loaded or is not a detector; names the entry point."""


def load_plugin_detectors(
    points: Iterable[EntryPoint] | None = None,
) -> list[Detector]:
    """The detectors of the ``mcp_operator.pii_detectors`` entry points (or of ``points``)."""
    return load_plugins(
        DETECTOR_GROUP,
        points,
        interface=Detector,
        accepts=_is_detector,
        what="PII detector plugin",
        needs="a detector: it needs a str attribute kind and a method find(text)",
        error=DetectorPluginError,
    )


def _is_detector(plugin: object) -> TypeGuard[Detector]:
    return isinstance(plugin, Detector) and isinstance(plugin.kind, str)
