"""Arguments against the tool's ``inputSchema``, before anything leaves the Pod.

The schema is the one the server sent (JSON Schema 2020-12, the MCP default, or whatever its
``$schema`` names, draft-07 included), compiled once per tool and schema and cached.

The library is ``jsonschema-rs``: on a realistic tool schema it validated hundreds of
thousands of calls/s against a few thousand for ``jsonschema`` (1.5-3 µs per call against
200-350 µs), and compiled 30-280x faster (``bench/bridge_validation_bench.py``, table in
``bench/README.md``). At the bridge's target of under 1 ms added per call, ``jsonschema``'s
cost alone would take a third of it.
It is maintained, supports drafts 4 to 2020-12, and lets us refuse remote ``$ref`` retrieval:
a server's schema must never make the bridge fetch a URL.

A schema that cannot be compiled (not an object, an unknown type, a ``$ref`` that points
nowhere or off-Pod) does not crash the bridge. The call is forwarded with only the MCP rule
checked (arguments are an object): the server validates its own arguments anyway, blocking
would make the tool unusable for a schema typo, and allowlist and PII checks still apply. The
problem is reported (:attr:`Verdict.schema_problem`) so that the audit line and any error hint
say the arguments went unchecked. Values never appear in a hint (masked), only paths.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import jsonschema_rs

from mcp_operator.bridge.catalog import CatalogEntry
from mcp_operator.bridge.errors import ToolError

MAX_REPORTED_ERRORS = 5
"""A hint names at most this many wrong fields, then says how many more there are."""

MASK = "the value"
"""Stands for the argument's value in messages: hints stay short and carry no data."""

CACHE_SIZE = 2048
"""Compiled validators kept (tools times schema versions); least recently used dropped first."""


@dataclass(frozen=True)
class FieldError:
    """One thing wrong with the arguments."""

    path: str
    """JSONPath of the field, ``$`` for the arguments themselves (``$.metadata.links[0].kind``)."""
    message: str
    """What is wrong, with the value masked."""


@dataclass(frozen=True)
class Verdict:
    """The outcome of checking one call's arguments."""

    errors: list[FieldError] = field(default_factory=list)
    schema_problem: str | None = None
    """Why the tool's schema could not be used (the arguments then went unchecked)."""

    @property
    def ok(self) -> bool:
        return not self.errors


def json_path(parts: list[str | int] | tuple[str | int, ...]) -> str:
    """``["a", 0, "b c"]`` → ``$.a[0]['b c']``."""
    path = "$"
    for part in parts:
        if isinstance(part, int):
            path += f"[{part}]"
        elif part.isidentifier():
            path += f".{part}"
        else:
            path += f"[{part!r}]"
    return path


def _refuse_retrieval(uri: str) -> Any:
    raise ValueError(f"the bridge does not fetch remote schemas ({uri})")


@dataclass(frozen=True)
class _Compiled:
    validator: Any | None
    problem: str | None


def _first_line(text: str, limit: int = 300) -> str:
    line = text.strip().splitlines()[0] if text.strip() else "unknown error"
    return line if len(line) <= limit else line[: limit - 1] + "…"


def compile_schema(schema: Any) -> _Compiled:
    """A validator for ``schema``, or why there can be none (never raises)."""
    if schema is None:
        return _Compiled(None, "the tool has no inputSchema")
    if not isinstance(schema, dict | bool):
        return _Compiled(None, f"inputSchema is a {type(schema).__name__}, not an object")
    try:
        validator = jsonschema_rs.validator_for(
            schema, retriever=_refuse_retrieval, mask=MASK, validate_formats=False
        )
    except (ValueError, TypeError, jsonschema_rs.ReferencingError) as error:
        return _Compiled(None, f"inputSchema is not a valid JSON Schema: {_first_line(str(error))}")
    return _Compiled(validator, None)


def _path_of(error: Any) -> str:
    parts = list(error.instance_path)
    kind = error.kind
    if type(kind).__name__ == "Required":  # name the missing field itself
        parts.append(str(kind.property))
    return json_path(parts)


class ArgumentValidator:
    """Checks arguments against their tool's schema; compiled schemas are cached."""

    def __init__(self, cache_size: int = CACHE_SIZE) -> None:
        self._cache: OrderedDict[str, _Compiled] = OrderedDict()
        self._cache_size = cache_size

    def _compiled(self, entry: CatalogEntry) -> _Compiled:
        compiled = self._cache.get(entry.schema_key)
        if compiled is None:
            compiled = compile_schema(entry.input_schema)
            self._cache[entry.schema_key] = compiled
            if len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)
        else:
            self._cache.move_to_end(entry.schema_key)
        return compiled

    def check(self, entry: CatalogEntry, arguments: Any) -> Verdict:
        """Check ``arguments`` (``None`` counts as ``{}``) against ``entry``'s schema."""
        if arguments is None:
            arguments = {}
        compiled = self._compiled(entry)
        if not isinstance(arguments, Mapping):
            error = FieldError("$", f"arguments must be an object, not {type(arguments).__name__}")
            return Verdict([error], compiled.problem)
        if compiled.validator is None:
            return Verdict([], compiled.problem)
        try:
            found = [
                FieldError(_path_of(e), e.message)
                for e in compiled.validator.iter_errors(arguments)
            ]
        except (ValueError, TypeError) as error:  # e.g. a regex the engine gave up on
            return Verdict([], f"inputSchema could not be applied: {_first_line(str(error))}")
        found.sort(key=lambda e: e.path)
        return Verdict(found, None)


def invalid_arguments(entry: CatalogEntry, verdict: Verdict) -> ToolError:
    """The ``invalid_arguments`` error for a failed :class:`Verdict`."""
    shown = verdict.errors[:MAX_REPORTED_ERRORS]
    lines = "; ".join(f"{e.path}: {e.message}" for e in shown)
    more = len(verdict.errors) - len(shown)
    tail = f" (and {more} more)" if more > 0 else ""
    hint = (
        f"The arguments of {entry.exposed_name} do not match its inputSchema: {lines}{tail}. "
        "Fix these fields and call again; the call was not sent."
    )
    if verdict.schema_problem is not None:
        hint += f" The tool's own schema is broken too ({verdict.schema_problem})."
    fields = [{"path": e.path, "message": e.message} for e in shown]
    return ToolError("invalid_arguments", hint, {"fields": fields})
