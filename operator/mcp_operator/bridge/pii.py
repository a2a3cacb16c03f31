"""PII detection and redaction in any JSON value: the detectors and the scanner.

Built-in detectors (each a :class:`Detector`: a ``kind`` and a ``find(text)`` that yields
spans) favour precision: a candidate must pass its checksum or structure rules before it
counts, and formats that are only digits need context where a checksum alone would match
too often. Kinds: ``email``, ``phone`` (E.164 and common national formats, never a bare digit
run), ``card`` (issuer prefix, length and Luhn), ``iban`` (country length and mod-97),
``us_ssn`` (dashed, SSA structure rules), ``nl_bsn`` (11-test; dotted, or after a ``BSN``
keyword), ``es_dni`` / ``es_nie`` (control letter), ``ipv4``, ``ipv6``.

More detectors come from the entry point group ``mcp_operator.pii_detectors``: an entry
point names a detector object or a zero-argument factory of one (a Presidio wrapper, say).
:class:`PiiScanner` walks strings (and keys, and integers as their digits) in nested
dicts and lists and reports kinds and counts only, never the values; with ``redact`` it
returns the value rewritten (``[REDACTED:email]``). What to do with a finding (the modes
``off | detect | redact | block``) is :mod:`mcp_operator.bridge.hooks`' job.
"""

from __future__ import annotations

import ipaddress
import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from importlib.metadata import EntryPoint, entry_points
from typing import Any, Protocol, runtime_checkable

from mcp_operator.bridge.checksums import (
    IBAN_LENGTHS,
    card_valid,
    es_dni_valid,
    es_nie_valid,
    iban_valid,
    nl_bsn_valid,
    us_ssn_valid,
)

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
_PHONE = re.compile(r"(?<![\w+.:/-])(?:\+|00)?\(?\d[\d ()/-]{6,20}\d(?![\w:/-]|\.\d)")
_NANP = re.compile(r"\(?[2-9]\d{2}\)?[ -]?[2-9]\d{2}[ -]\d{4}")
_TRUNK = re.compile(r"\(?0\d{1,4}\)?(?:[ /-]?\d{2,4}){2,4}")
_CARD = re.compile(r"(?<![\d-])\d(?:[ -]?\d){11,18}(?![\d]|-\d)")
_IBAN = re.compile(r"(?<![A-Za-z0-9])[A-Z]{2}\d{2}(?: ?[A-Z0-9]){11,30}")
_SSN = re.compile(r"(?<![\d-])(\d{3})([- ])(\d{2})\2(\d{4})(?![\d-])")
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
    found: list[Detector] = []
    for point in entry_points(group=DETECTOR_GROUP) if points is None else points:
        try:
            loaded = point.load()
            is_instance = isinstance(loaded, Detector) and not isinstance(loaded, type)
            detector = loaded if is_instance else loaded()
        except Exception as error:
            raise DetectorPluginError(
                f"PII detector plugin {point.name} ({point.value}) failed to load: {error}"
            ) from error
        if not isinstance(detector, Detector) or not isinstance(detector.kind, str):
            raise DetectorPluginError(
                f"PII detector plugin {point.name} ({point.value}) is not a detector: "
                "it needs a str attribute kind and a method find(text)"
            )
        found.append(detector)
    return found


# -- the scanner -----------------------------------------------------------------------------


@dataclass(frozen=True)
class ScanReport:
    """What a scan found: counts per kind (never the values) and the value, rewritten when
    redacting."""

    counts: Mapping[str, int]
    value: Any

    @property
    def found(self) -> bool:
        return bool(self.counts)


def redaction(kind: str) -> str:
    return f"[REDACTED:{kind}]"


_SKIPPED_BLOBS = {"image": "data", "audio": "data"}
"""MCP content whose base64 payload is not text to scan (``{"type": "image", "data": …}``)."""


class PiiScanner:
    """Runs detectors over every string of a JSON value."""

    def __init__(self, detectors: Iterable[Detector]) -> None:
        self.detectors = list(detectors)
        self._gated = [
            (rank, d, int(getattr(d, "min_digits", 0)), getattr(d, "trigger", None))
            for rank, d in enumerate(self.detectors)
        ]
        self._count_digits = any(min_digits > 0 for _, _, min_digits, _ in self._gated)

    def spans(self, text: str) -> list[tuple[int, int, str]]:
        """Non-overlapping findings ``(start, end, kind)``; the earlier detector wins a tie,
        the longer span wins an overlap that starts first."""
        digits = digit_count(text) if self._count_digits else 0
        found: list[tuple[int, int, str, int]] = []
        for rank, detector, min_digits, trigger in self._gated:
            if digits < min_digits or (trigger is not None and trigger not in text):
                continue
            found.extend((start, end, detector.kind, rank) for start, end in detector.find(text))
        if not found:
            return []
        found.sort(key=lambda f: (f[0], f[3], -(f[1] - f[0])))
        kept: list[tuple[int, int, str]] = []
        for start, end, kind, _ in found:
            if kept and start < kept[-1][1]:
                continue
            kept.append((start, end, kind))
        return kept

    def _text(self, text: str, counts: Counter[str], redact: bool) -> str:
        spans = self.spans(text)
        for _, _, kind in spans:
            counts[kind] += 1
        if not redact or not spans:
            return text
        pieces: list[str] = []
        position = 0
        for start, end, kind in spans:
            pieces.append(text[position:start])
            pieces.append(redaction(kind))
            position = end
        pieces.append(text[position:])
        return "".join(pieces)

    def _walk(self, value: Any, counts: Counter[str], redact: bool) -> Any:
        if isinstance(value, str):
            return self._text(value, counts, redact)
        if isinstance(value, bool) or value is None or isinstance(value, float):
            return value
        if isinstance(value, int):
            text = str(value)
            rewritten = self._text(text, counts, redact)
            return value if rewritten == text else rewritten
        if isinstance(value, list | tuple):
            return [self._walk(item, counts, redact) for item in value]
        if isinstance(value, Mapping):
            content_type = value.get("type")
            skipped = _SKIPPED_BLOBS.get(content_type) if isinstance(content_type, str) else None
            result: dict[Any, Any] = {}
            for key, item in value.items():
                new_key = self._text(key, counts, redact) if isinstance(key, str) else key
                while new_key in result:  # two keys redacted alike: keep both
                    new_key = f"{new_key}#"
                if key == skipped or key == "blob":
                    result[new_key] = item
                else:
                    result[new_key] = self._walk(item, counts, redact)
            return result
        return value

    def scan(self, value: Any, *, redact: bool = False) -> ScanReport:
        """Find PII anywhere in ``value``; with ``redact``, also return it rewritten."""
        counts: Counter[str] = Counter()
        rewritten = self._walk(value, counts, redact)
        return ScanReport(dict(counts), rewritten if redact else value)


def default_scanner(points: Iterable[EntryPoint] | None = None) -> PiiScanner:
    """The built-in detectors plus the plugins'."""
    return PiiScanner([*builtin_detectors(), *load_plugin_detectors(points)])
