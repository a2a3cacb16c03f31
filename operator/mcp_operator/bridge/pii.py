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

:class:`PiiScanner` makes a value hard to walk around: it scans every string leaf and key,
numbers as their decimal text (floats included), and a resource's ``blob`` or an image's or
audio's ``data`` when it decodes to text; each text after :func:`normalise` (NFKC, digits of
every script as ASCII, zero-width and format characters removed, dashes, dots and spaces of
other scripts folded), so that a look-alike character cannot hide a value from the patterns;
small base64 runs inside a string decoded and scanned; and the *seams* between adjacent
strings (their ends joined directly and with a space), so that a value split across fields is
found where the pieces meet. The work per call is bounded (``max_chars`` per direction; the
report says ``unscanned`` when the value was larger) and linear in the input: long texts are
scanned a window at a time, which also lets a scan in a worker thread give the event loop
back often. It reports kinds and counts only, never the values; with ``redact`` it returns
the value rewritten (``[REDACTED:email]``, mapped back onto the original characters; a
redacted blob stays base64). What to do with a finding (the modes ``off | detect | redact |
block``) is :mod:`mcp_operator.bridge.hooks`' job. What it does not catch is listed in
docs/security.md.
"""

from __future__ import annotations

import base64
import bisect
import ipaddress
import re
import unicodedata
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from importlib.metadata import EntryPoint
from typing import Any, Literal, Protocol, TypeGuard, runtime_checkable

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


# -- normalisation ---------------------------------------------------------------------------

_SEPARATORS = {
    **{code: "." for code in (0x00B7, 0x2027, 0x3002, 0x30FB, 0xFF61, 0xFF65)},
    0x2212: "-",  # minus sign
}
"""Separators folded beyond NFKC (which already folds the fullwidth forms and most spaces):
dots of other scripts to ``.``; every dash (category ``Pd``) becomes ``-`` too."""


class _Folding(dict[int, str]):
    """The ``str.translate`` table of :func:`normalise`, filled on first sight of a character
    (bounded: the table stops growing, the answers stay right)."""

    LIMIT = 65536

    def __missing__(self, code: int) -> str:
        folded = "".join(_fold(char) for char in unicodedata.normalize("NFKC", chr(code)))
        if len(self) < self.LIMIT:
            self[code] = folded
        return folded


def _fold(char: str) -> str:
    category = unicodedata.category(char)
    if category == "Cf":  # zero-width spaces and joiners, soft hyphens, BOMs, bidi marks
        return ""
    if category == "Nd":
        return str(unicodedata.decimal(char))
    if category == "Pd":
        return "-"
    if category == "Zs":
        return " "
    return _SEPARATORS.get(ord(char), char)


_FOLDING = _Folding({code: chr(code) for code in range(128)})


def normalise(text: str) -> str:
    """``text`` as the detectors read it: NFKC per character, digits of every script as ASCII
    digits, zero-width and other format characters removed, dashes, dots and spaces of other
    scripts folded to ``-``, ``.`` and a space. ASCII text is returned as it is."""
    return text if text.isascii() else text.translate(_FOLDING)


def _origins(text: str) -> list[int]:
    """For each character of ``normalise(text)``, the index in ``text`` it came from (plus one
    past the end), to map a finding in the normalised text back onto the original."""
    origins: list[int] = []
    for index, char in enumerate(text):
        origins.extend([index] * len(_FOLDING[ord(char)]))
    origins.append(len(text))
    return origins


# -- the scanner -----------------------------------------------------------------------------

MAX_SCAN_CHARS = 2 * 1024 * 1024
"""Characters scanned per direction of one call (strings, keys, numbers and decoded blobs);
what lies beyond is *unscanned*, and the policy decides what that means."""

SMALL_BLOB_CHARS = 64 * 1024
"""A ``blob`` or image/audio ``data`` up to this many base64 characters is decoded and scanned
when it is text; a larger one only when its ``mimeType`` says text."""

MAX_BASE64_RUN = 4096
"""A base64-looking run inside a string up to this long is decoded and scanned when it is
text (an address encoded to slip past the patterns)."""

MIN_BASE64_RUN = 12

CHUNK_CHARS = 32 * 1024
"""A longer text is scanned a window at a time (:meth:`PiiScanner._chunked`)."""
CHUNK_CONTEXT = 512
"""Characters of context either side of a window: more than any finding is long."""

SEAM_CHARS = 128
"""Of each string, this many characters at either end take part in the seam scan: a value
split across adjacent fields (``"john.doe"``, ``"@example.com"``) is found where they meet."""

SEAM_JOINERS = ("", " ")
"""How adjacent strings are joined for the seam scan: directly, and with a space (the
separator the digit formats accept)."""

_BASE64_RUN = re.compile(rf"[A-Za-z0-9+/_-]{{{MIN_BASE64_RUN},}}={{0,2}}")
_TEXT_TYPES = ("text/", "application/json", "application/xml", "application/x-yaml")


@dataclass(frozen=True)
class ScanReport:
    """What a scan found: counts per kind (never the values) and the value, rewritten when
    redacting."""

    counts: Mapping[str, int]
    value: Any
    unscanned: bool = False
    """The value was larger than the scan's budget: only its first part was scanned."""

    @property
    def found(self) -> bool:
        return bool(self.counts)


