"""The flag tables in the docs say what the argument parsers do, both ways.

``docs/adapter.md`` documents ``mcp-operator adapter``, ``docs/install.md``
``mcp-operator run`` and ``docs/bridge.md`` ``mcp-operator bridge``, each in a
table of flag, environment variable, default and meaning. These tests read
the tables and the parsers that the command line really builds
(``mcp_operator.cli.build_parser``): every flag of the parser is in the table,
every flag in the table is in the parser, the environment variables agree with
the ones the flags' help names, and where the table states a default (a
literal, a number, ``off``, ``—``) it is the default the command really uses.
"""

from __future__ import annotations

import argparse
import inspect
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from mcp_operator.adapter import config as adapter_config
from mcp_operator.cli import build_parser

DOCS = Path(__file__).resolve().parents[2] / "docs"
FLAG = re.compile(r"(?<![\w-])(--?[a-z][a-z0-9-]*)")
ENV = re.compile(r"\bMCP_[A-Z0-9_]+")
UNITS = {"KiB": 1024, "MiB": 1024**2, "GiB": 1024**3}
NOTHING = "—"


@dataclass(frozen=True)
class Row:
    """One row of a flag table."""

    flags: tuple[str, ...]
    environment: tuple[str, ...]
    default: str
    line: int


def table_rows(document: Path, heading: str) -> list[Row]:
    """The rows of the first table under ``heading`` (a Markdown heading line)."""
    lines = document.read_text().splitlines()
    start = lines.index(heading)
    rows: list[Row] = []
    for number, line in enumerate(lines[start + 1 :], start=start + 2):
        if not line.startswith("|"):
            if rows:
                break
            continue
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        if cells[0] in ("flag", "---"):
            continue
        flags = tuple(FLAG.findall(cells[0].split("(")[0]))
        assert flags, f"{document.name}:{number}: no flag in {cells[0]!r}"
        rows.append(Row(flags, tuple(ENV.findall(cells[1])), cells[2], number))
    assert rows, f"{document.name}: no table under {heading!r}"
    return rows


def subcommand(name: str) -> argparse.ArgumentParser:
    """The parser of ``mcp-operator NAME``, as the command line builds it."""
    for action in build_parser()._actions:
        if isinstance(action, argparse._SubParsersAction):
            parser: argparse.ArgumentParser = action.choices[name]
            return parser
    raise AssertionError("mcp-operator has no subcommands")


def options(parser: argparse.ArgumentParser) -> Iterator[argparse.Action]:
    for action in parser._actions:
        if action.option_strings and not isinstance(action, argparse._HelpAction):
            yield action


def documented_default(cell: str) -> tuple[bool, Any]:
    """``(stated, value)``: what a default cell states, if it states a value at all."""
    if cell == NOTHING:
        return True, None
    if cell == "off":
        return True, False
    if match := re.fullmatch(r"`([^`]*)`", cell):
        return True, match.group(1)
    if match := re.fullmatch(r"([0-9.]+)( (?:KiB|MiB|GiB))?", cell):
        number = float(match.group(1))
        return True, number * UNITS[match.group(2).strip()] if match.group(2) else number
    return False, None  # prose ("the operator's own image"): said in words, not checked


def same_default(stated: Any, actual: Any) -> bool:
    if stated is None:
        return actual in (None, False, (), [])
    if stated is False:
        return actual is False or actual is None
    if isinstance(actual, bool):
        return False
    if isinstance(actual, int | float):
        return float(stated) == float(actual)
    return str(stated) == str(actual)


def check_both_ways(rows: list[Row], parser: argparse.ArgumentParser, where: str) -> dict[str, Row]:
    """Every parser flag documented once, every documented flag real; rows by action dest."""
    by_flag = {flag: row for row in rows for flag in row.flags}
    parsed = {flag: action for action in options(parser) for flag in action.option_strings}
    undocumented = sorted(set(parsed) - set(by_flag))
    unknown = sorted(set(by_flag) - set(parsed))
    assert not undocumented, f"flags missing from {where}: {undocumented}"
    assert not unknown, f"{where} documents flags the parser does not have: {unknown}"
    by_dest: dict[str, Row] = {}
    for action in options(parser):
        row_set = {by_flag[flag] for flag in action.option_strings}
        assert len(row_set) == 1, f"{action.option_strings} are spread over rows in {where}"
        by_dest[action.dest] = row_set.pop()
    return by_dest


