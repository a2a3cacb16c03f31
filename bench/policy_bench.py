"""Benchmark: the authorization rule engine and the rate limiter, per call.

Two tables, one run:

1. **Engines.** The same ``n`` rules (1, 10, 100) evaluated for one call, nothing matching
   until the last: ``common-expression-language`` (Rust CEL) given a plain dict per call,
   given a context of the tool's fixed variables with ``arguments`` added per call (which
   rebuilds the context), and given that context with ``arguments`` from a variable resolver
   (what :mod:`mcp_operator.bridge.rules` does), ``cel-python`` (pure Python CEL), and
   ``cedarpy`` (Rust Cedar, policies and entities parsed once, the request per call). Each
   rule reads the caller, the tool and the arguments, so no engine can skip one.
2. **The pipeline.** :class:`mcp_operator.bridge.pipeline.CallPipeline` with an upstream that
   answers at once (catalog lookup, validation, the rules, the rate limiter, the audit
   record; PII off), with no policy (the pipeline as it was), with 1, 10 and 100 rules that
   all read the arguments (none can be decided ahead), with 100 rules of which one reads
   them (the rest decided per tool when the catalog is built), and with one rate limit.

Times are CPU time of the benchmark's process (``time.process_time``), so that other load
on a shared machine slows the run but does not inflate the figures. Run it on a quiet
machine: ``.venv/bin/python bench/policy_bench.py``; the JSON of the run
goes to ``bench/results/`` (git-ignored).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import cedarpy
import cel
import celpy

from mcp_operator.api.bridge import BridgeConfig
from mcp_operator.bridge.catalog import build_catalog
from mcp_operator.bridge.pipeline import CallPipeline

RESULTS = Path(__file__).resolve().parent / "results"
COUNTS = (1, 10, 100)

ARGUMENTS = {"query": "how do I rotate the signing key", "limit": 10, "tags": ["ops", "keys"]}
VARIABLES: dict[str, Any] = {
    "caller": {"run": "r1", "namespace": "team", "serviceAccount": "researcher", "pod": "r1"},
    "server": {"name": "docs", "namespace": "team"},
    "tool": {
        "name": "search_docs",
        "exposedName": "docs_search_docs",
        "title": "Search",
        "annotations": {"readOnlyHint": True},
    },
}


def cel_rules(count: int) -> list[str]:
    """``count`` rules that read caller, tool and arguments; none matches the bench call."""
    return [
        f"caller.serviceAccount == 'sa{i}' && tool.name.startsWith('t{i}_') "
        f"&& arguments.query.contains('w{i}')"
        for i in range(count)
    ]


def cedar_policies(count: int) -> str:
    return (
        "\n".join(
            f'forbid(principal, action, resource) when {{ principal.sa == "sa{i}" && '
            f'resource.name like "t{i}_*" && context.arguments.query like "*w{i}*" }};'
            for i in range(count)
        )
        + "\npermit(principal, action, resource);"
    )


def per_call_us(call: Callable[[], object], seconds: float) -> float:
    """CPU µs per call of this process (other load on the machine does not count)."""
    call()
    count, start = 0, time.process_time()
    while (now := time.process_time()) - start < seconds:
        for _ in range(50):
            call()
        count += 50
    return (now - start) / count * 1e6


@dataclass
class EngineRow:
    engine: str
    rules: int
    us_per_call: float


def engines_for(count: int, entities: Any) -> list[tuple[str, Callable[[], bool], float]]:
    """Each engine's evaluation of ``count`` rules for the bench call (and its time share)."""
    rules = cel_rules(count)
    programs = [cel.compile(rule) for rule in rules]

    def cel_dict() -> bool:
        variables = {**VARIABLES, "arguments": ARGUMENTS}
        return any(p.execute(variables) is True for p in programs)

    context = cel.Context(VARIABLES)

    def cel_context() -> bool:
        context.add_variable("arguments", ARGUMENTS)
        return any(p.execute(context) is True for p in programs)

    resolved = cel.Context(VARIABLES)
    box: dict[str, Any] = {}
    resolved.set_variable_resolver(box.get)

    def cel_resolver() -> bool:
        box["arguments"] = ARGUMENTS
        return any(p.execute(resolved) is True for p in programs)

    environment = celpy.Environment()
    py_programs = [environment.program(environment.compile(rule)) for rule in rules]

    def cel_python() -> bool:
        activation = celpy.json_to_cel({**VARIABLES, "arguments": ARGUMENTS})
        return any(bool(p.evaluate(activation)) for p in py_programs)

    policies = cedarpy.PolicySet.from_str(cedar_policies(count))

    def cedar() -> bool:
        request = {
            "principal": 'SA::"researcher"',
            "action": 'Action::"call"',
            "resource": 'Tool::"search_docs"',
            "context": {"arguments": ARGUMENTS},
        }
        # Cedar answers "allowed" when no forbid matched: the same verdict as the others.
        return not cedarpy.is_authorized(request, policies, entities).allowed

    return [
        ("common-expression-language, a dict per call", cel_dict, 1.0),
        ("common-expression-language, context reused, arguments added", cel_context, 1.0),
        ("common-expression-language, arguments by resolver (the bridge's)", cel_resolver, 1.0),
        ("cel-python", cel_python, 0.5),
        ("cedarpy", cedar, 1.0),
    ]