OFFLOAD_CHARS = 256 * 1024
"""A value with at least this many characters of text is scanned off the event loop."""


def text_size(value: Any, limit: int) -> int:
    """How many characters of text ``value`` holds (strings and keys), counted up to
    ``limit`` (a quick walk, to decide where to scan it)."""
    total = 0
    pending = [value]
    while pending and total < limit:
        item = pending.pop()
        if isinstance(item, str):
            total += len(item)
        elif isinstance(item, Mapping):
            total += sum(len(key) for key in item if isinstance(key, str))
            pending.extend(item.values())
        elif isinstance(item, list | tuple):
            pending.extend(item)
    return total


def redaction(kind: str) -> str:
    return f"[REDACTED:{kind}]"


Finding = tuple[int, int, str]


@dataclass
class _Leaf:
    """One scanned text of the value: a string, a key, a number's text or a decoded blob."""

    original: str
    text: str
    """``normalise(original)``."""
    seam: bool
    """Whether it takes part in the seam scan (strings and keys; not numbers or blobs)."""
    key: bool = False
    """A mapping key (the values-only seam chain leaves keys out)."""
    rest: str = ""
    """What did not fit in the scan's budget: kept as it is, after ``original``."""
    findings: list[Finding] = field(default_factory=list)
    """What was found in it, alone or at a seam with its neighbours (``text``'s
    coordinates)."""

    def redacted(self) -> str:
        if not self.findings:
            return self.original + self.rest
        origins = _origins(self.original) if self.text is not self.original else None
        pieces: list[str] = []
        position = 0
        for start, end, kind in _merged(self.findings):
            if origins is not None:
                start, end = origins[start], origins[end - 1] + 1
            if start < position:
                continue
            pieces.append(self.original[position:start])
            pieces.append(redaction(kind))
            position = end
        pieces.append(self.original[position:])
        pieces.append(self.rest)
        return "".join(pieces)


def _merged(findings: list[Finding]) -> list[Finding]:
    """Findings sorted and without overlaps (the earlier one keeps an overlapping range)."""
    kept: list[Finding] = []
    for finding in sorted(findings):
        if kept and finding[0] < kept[-1][1]:
            start, end, kind = kept[-1]
            kept[-1] = (start, max(end, finding[1]), kind)
            continue
        kept.append(finding)
    return kept