def check_environment_in_help(
    rows: dict[str, Row], parser: argparse.ArgumentParser, where: str
) -> None:
    """The environment variables of each row are the ones its flag's help names."""
    for action in options(parser):
        row = rows[action.dest]
        named = tuple(ENV.findall(action.help or ""))
        assert set(row.environment) == set(named), (
            f"{where}:{row.line}: {action.option_strings[-1]} documents environment "
            f"{row.environment or NOTHING}, its help names {named or NOTHING}"
        )


# ------------------------------------------------------------------ mcp-operator adapter

ADAPTER_DOC = DOCS / "adapter.md"


def test_every_adapter_flag_is_in_the_table_and_every_row_is_a_flag() -> None:
    parser = subcommand("adapter")
    check_both_ways(table_rows(ADAPTER_DOC, "## Configuration"), parser, "docs/adapter.md")


def test_the_adapter_table_names_the_environment_variable_of_each_flag() -> None:
    parser = subcommand("adapter")
    rows = check_both_ways(table_rows(ADAPTER_DOC, "## Configuration"), parser, "docs/adapter.md")
    # The adapter's help names MCP_ADAPTER_<FIELD>, built from the same row of config._FLAGS
    # that from_args reads the environment with.
    check_environment_in_help(rows, parser, "docs/adapter.md")


def test_the_adapter_defaults_in_the_table_are_the_ones_it_runs_with() -> None:
    parser = subcommand("adapter")
    rows = check_both_ways(table_rows(ADAPTER_DOC, "## Configuration"), parser, "docs/adapter.md")
    # Flags default to None so that the environment can apply; the effective default is what
    # the adapter builds from no flag and no environment.
    parsed = parser.parse_args(["--", "server"])
    effective = adapter_config.from_args(parsed, environ={})
    checked = 0
    for dest, row in rows.items():
        stated, value = documented_default(row.default)
        if not stated:
            continue
        actual = getattr(effective, dest, getattr(parsed, dest))
        assert same_default(value, actual), (
            f"docs/adapter.md:{row.line}: {row.flags[0]} defaults to {row.default}, "
            f"the adapter to {actual!r}"
        )
        checked += 1
    assert checked >= len(rows) - 1, "most adapter defaults are stated as values"


# ------------------------------------------------------------------ mcp-operator run

INSTALL_DOC = DOCS / "install.md"
RUN_HEADING = "## The operator's command line: `mcp-operator run`"


@pytest.fixture
def run_parser(monkeypatch: pytest.MonkeyPatch) -> argparse.ArgumentParser:
    """``mcp-operator run``'s parser in an environment that sets none of its variables."""
    for name in ("MCP_OPERATOR_ADAPTER_IMAGE", "MCP_OPERATOR_CLUSTER_DOMAIN"):
        monkeypatch.delenv(name, raising=False)
    return subcommand("run")


def test_every_run_flag_is_in_the_install_guide_and_every_row_is_a_flag(
    run_parser: argparse.ArgumentParser,
) -> None:
    check_both_ways(table_rows(INSTALL_DOC, RUN_HEADING), run_parser, "docs/install.md")


def test_the_environment_variables_in_the_install_guide_set_their_run_flags(
    run_parser: argparse.ArgumentParser, monkeypatch: pytest.MonkeyPatch
) -> None:
    rows = check_both_ways(table_rows(INSTALL_DOC, RUN_HEADING), run_parser, "docs/install.md")
    documented = {name: dest for dest, row in rows.items() for name in row.environment}
    # Every MCP_* variable that `run` reads is documented ...
    source = inspect.getsource(run_parser.get_default("_module"))
    assert set(ENV.findall(source)) <= set(documented), "docs/install.md misses a variable"
    # ... and each documented one really is the default of its flag.
    for name, dest in documented.items():
        monkeypatch.setenv(name, "from-the-environment")
        assert getattr(subcommand("run").parse_args([]), dest) == "from-the-environment", name
        monkeypatch.delenv(name)


