"""Benchmark: argument validation with ``jsonschema`` against ``jsonschema-rs``.

The bridge checks every ``tools/call``'s arguments against the tool's ``inputSchema``
before anything leaves the Pod, so the validator is on the hot path of every call. This
measures, for each library, with the schema compiled once (as the bridge caches it):

- ``compile``: building a validator from the schema (once per tool and catalog change);
- ``valid``: calls/s for valid arguments, collecting errors as the bridge does
  (``iter_errors``; an empty list means valid);
- ``invalid``: calls/s for arguments with three errors, all collected with their paths;
- ``is_valid``: calls/s of the boolean fast path on valid arguments.

A second table is the cost per call of the whole pure pipeline
(:class:`mcp_operator.bridge.pipeline.CallPipeline` with an upstream that answers at once):
catalog lookup, validation, PII hooks and the audit record, with PII off, detect and redact in
both directions, for a trivial schema and the realistic one.

The schema is a realistic tool schema (an issue tracker's ``create_issue``: nested objects,
arrays, enums, a pattern, bounds, ``additionalProperties: false``, a ``$defs`` reference), in
draft 2020-12 and the same schema in draft-07. Run it on a quiet machine:
``.venv/bin/python bench/bridge_validation_bench.py``; the JSON of the run goes to
``bench/results/`` (git-ignored).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import jsonschema
import jsonschema_rs

from mcp_operator.api.bridge import BridgeConfig
from mcp_operator.bridge.catalog import build_catalog
from mcp_operator.bridge.hooks import PiiHook
from mcp_operator.bridge.pii import PiiScanner
from mcp_operator.bridge.pii_detectors import builtin_detectors
from mcp_operator.bridge.pipeline import CallPipeline

RESULTS = Path(__file__).resolve().parent / "results"

SCHEMA_2020: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "properties": {
        "owner": {"type": "string", "minLength": 1, "maxLength": 39, "pattern": "^[A-Za-z0-9-]+$"},
        "repo": {"type": "string", "minLength": 1, "maxLength": 100},
        "title": {"type": "string", "minLength": 1, "maxLength": 256},
        "body": {"type": "string", "maxLength": 65536},
        "labels": {"type": "array", "items": {"type": "string"}, "maxItems": 20},
        "assignees": {"type": "array", "items": {"$ref": "#/$defs/login"}, "uniqueItems": True},
        "milestone": {"type": ["integer", "null"], "minimum": 1},
        "priority": {"enum": ["low", "medium", "high", "urgent"]},
        "metadata": {
            "type": "object",
            "properties": {
                "estimateHours": {"type": "number", "minimum": 0, "maximum": 1000},
                "component": {"type": "string"},
                "links": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {
                            "url": {"type": "string", "format": "uri"},
                            "kind": {"enum": ["blocks", "relates", "duplicates"]},
                        },
                        "required": ["url", "kind"],
                        "additionalProperties": False,
                    },
                },
            },
            "additionalProperties": False,
        },
    },
    "required": ["owner", "repo", "title"],
    "additionalProperties": False,
    "$defs": {"login": {"type": "string", "minLength": 1, "maxLength": 39}},
}

SCHEMA_DRAFT7: dict[str, Any] = json.loads(
    json.dumps(SCHEMA_2020).replace("$defs", "definitions")
) | {"$schema": "http://json-schema.org/draft-07/schema#"}

VALID: dict[str, Any] = {
    "owner": "mcp-operator",
    "repo": "mcp-operator",
    "title": "The bridge should retry idempotent tools",
    "body": "When an upstream restarts, read-only calls fail once. " * 8,
    "labels": ["bug", "bridge", "retry"],
    "assignees": ["alice", "bob"],
    "milestone": 3,
    "priority": "high",
    "metadata": {
        "estimateHours": 4.5,
        "component": "bridge",
        "links": [{"url": "https://example.invalid/issues/7", "kind": "relates"}],
    },
}

INVALID: dict[str, Any] = VALID | {
    "milestone": 0,  # below the minimum
    "priority": "someday",  # not in the enum
    "metadata": VALID["metadata"] | {"links": [{"url": "https://example.invalid/x"}]},  # no kind
}


@dataclass
class Row:
    library: str
    draft: str
    compile_us: float
    valid_per_s: float
    invalid_per_s: float
    is_valid_per_s: float
    invalid_errors: int


def rate(call: Callable[[], object], seconds: float) -> float:
    """Calls per second of ``call``, timed in batches for ``seconds``."""
    count = 0
    batch = 200
    start = time.perf_counter()
    deadline = start + seconds
    while (now := time.perf_counter()) < deadline:
        for _ in range(batch):
            call()
        count += batch
    return count / (now - start)


def compile_time_us(build: Callable[[], object], repeats: int = 200) -> float:
    start = time.perf_counter()
    for _ in range(repeats):
        build()
    return (time.perf_counter() - start) / repeats * 1e6


def measure_python(schema: dict[str, Any], draft: str, seconds: float) -> Row:
    def build() -> Any:
        cls = jsonschema.validators.validator_for(schema)
        cls.check_schema(schema)  # the bridge rejects a broken schema up front
        return cls(schema)

    validator = build()
    errors = list(validator.iter_errors(INVALID))
    assert not list(validator.iter_errors(VALID)), "the valid arguments must be valid"
    return Row(
        library=f"jsonschema {jsonschema_version()}",
        draft=draft,
        compile_us=compile_time_us(build),
        valid_per_s=rate(lambda: list(validator.iter_errors(VALID)), seconds),
        invalid_per_s=rate(lambda: list(validator.iter_errors(INVALID)), seconds),
        is_valid_per_s=rate(lambda: validator.is_valid(VALID), seconds),
        invalid_errors=len(errors),
    )


def measure_rust(schema: dict[str, Any], draft: str, seconds: float) -> Row:
    def build() -> Any:
        return jsonschema_rs.validator_for(schema, offline=True)

    validator = build()
    errors = list(validator.iter_errors(INVALID))
    assert not list(validator.iter_errors(VALID)), "the valid arguments must be valid"
    return Row(
        library=f"jsonschema-rs {jsonschema_rs_version()}",
        draft=draft,
        compile_us=compile_time_us(build),
        valid_per_s=rate(lambda: list(validator.iter_errors(VALID)), seconds),
        invalid_per_s=rate(lambda: list(validator.iter_errors(INVALID)), seconds),
        is_valid_per_s=rate(lambda: validator.is_valid(VALID), seconds),
        invalid_errors=len(errors),
    )


def jsonschema_version() -> str:
    from importlib.metadata import version

    return version("jsonschema")


def jsonschema_rs_version() -> str:
    from importlib.metadata import version

    return version("jsonschema-rs")


def table(rows: list[Row]) -> str:
    lines = [
        "| library | draft | compile µs | valid calls/s | invalid calls/s (errors) "
        "| is_valid calls/s |",
        "|---|---|---|---|---|---|",
    ]
    for row in rows:
        lines.append(
            f"| {row.library} | {row.draft} | {row.compile_us:,.0f} | {row.valid_per_s:,.0f} "
            f"| {row.invalid_per_s:,.0f} ({row.invalid_errors}) | {row.is_valid_per_s:,.0f} |"
        )
    return "\n".join(lines)


RESULT = {
    "content": [{"type": "text", "text": "Created issue #42: " + VALID["title"] + VALID["body"]}],
    "isError": False,
}


class InstantClock:
    def monotonic(self) -> float:
        return time.perf_counter()

    def now(self) -> Any:
        from datetime import UTC, datetime

        return datetime.now(UTC)

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


async def answer(server: Any, tool: str, arguments: Any) -> dict[str, Any]:
    return RESULT


@dataclass
class PipelineRow:
    schema: str
    pii: str
    calls_per_s: float
    us_per_call: float


def pipeline_for(schema: dict[str, Any], pii: str) -> CallPipeline:
    config = BridgeConfig.model_validate(
        {
            "run": {"name": "bench", "namespace": "default"},
            "servers": [
                {
                    "name": "tracker",
                    "namespace": "default",
                    "url": "http://127.0.0.1:1/mcp",
                    "prefix": "tracker",
                    "policy": {"pii": {"arguments": pii, "results": pii}},
                }
            ],
        }
    )
    tools = {"default/tracker": [{"name": "create_issue", "inputSchema": schema}]}
    return CallPipeline(
        config,
        build_catalog(config.servers, tools),
        upstream=answer,
        clock=InstantClock(),
        random=lambda: 0.5,
        hooks=[PiiHook(PiiScanner(builtin_detectors()))],
    )


async def measure_pipeline(schema_name: str, schema: dict[str, Any], pii: str, seconds: float):
    pipeline = pipeline_for(schema, pii)
    report = await pipeline.call("tracker_create_issue", VALID)
    assert report.audit.outcome == "ok", report.result
    count = 0
    start = time.perf_counter()
    while (now := time.perf_counter()) - start < seconds:
        for _ in range(100):
            await pipeline.call("tracker_create_issue", VALID)
        count += 100
    per_s = count / (now - start)
    return PipelineRow(schema_name, pii, per_s, 1e6 / per_s)


def pipeline_table(rows: list[PipelineRow]) -> str:
    lines = [
        "| schema | PII (arguments and results) | calls/s | µs per call |",
        "|---|---|---|---|",
    ]
    for row in rows:
        lines.append(
            f"| {row.schema} | {row.pii} | {row.calls_per_s:,.0f} | {row.us_per_call:,.0f} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=2.0, help="time per measurement")
    args = parser.parse_args()
    rows: list[Row] = []
    for draft, schema in (("2020-12", SCHEMA_2020), ("draft-07", SCHEMA_DRAFT7)):
        rows.append(measure_python(schema, draft, args.seconds))
        rows.append(measure_rust(schema, draft, args.seconds))
    print(table(rows))
    pipeline_rows = [
        asyncio.run(measure_pipeline(name, schema, pii, args.seconds))
        for name, schema in (("trivial", {"type": "object"}), ("realistic", SCHEMA_2020))
        for pii in ("off", "detect", "redact")
    ]
    print()
    print(pipeline_table(pipeline_rows))
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / f"bridge_validation_{time.strftime('%Y%m%dT%H%M%S')}.json"
    runs = {
        "validation": [asdict(row) for row in rows],
        "pipeline": [asdict(row) for row in pipeline_rows],
    }
    out.write_text(json.dumps(runs, indent=2) + "\n")
    print(f"Wrote {out.relative_to(RESULTS.parent.parent)}")


if __name__ == "__main__":
    main()