@dataclass
class _Slot:
    """Where a leaf sits in the value being rebuilt."""

    leaf: int
    kind: Literal["text", "number", "blob"]
    value: Any = None
    """The original number, or the blob's encoding (``"std"``/``"url"``)."""


class _Walk:
    """One scan: the leaves collected in order, under the budget, and the value's skeleton."""

    def __init__(self, budget: int) -> None:
        self.leaves: list[_Leaf] = []
        self.remaining = budget
        self.unscanned = False

    def _take(self, text: str, seam: bool, key: bool = False, partial: bool = False) -> int | None:
        """The index of a new leaf for ``text``; ``None`` when the budget is spent. A string
        that does not fit is scanned in its first part (``partial``), the rest kept as is."""
        rest = ""
        if len(text) > self.remaining:
            self.unscanned = True
            if not partial or not self.remaining:
                self.remaining = 0
                return None
            text, rest = text[: self.remaining], text[self.remaining :]
        self.remaining -= len(text)
        self.leaves.append(_Leaf(text, normalise(text), seam, key, rest=rest))
        return len(self.leaves) - 1

    def text(self, text: str, key: bool = False) -> Any:
        index = self._take(text, seam=True, key=key, partial=True)
        return text if index is None else _Slot(index, "text")

    def number(self, number: int | float) -> Any:
        if isinstance(number, float):
            if number != number or number in (float("inf"), float("-inf")):
                return number
            shown = str(int(number)) if number.is_integer() else repr(number)
        else:
            shown = str(number)
        index = self._take(shown, seam=False)
        return number if index is None else _Slot(index, "number", number)

    def blob(self, encoded: str, mime_type: Any) -> Any:
        texty = isinstance(mime_type, str) and mime_type.startswith(_TEXT_TYPES)
        if len(encoded) > SMALL_BLOB_CHARS and not texty:
            return encoded
        decoded = _decoded_text(encoded)
        if decoded is None:
            return encoded
        text, encoding = decoded
        index = self._take(text, seam=False)
        return encoded if index is None else _Slot(index, "blob", encoding)

    def value(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, bool) or value is None:
            return value
        if isinstance(value, int | float):
            return self.number(value)
        if isinstance(value, list | tuple):
            return [self.value(item) for item in value]
        if isinstance(value, Mapping):
            content_type = value.get("type")
            payload = _BLOBS.get(content_type) if isinstance(content_type, str) else None
            skeleton: list[tuple[Any, Any]] = []
            for key, item in value.items():
                new_key = self.text(key, key=True) if isinstance(key, str) else key
                if (key == payload or key == "blob") and isinstance(item, str):
                    skeleton.append((new_key, self.blob(item, value.get("mimeType"))))
                else:
                    skeleton.append((new_key, self.value(item)))
            return _Mapping(skeleton)
        return value


@dataclass
class _Mapping:
    items: list[tuple[Any, Any]]


_BLOBS = {"image": "data", "audio": "data"}
"""MCP content whose base64 payload is ``data`` (a resource's is ``blob``)."""


def _decoded_text(encoded: str) -> tuple[str, str] | None:
    """The UTF-8 text that ``encoded`` (standard or URL-safe base64) holds, and which alphabet
    it used; ``None`` when it is not base64 or not text."""
    compact = "".join(encoded.split())
    url = "-" in compact or "_" in compact
    try:
        raw = base64.b64decode(
            compact + "=" * (-len(compact) % 4), altchars=b"-_" if url else None, validate=True
        )
        text = raw.decode("utf-8")
    except (ValueError, UnicodeDecodeError):
        return None
    printable = sum(1 for char in text if char.isprintable() or char in "\t\n\r")
    if not text or printable < len(text) * 0.95:
        return None
    return text, "url" if url else "std"


def _encoded(text: str, encoding: str) -> str:
    raw = text.encode("utf-8")
    return (base64.urlsafe_b64encode if encoding == "url" else base64.b64encode)(raw).decode()