def test_the_run_defaults_in_the_install_guide_are_the_ones_it_runs_with(
    run_parser: argparse.ArgumentParser,
) -> None:
    rows = check_both_ways(table_rows(INSTALL_DOC, RUN_HEADING), run_parser, "docs/install.md")
    defaults = vars(run_parser.parse_args([]))
    checked = 0
    for dest, row in rows.items():
        stated, value = documented_default(row.default)
        if not stated:
            continue
        assert same_default(value, defaults[dest]), (
            f"docs/install.md:{row.line}: {row.flags[-1]} defaults to {row.default}, "
            f"mcp-operator run to {defaults[dest]!r}"
        )
        checked += 1
    assert checked >= len(rows) - 2, "most run defaults are stated as values"


# ------------------------------------------------------------------ mcp-operator bridge

BRIDGE_DOC = DOCS / "bridge.md"
BRIDGE_HEADING = "## Command line"


def test_every_bridge_flag_is_in_its_table_and_every_row_is_a_flag() -> None:
    parser = subcommand("bridge")
    rows = check_both_ways(table_rows(BRIDGE_DOC, BRIDGE_HEADING), parser, "docs/bridge.md")
    check_environment_in_help(rows, parser, "docs/bridge.md")


def test_the_bridge_defaults_in_its_table_are_the_ones_it_runs_with() -> None:
    parser = subcommand("bridge")
    rows = check_both_ways(table_rows(BRIDGE_DOC, BRIDGE_HEADING), parser, "docs/bridge.md")
    defaults = vars(parser.parse_args(["--config", "/etc/mcp-bridge/config.yaml"]))
    for dest, row in rows.items():
        stated, value = documented_default(row.default)
        if dest == "config":  # required: the table says so, there is no default to run with
            assert row.default == NOTHING
            continue
        assert stated, f"docs/bridge.md:{row.line}: {row.flags[0]} states no default"
        assert same_default(value, defaults[dest]), (
            f"docs/bridge.md:{row.line}: {row.flags[0]} defaults to {row.default}, "
            f"mcp-operator bridge to {defaults[dest]!r}"
        )


# ------------------------------------------------------------------ the checker itself


def test_the_checks_catch_a_flag_missing_from_the_table_and_a_row_without_a_flag(
    tmp_path: Path,
) -> None:
    document = tmp_path / "doc.md"
    document.write_text(
        "## Flags\n\n| flag | environment | default | meaning |\n| --- | --- | --- | --- |\n"
        "| `--kept` | `MCP_ADAPTER_KEPT` | 4 | the default drifted |\n"
        "| `--gone` | — | — | removed from the code |\n"
    )
    rows = table_rows(document, "## Flags")
    parser = argparse.ArgumentParser()
    parser.add_argument("--kept", default=3, help="kept [MCP_ADAPTER_KEPT]")
    parser.add_argument("--gone")
    parser.add_argument("--new", help="added to the code, not to the docs [MCP_ADAPTER_NEW]")
    with pytest.raises(AssertionError, match=r"missing from doc: \['--new'\]"):
        check_both_ways(rows, parser, "doc")
    parser = argparse.ArgumentParser()
    parser.add_argument("--kept", default=3, help="kept [MCP_ADAPTER_KEPT]")
    with pytest.raises(AssertionError, match=r"doc documents flags .*\['--gone'\]"):
        check_both_ways(rows, parser, "doc")


def test_the_checks_catch_a_drifted_default_and_environment_variable(tmp_path: Path) -> None:
    document = tmp_path / "doc.md"
    document.write_text(
        "## Flags\n\n| flag | environment | default | meaning |\n| --- | --- | --- | --- |\n"
        "| `--kept` | `MCP_ADAPTER_KEPT` | 4 MiB | the default drifted |\n"
    )
    parser = argparse.ArgumentParser()
    parser.add_argument("--kept", default=3 * 1024**2, help="kept [MCP_ADAPTER_RENAMED]")
    rows = check_both_ways(table_rows(document, "## Flags"), parser, "doc")
    stated, value = documented_default(rows["kept"].default)
    assert stated and value == 4 * 1024**2 and not same_default(value, 3 * 1024**2)
    with pytest.raises(AssertionError, match="MCP_ADAPTER_RENAMED"):
        check_environment_in_help(rows, parser, "doc")