def measure_engines(seconds: float) -> list[EngineRow]:
    entities = cedarpy.Entities.from_json_str(
        json.dumps(
            [
                {"uid": {"type": "SA", "id": "researcher"}, "attrs": {"sa": "researcher"},
                 "parents": []},
                {"uid": {"type": "Tool", "id": "search_docs"}, "attrs": {"name": "search_docs"},
                 "parents": []},
            ]
        )
    )  # fmt: skip
    rows: list[EngineRow] = []
    for count in COUNTS:
        for name, call, share in engines_for(count, entities):
            assert call() is False, f"{name} matched a rule the bench call does not match"
            rows.append(EngineRow(name, count, per_call_us(call, seconds * share)))
    return rows


async def answer(server: Any, tool: str, arguments: Any) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": "found 3 pages"}], "isError": False}


class Clock:
    def monotonic(self) -> float:
        return time.perf_counter()

    def now(self) -> datetime:
        return datetime.now(UTC)

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


@dataclass
class PipelineRow:
    policy: str
    us_per_call: float
    added_us: float


def pipeline_for(policy: dict[str, Any]) -> CallPipeline:
    config = BridgeConfig.model_validate(
        {
            "run": {"name": "r1", "namespace": "team"},
            "identity": {"namespace": "team", "serviceAccount": "researcher", "pod": "r1"},
            "servers": [
                {
                    "name": "docs",
                    "namespace": "team",
                    "url": "http://127.0.0.1:1/mcp",
                    "prefix": "docs",
                    "policy": policy,
                }
            ],
        }
    )
    schema = {
        "type": "object",
        "properties": {
            "query": {"type": "string"},
            "limit": {"type": "integer"},
            "tags": {"type": "array", "items": {"type": "string"}},
        },
    }
    tools = {"team/docs": [{"name": "search_docs", "inputSchema": schema}]}
    return CallPipeline(
        config,
        build_catalog(config.servers, tools),
        upstream=answer,
        clock=Clock(),
        random=lambda: 0.5,
    )


async def measure_pipeline(pipeline: CallPipeline, seconds: float) -> float:
    count, start = 0, time.process_time()
    while (now := time.process_time()) - start < seconds:
        for _ in range(100):
            await pipeline.call("docs_search_docs", ARGUMENTS)
        count += 100
    return (now - start) / count * 1e6


async def interleaved(cases: list[tuple[str, dict[str, Any]]], seconds: float) -> list[float]:
    """The best of ``ROUNDS`` rounds per case, the cases taking turns within each round (a
    busy machine slows all of them alike rather than whichever ran in a busy moment)."""
    pipelines = [pipeline_for(policy) for _, policy in cases]
    for pipeline in pipelines:
        report = await pipeline.call("docs_search_docs", ARGUMENTS)
        assert report.audit.outcome == "ok", report.result
    best = [float("inf")] * len(cases)
    for _ in range(ROUNDS):
        for index, pipeline in enumerate(pipelines):
            best[index] = min(best[index], await measure_pipeline(pipeline, seconds / ROUNDS))
    return best


ROUNDS = 7


def pipeline_rows(seconds: float) -> list[PipelineRow]:
    def rules(count: int, dynamic: int) -> list[dict[str, Any]]:
        fixed = [
            {"match": f"caller.serviceAccount == 'sa{i}' && tool.name == 't{i}'", "action": "deny"}
            for i in range(count - dynamic)
        ]
        return fixed + [{"match": rule, "action": "deny"} for rule in cel_rules(dynamic)]

    cases: list[tuple[str, dict[str, Any]]] = [("none (the pipeline before)", {})]
    cases += [(f"{n} rules reading arguments", {"rules": rules(n, n)}) for n in COUNTS]
    cases += [("100 rules, 1 reading arguments", {"rules": rules(100, 1)})]
    limit = [{"tools": ["search_*"], "perMinute": 100_000, "burst": 10_000}]
    cases += [("1 rate limit", {"rateLimits": limit})]
    measured = asyncio.run(interleaved(cases, seconds))
    return [
        PipelineRow(name, us, us - measured[0])
        for (name, _), us in zip(cases, measured, strict=True)
    ]


def measure_limiter(seconds: float) -> float:
    """The rate limiter alone: one matching limit with tokens to spare."""
    pipeline = pipeline_for({"rateLimits": [{"tools": ["*"], "perMinute": 100_000}]})
    entry = pipeline.catalog.get("docs_search_docs")
    server = pipeline.config.servers[0]
    assert entry is not None
    clock = iter(range(10**12))
    return per_call_us(lambda: pipeline.limiter.take(server, entry, next(clock) * 1.0), seconds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=1.0, help="time per measurement")
    args = parser.parse_args()
    engines = measure_engines(args.seconds)
    print("| engine | 1 rule µs | 10 rules µs | 100 rules µs |")
    print("|---|---|---|---|")
    for name in dict.fromkeys(row.engine for row in engines):
        cells = " | ".join(f"{r.us_per_call:,.1f}" for r in engines if r.engine == name)
        print(f"| {name} | {cells} |")
    rows = pipeline_rows(args.seconds * 3)
    print()
    print("| pipeline policy | µs per call | added µs |")
    print("|---|---|---|")
    for row in rows:
        print(f"| {row.policy} | {row.us_per_call:,.1f} | {row.added_us:+,.1f} |")
    limiter_us = measure_limiter(args.seconds)
    print(f"\nRateLimiter.take, one matching limit: {limiter_us:.2f} µs")
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / f"policy_{time.strftime('%Y%m%dT%H%M%S')}.json"
    runs = {
        "engines": [asdict(r) for r in engines],
        "pipeline": [asdict(r) for r in rows],
        "limiter_us": limiter_us,
    }
    out.write_text(json.dumps(runs, indent=2) + "\n")
    print(f"Wrote {out.relative_to(RESULTS.parent.parent)}")


if __name__ == "__main__":
    main()
