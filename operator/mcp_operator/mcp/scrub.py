"""Masking secret values in text a server chose: :class:`Scrubber`, pure.

A server can echo a header value it received (an ``Authorization`` token) into a
tool description, its ``serverInfo`` or an error message, and the operator
writes those into status, Events, logs and CLI output. A :class:`Scrubber`
knows the header values in use and replaces every occurrence with ``***``: the
value itself and each long token in it (``Bearer s3cr3t`` → also ``s3cr3t``),
matched case-insensitively, and in the forms a server would naturally echo:
base64 (standard and URL-safe, at any alignment inside a longer base64 text),
percent-encoding and JSON string escaping. A value cut off where the text was
cut (ending in ``…``) is masked too; :meth:`Scrubber.json` masks every string (keys
included) of a JSON value. What to scrub is the caller's choice
(:mod:`~mcp_operator.mcp.discovery` scrubs every discovered string,
:mod:`~mcp_operator.mcp.errors` every failure message, the bridge's call pipeline every
upstream failure before the agent or the audit sees it).
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import quote, quote_plus

MASK = "***"
MIN_VALUE_CHARS = 4
"""A header value shorter than this is not masked (it would mask ordinary words)."""
MIN_TOKEN_CHARS = 8
"""A whitespace-separated part of a value is masked on its own from this length."""
MIN_CUT_CHARS = 8
"""A value cut off at the end of a text (``…``) is masked from this many characters."""


def _base64_forms(secret: bytes) -> set[str]:
    """The base64 text of ``secret`` wherever it starts inside a longer encoded text: for each
    of the three alignments, only the characters that depend on ``secret`` alone."""
    forms: set[str] = set()
    for shift in range(3):
        encoded = base64.b64encode(b"\0" * shift + secret).decode()
        start = (shift * 4 + 2) // 3  # characters touched by the padding bytes in front
        end = (
            (shift + len(secret)) // 3
        ) * 4  # whole groups only: the rest depends on what follows
        core = encoded[start:end]
        if len(core) >= MIN_TOKEN_CHARS:
            forms.add(core)
            forms.add(core.replace("+", "-").replace("/", "_"))
    whole = base64.b64encode(secret).decode()
    forms.update({whole, whole.rstrip("="), base64.urlsafe_b64encode(secret).decode().rstrip("=")})
    return forms


def forms_of(value: str) -> set[str]:
    """Every text form of one secret value that is masked."""
    found: set[str] = set()
    plain = {value.strip()} if len(value.strip()) >= MIN_VALUE_CHARS else set()
    plain.update(token for token in value.split() if len(token) >= MIN_TOKEN_CHARS)
    for text in plain:
        found.add(text)
        found.add(quote(text, safe=""))
        found.add(quote_plus(text, safe=""))
        found.add(json.dumps(text)[1:-1])
        found.add(json.dumps(text, ensure_ascii=False)[1:-1])
        found.update(_base64_forms(text.encode("utf-8", "surrogatepass")))
    return {form for form in found if len(form) >= MIN_VALUE_CHARS}


class Scrubber:
    """Replaces every form of the given secret values in a text with ``***``."""

    def __init__(self, values: Iterable[str]) -> None:
        forms: set[str] = set()
        for value in values:
            forms |= forms_of(value)
        ordered = sorted(forms, key=len, reverse=True)
        self._pattern = (
            re.compile("|".join(re.escape(form) for form in ordered), re.IGNORECASE)
            if ordered
            else None
        )
        self._forms = [form.lower() for form in ordered]

    def __bool__(self) -> bool:
        return self._pattern is not None

    def __call__(self, text: str) -> str:
        if self._pattern is None or not text:
            return text
        text = self._pattern.sub(MASK, text)
        return self._mask_cut(text) if "…" in text else text

    def json(self, value: Any) -> Any:
        """``value`` with every string in it masked (mapping keys too); other leaves kept."""
        if self._pattern is None:
            return value
        if isinstance(value, str):
            return self(value)
        if isinstance(value, Mapping):
            return {
                (self(key) if isinstance(key, str) else key): self.json(item)
                for key, item in value.items()
            }
        if isinstance(value, list | tuple):
            return [self.json(item) for item in value]
        return value

    def _mask_cut(self, text: str) -> str:
        """Mask a value's first characters where the text was cut right after them (``…``)."""
        longest = max(len(form) for form in self._forms)
        pieces: list[str] = []
        start = 0
        for end in (m.start() for m in re.finditer("…", text)):
            before = text[start:end]
            lowered = before.lower()
            for keep in range(min(len(before), longest - 1), MIN_CUT_CHARS - 1, -1):
                tail = lowered[len(before) - keep :]
                if any(form.startswith(tail) for form in self._forms):
                    before = before[: len(before) - keep] + MASK
                    break
            pieces.append(before + "…")
            start = end + 1
        pieces.append(text[start:])
        return "".join(pieces)


NOTHING = Scrubber(())
"""The scrubber of no values (it masks nothing): one for every holder that has none yet."""
