"""Every sample under ``deploy/samples/`` parses with its model and round-trips.

The e2e suite applies the same files to a real API server (``tests/e2e/test_crds.py``);
here they are checked without a cluster.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import BaseModel

from mcp_operator.api import AgentRun, MCPServer

REPO = Path(__file__).resolve().parents[2]
SAMPLES = sorted((REPO / "deploy" / "samples").glob("*.yaml"))
MODELS: dict[str, type[BaseModel]] = {"MCPServer": MCPServer, "AgentRun": AgentRun}
OTHER_KINDS = {"Secret"}


def documents(path: Path) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc]


def test_there_are_samples_of_every_mode_transport_and_kind() -> None:
    objects = [doc for path in SAMPLES for doc in documents(path)]
    servers = [MCPServer.model_validate(o) for o in objects if o["kind"] == "MCPServer"]
    runs = [AgentRun.model_validate(o) for o in objects if o["kind"] == "AgentRun"]
    assert {(s.spec.mode, s.spec.effective_transport) for s in servers} >= {
        ("external", "streamable-http"),
        ("managed", "stdio"),
        ("managed", "streamable-http"),
    }
    assert any(len(run.spec.mcp_servers) >= 2 for run in runs)
    names = {s.metadata.name for s in servers}
    for run in runs:
        assert {ref.name for ref in run.spec.mcp_servers} <= names


def contains(big: Any, small: Any) -> bool:
    """Whether ``big`` holds everything ``small`` says (dicts: a subset, recursively)."""
    if isinstance(small, dict):
        return isinstance(big, dict) and all(
            key in big and contains(big[key], value) for key, value in small.items()
        )
    if isinstance(small, list):
        return (
            isinstance(big, list)
            and len(big) == len(small)
            and all(contains(b, s) for b, s in zip(big, small, strict=True))
        )
    return bool(big == small)


@pytest.mark.parametrize("path", SAMPLES, ids=[p.name for p in SAMPLES])
def test_the_sample_parses_with_its_model_and_round_trips(path: Path) -> None:
    for doc in documents(path):
        assert "namespace" not in doc["metadata"], "samples are applied into a namespace"
        if doc["kind"] in OTHER_KINDS:
            continue
        assert doc["apiVersion"] == "mcp-operator.dev/v1alpha1"
        model = MODELS[doc["kind"]]
        parsed = model.model_validate(doc)
        dumped = parsed.model_dump(by_alias=True, exclude_none=True)
        assert contains(dumped, doc), "the dump lost or changed a field of the sample"
        assert model.model_validate(dumped) == parsed


def secret_refs(node: Any) -> list[tuple[str, str]]:
    """Every ``secretKeyRef`` under ``node``, as (name, key)."""
    found: list[tuple[str, str]] = []
    if isinstance(node, dict):
        ref = node.get("secretKeyRef")
        if isinstance(ref, dict):
            found.append((ref["name"], ref["key"]))
        for value in node.values():
            found += secret_refs(value)
    elif isinstance(node, list):
        for value in node:
            found += secret_refs(value)
    return found


def test_every_secret_a_sample_refers_to_is_in_the_same_file() -> None:
    for path in SAMPLES:
        docs = documents(path)
        secrets = {
            (doc["metadata"]["name"], key)
            for doc in docs
            if doc["kind"] == "Secret"
            for key in doc.get("stringData", {})
        }
        for doc in docs:
            assert set(secret_refs(doc.get("spec"))) <= secrets, path.name
