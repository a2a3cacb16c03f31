"""PII detection and redaction in any JSON value: the scanner.

The detectors it runs are :mod:`~mcp_operator.bridge.pii_detectors`' (built-in, and from the
entry point group ``mcp_operator.pii_detectors``); how a value is walked into texts and
rebuilt is :mod:`~mcp_operator.bridge.pii_leaves`'.

:class:`PiiScanner` makes a value hard to walk around: it scans every string leaf and key,
numbers as their decimal text (floats included), and a resource's ``blob`` or an image's or
audio's ``data`` when it decodes to text; each text after
:func:`~mcp_operator.bridge.pii_leaves.normalise` (NFKC, digits of every script as ASCII,
zero-width and format characters removed, dashes, dots and spaces of other scripts folded),
so that a look-alike character cannot hide a value from the patterns; small base64 runs
inside a string decoded and scanned; and the *seams* between adjacent strings (their ends
joined directly and with a space), so that a value split across fields is found where the
pieces meet. The work per call is bounded (``max_chars`` per direction; the report says
``unscanned`` when the value was larger) and linear in the input: long texts are scanned a
window at a time, which also lets a scan in a worker thread give the event loop back often.
It reports kinds and counts only, never the values; with ``redact`` it returns the value
rewritten (``[REDACTED:email]``, mapped back onto the original characters; a redacted blob
stays base64). What to do with a finding (the modes ``off | detect | redact | block``) is
:mod:`mcp_operator.bridge.hooks`' job. What it does not catch is listed in docs/security.md.
"""

from __future__ import annotations

import bisect
import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from importlib.metadata import EntryPoint
from typing import Any

from mcp_operator.bridge.pii_detectors import (
    Detector,
    builtin_detectors,
    digit_count,
    load_plugin_detectors,
)
from mcp_operator.bridge.pii_leaves import Finding, Leaf, Walk, decoded_text, normalise, rebuilt

MAX_SCAN_CHARS = 2 * 1024 * 1024
"""Characters scanned per direction of one call (strings, keys, numbers and decoded blobs);
what lies beyond is *unscanned*, and the policy decides what that means."""

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
            decoded = decoded_text(match.group())
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

    def _seams(self, leaves: list[Leaf]) -> list[str]:
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
            places: list[tuple[int, int, Leaf, int]] = []  # seam start, end, leaf, leaf offset
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
        walk = Walk(self.max_chars)
        skeleton = walk.value(value)
        counts: Counter[str] = Counter()
        for leaf in walk.leaves:
            leaf.findings = self.find(leaf.text)
            counts.update(kind for _, _, kind in leaf.findings)
        counts.update(self._seams(walk.leaves))
        if not redact or not counts:
            return ScanReport(dict(counts), value, walk.unscanned)
        return ScanReport(dict(counts), rebuilt(skeleton, walk.leaves), walk.unscanned)


def default_scanner(points: Iterable[EntryPoint] | None = None) -> PiiScanner:
    """The built-in detectors plus the plugins'."""
    return PiiScanner([*builtin_detectors(), *load_plugin_detectors(points)])