class PiiScanner:
    """Runs detectors over every string of a JSON value."""

    def __init__(self, detectors: Iterable[Detector], max_chars: int = MAX_SCAN_CHARS) -> None:
        self.detectors = list(detectors)
        self.max_chars = max_chars
        self._gated = [
            (rank, d, int(getattr(d, "min_digits", 0)), getattr(d, "trigger", None))
            for rank, d in enumerate(self.detectors)
        ]
        self._count_digits = any(min_digits > 0 for _, _, min_digits, _ in self._gated)

    def spans(self, text: str) -> list[Finding]:
        """Non-overlapping findings ``(start, end, kind)`` in ``text`` as it is (normalising is
        :meth:`find`'s job); the earlier detector wins a tie, the longer span wins an overlap
        that starts first."""
        digits = digit_count(text) if self._count_digits else 0
        found: list[tuple[int, int, str, int]] = []
        for rank, detector, min_digits, trigger in self._gated:
            if digits < min_digits or (trigger is not None and trigger not in text):
                continue
            found.extend((start, end, detector.kind, rank) for start, end in detector.find(text))
        if not found:
            return []
        found.sort(key=lambda f: (f[0], f[3], -(f[1] - f[0])))
        kept: list[Finding] = []
        for start, end, kind, _ in found:
            if kept and start < kept[-1][1]:
                continue
            kept.append((start, end, kind))
        return kept

    def find(self, text: str, *, decode: bool = True) -> list[Finding]:
        """Findings in an already normalised ``text``, and in the small base64 runs in it
        that decode to text (such a run counts as one finding per finding inside it)."""
        found = self.spans(text) if len(text) <= CHUNK_CHARS else self._chunked(text)
        if not decode or len(text) < MIN_BASE64_RUN:
            return found
        extra: list[Finding] = []
        ends = [end for _, end, _ in found]  # sorted: the findings do not overlap
        for match in _BASE64_RUN.finditer(text):
            start, end = match.span()
            if end - start > MAX_BASE64_RUN:
                continue
            before = bisect.bisect_right(ends, start)  # the first finding ending after start
            if before < len(found) and found[before][0] < end:
                continue  # the run overlaps a finding
            decoded = _decoded_text(match.group())
            if decoded is None:
                continue
            inner = self.find(normalise(decoded[0]), decode=False)
            extra.extend((start, end, kind) for _, _, kind in inner)
        return sorted(found + extra) if extra else found

    def _chunked(self, text: str) -> list[Finding]:
        """:meth:`spans` of a long text, a window at a time: each window is a chunk with
        ``CHUNK_CONTEXT`` characters either side, and keeps the findings that start in its
        chunk. Each regular-expression pass is then short, so a scan in a worker thread
        gives the event loop the interpreter back often (a pass over megabytes would hold it
        for as long as it runs)."""
        found: list[Finding] = []
        for chunk in range(0, len(text), CHUNK_CHARS):
            origin = max(0, chunk - CHUNK_CONTEXT)
            window = text[origin : chunk + CHUNK_CHARS + CHUNK_CONTEXT]
            for start, end, kind in self.spans(window):
                if chunk <= origin + start < chunk + CHUNK_CHARS:
                    finding = (origin + start, origin + end, kind)
                    if not found or finding[0] >= found[-1][1]:
                        found.append(finding)
        return found

    def _seams(self, leaves: list[_Leaf]) -> list[str]:
        """Find values split across adjacent strings: scan the ends of neighbouring strings
        joined, and keep what crosses a join (what lies inside one string was found there).
        Adds the findings to the leaves they touch; returns their kinds, one per finding."""
        kinds: list[str] = []
        every = [leaf for leaf in leaves if leaf.seam and leaf.text]
        values = [leaf for leaf in every if not leaf.key]
        # Two passes: every string joined directly (an address split anywhere, keys included),
        # and the values alone joined with a space (digits split across a mapping's values).
        passes = [(every, SEAM_JOINERS[0]), (values, SEAM_JOINERS[1])]
        for chain, joiner in ((c, j) for c, j in passes if len(c) > 1):
            pieces: list[str] = []
            places: list[tuple[int, int, _Leaf, int]] = []  # seam start, end, leaf, leaf offset
            position = 0
            for number, leaf in enumerate(chain):
                if number:
                    pieces.append(joiner)
                    position += len(joiner)
                text = leaf.text
                if len(text) <= 2 * SEAM_CHARS:
                    parts = [(text, 0)]
                else:
                    parts = [(text[:SEAM_CHARS], 0), (text[-SEAM_CHARS:], len(text) - SEAM_CHARS)]
                for index, (part, offset) in enumerate(parts):
                    if index:
                        pieces.append("\0")  # the middle of a long string is not a seam
                        position += 1
                    pieces.append(part)
                    places.append((position, position + len(part), leaf, offset))
                    position += len(part)
            seam = "".join(pieces)
            starts = [place[0] for place in places]
            for start, end, kind in self.find(seam, decode=False):
                first = max(0, bisect.bisect_right(starts, start) - 1)
                last = bisect.bisect_left(starts, end)
                touched = [p for p in places[first:last] if p[0] < end and start < p[1]]
                if len(touched) < 2:
                    continue
                ranges = [
                    (leaf, max(start, a) - a + offset, min(end, b) - a + offset)
                    for a, b, leaf, offset in touched
                ]
                if any(  # it grew out of a finding counted already (alone or at a seam)
                    s < local_end and local_start < e
                    for leaf, local_start, local_end in ranges
                    for s, e, _ in leaf.findings
                ):
                    continue
                for leaf, local_start, local_end in ranges:
                    leaf.findings.append((local_start, local_end, kind))
                kinds.append(kind)
        return kinds

    def scan(self, value: Any, *, redact: bool = False) -> ScanReport:
        """Find PII anywhere in ``value``; with ``redact``, also return it rewritten.

        Scanned: every string, key and number (as its decimal text), and each ``blob`` or
        image/audio ``data`` that decodes to text; each after :func:`normalise`; small base64
        runs decoded; and the seams between adjacent strings. At most ``max_chars`` of it:
        the rest is left as it is and the report says ``unscanned``.
        """
        walk = _Walk(self.max_chars)
        skeleton = walk.value(value)
        counts: Counter[str] = Counter()
        for leaf in walk.leaves:
            leaf.findings = self.find(leaf.text)
            counts.update(kind for _, _, kind in leaf.findings)
        counts.update(self._seams(walk.leaves))
        if not redact or not counts:
            return ScanReport(dict(counts), value, walk.unscanned)
        return ScanReport(dict(counts), _rebuilt(skeleton, walk.leaves), walk.unscanned)


def _rebuilt(skeleton: Any, leaves: list[_Leaf]) -> Any:
    if isinstance(skeleton, _Slot):
        leaf = leaves[skeleton.leaf]
        if skeleton.kind == "number":
            return skeleton.value if not leaf.findings else leaf.redacted()
        if skeleton.kind == "blob":
            return _encoded(leaf.redacted(), skeleton.value)
        return leaf.redacted()
    if isinstance(skeleton, list):
        return [_rebuilt(item, leaves) for item in skeleton]
    if isinstance(skeleton, _Mapping):
        result: dict[Any, Any] = {}
        for key, item in skeleton.items:
            new_key = _rebuilt(key, leaves)
            while new_key in result:  # two keys redacted alike: keep both
                new_key = f"{new_key}#"
            result[new_key] = _rebuilt(item, leaves)
        return result
    return skeleton


def default_scanner(points: Iterable[EntryPoint] | None = None) -> PiiScanner:
    """The built-in detectors plus the plugins'."""
    return PiiScanner([*builtin_detectors(), *load_plugin_detectors(points)])
