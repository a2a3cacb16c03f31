"""A JSON value as the PII scanner reads it: its texts normalised, walked into leaves, rebuilt.

- **Normalising** (:func:`normalise`): NFKC per character, digits of every script as ASCII,
  zero-width and format characters removed, dashes, dots and spaces of other scripts folded,
  so that a look-alike character cannot hide a value from the patterns; a finding in the
  normalised text is mapped back onto the original characters when it is redacted.
- **The walk** (:class:`Walk`): every string, key and number (as its decimal text) of the
  value, and each ``blob`` or image/audio ``data`` that decodes to text, becomes a
  :class:`Leaf`, in order, until the scan's budget is spent (the rest is kept as it is); the
  value's skeleton remembers where each leaf sits.
- **Rebuilding** (:func:`rebuilt`): the value again, each leaf with its findings redacted
  (``[REDACTED:email]``; a redacted blob stays base64 in its alphabet).

Which detectors run over the leaves, and the seams between them, is
:mod:`~mcp_operator.bridge.pii`'s.
"""

from __future__ import annotations

import base64
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

SMALL_BLOB_CHARS = 64 * 1024
"""A ``blob`` or image/audio ``data`` up to this many base64 characters is decoded and scanned
when it is text; a larger one only when its ``mimeType`` says text."""
_TEXT_TYPES = ("text/", "application/json", "application/xml", "application/x-yaml")


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


def redaction(kind: str) -> str:
    return f"[REDACTED:{kind}]"


Finding = tuple[int, int, str]


@dataclass
class Leaf:
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


class Walk:
    """One scan: the leaves collected in order, under the budget, and the value's skeleton."""

    def __init__(self, budget: int) -> None:
        self.leaves: list[Leaf] = []
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
        self.leaves.append(Leaf(text, normalise(text), seam, key, rest=rest))
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
        decoded = decoded_text(encoded)
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


def decoded_text(encoded: str) -> tuple[str, str] | None:
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


def rebuilt(skeleton: Any, leaves: list[Leaf]) -> Any:
    if isinstance(skeleton, _Slot):
        leaf = leaves[skeleton.leaf]
        if skeleton.kind == "number":
            return skeleton.value if not leaf.findings else leaf.redacted()
        if skeleton.kind == "blob":
            return _encoded(leaf.redacted(), skeleton.value)
        return leaf.redacted()
    if isinstance(skeleton, list):
        return [rebuilt(item, leaves) for item in skeleton]
    if isinstance(skeleton, _Mapping):
        result: dict[Any, Any] = {}
        for key, item in skeleton.items:
            new_key = rebuilt(key, leaves)
            while new_key in result:  # two keys redacted alike: keep both
                new_key = f"{new_key}#"
            result[new_key] = rebuilt(item, leaves)
        return result
    return skeleton
