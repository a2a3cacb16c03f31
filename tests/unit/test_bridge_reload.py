"""The configuration watcher on real files, a ConfigMap-style symlink swap included, and the
upstream pool's pure helpers (back-off, header files)."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest
import yaml

from mcp_operator.api.bridge import BridgeConfig, UpstreamServer
from mcp_operator.bridge.reload import ConfigWatcher
from mcp_operator.bridge.upstreams import MAX_BACKOFF_SECONDS, backoff_seconds, read_headers


def _config(*servers: str) -> dict[str, object]:
    return {
        "kind": "BridgeConfig",
        "run": {"name": "r", "namespace": "default"},
        "servers": [
            {"name": s, "namespace": "default", "url": f"http://{s}:8080/mcp", "prefix": s}
            for s in servers
        ],
    }


def _configmap(root: Path, generation: str, content: dict[str, object]) -> None:
    """What the kubelet does: a new data directory, then ``..data`` swapped to it."""
    data = root / generation
    data.mkdir()
    (data / "config.yaml").write_text(yaml.safe_dump(content))
    link = root / "..data_tmp"
    link.symlink_to(generation)
    os.replace(link, root / "..data")
    if not (root / "config.yaml").is_symlink():
        (root / "config.yaml").symlink_to("..data/config.yaml")


async def test_a_symlink_swap_is_seen_an_invalid_file_refused_and_the_same_content_ignored(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    applied: list[BridgeConfig] = []
    results: list[bool] = []

    async def apply(config: BridgeConfig) -> None:
        applied.append(config)

    _configmap(tmp_path, "gen1", _config("a"))
    path = tmp_path / "config.yaml"
    watcher = ConfigWatcher(path, apply, seen=path.read_bytes(), on_result=results.append)
    assert await watcher.check() is None  # the content it started with
    _configmap(tmp_path, "gen2", _config("a", "b"))
    assert await watcher.check() is True
    assert [s.name for s in applied[-1].servers] == ["a", "b"]
    assert await watcher.check() is None
    broken = _config("a")
    broken["servers"] = [{"name": "a"}]
    _configmap(tmp_path, "gen3", broken)
    with caplog.at_level(logging.ERROR):
        assert await watcher.check() is False
    assert "servers[0].url" in caplog.text and len(applied) == 1
    assert results == [True, False]


async def test_a_vanished_file_keeps_the_running_configuration(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(_config("a")))

    async def apply(config: BridgeConfig) -> None:
        raise AssertionError("nothing to apply")

    watcher = ConfigWatcher(path, apply, seen=path.read_bytes())
    path.unlink()
    assert await watcher.check() is None


def test_backoff_doubles_from_one_second_up_to_its_cap() -> None:
    assert [backoff_seconds(n) for n in (1, 2, 3, 4)] == [1.0, 2.0, 4.0, 8.0]
    assert backoff_seconds(30) == MAX_BACKOFF_SECONDS


def test_header_values_come_from_their_files_and_a_missing_file_is_a_problem_without_value(
    tmp_path: Path,
) -> None:
    secret = tmp_path / "token"
    secret.write_text("Bearer s3cret\n")
    server = UpstreamServer.model_validate(
        {
            "name": "s",
            "namespace": "default",
            "url": "http://s:8080/mcp",
            "prefix": "s",
            "headers": [
                {"name": "Authorization", "valueFile": str(secret)},
                {"name": "X-Team", "value": "blue"},
                {"name": "X-Gone", "valueFile": str(tmp_path / "missing")},
            ],
        }
    )
    headers, problem = read_headers(server)
    assert headers == {"Authorization": "Bearer s3cret", "X-Team": "blue"}
    assert problem is not None and problem.reason == "UnreadableHeader"
    assert "X-Gone" in problem.message and "s3cret" not in problem.message


def test_audit_lines_go_to_stdout_and_the_file_and_a_bad_file_path_is_only_logged(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    import io
    from datetime import UTC, datetime

    from mcp_operator.bridge.audit import AuditRecord
    from mcp_operator.bridge.core import AuditWriter

    record = AuditRecord(
        time=datetime.now(UTC), run="default/r", server=None, tool="x", original_tool=None,
        outcome="not_allowlisted", duration_ms=0.1, attempts=0, arguments_sha256="0" * 64,
    )  # fmt: skip
    stdout, path = io.StringIO(), tmp_path / "audit.log"
    writer = AuditWriter(stdout, str(path))
    writer.write(record)
    writer.close()
    assert stdout.getvalue() == path.read_text() == record.to_json_line()
    with caplog.at_level(logging.ERROR):
        AuditWriter(stdout, str(tmp_path / "missing" / "audit.log")).write(record)
    assert "Could not open the audit file" in caplog.text
