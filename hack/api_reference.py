"""Writes docs/api-reference.md from the CRDs in crds/ (the one source of truth).

Run by `make api-reference`; tests/unit/test_api_reference.py fails when the committed
page differs from what this produces. One table per kind and part (spec, status): every
field by its path, its type, default, bounds and enum, and the CRD's description.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
CRDS = ROOT / "crds"
OUTPUT = ROOT / "docs" / "api-reference.md"
BOUNDS = (
    ("minLength", "min length"),
    ("maxLength", "max length"),
    ("minimum", "min"),
    ("maximum", "max"),
    ("minItems", "min items"),
    ("maxItems", "max items"),
    ("pattern", "pattern"),
)


def _type(node: dict[str, Any]) -> str:
    """The field's type as people write it: string, []object, map[string]string."""
    kind = "int or string" if node.get("x-kubernetes-int-or-string") else node.get("type", "any")
    if kind == "array":
        return f"[]{_type(node.get('items') or {})}"
    if kind == "object" and "additionalProperties" in node and not node.get("properties"):
        return f"map[string]{_type(node['additionalProperties'] or {})}"
    return kind


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _constraints(node: dict[str, Any]) -> str:
    found = []
    if "enum" in node:
        found.append("one of " + ", ".join(f"`{v}`" for v in node["enum"]))
    if "default" in node:
        found.append(f"default `{json.dumps(node['default'])}`")
    for key, label in BOUNDS:
        if key in node:
            found.append(f"{label} `{node[key]}`")
    if node.get("x-kubernetes-list-type") == "map":
        keys = ", ".join(node.get("x-kubernetes-list-map-keys") or ())
        found.append(f"list keyed by `{keys}`")
    return "; ".join(found)


def _rows(node: dict[str, Any], path: str, required: bool, rows: list[str]) -> None:
    description = _cell(str(node.get("description") or ""))
    flag = " (required)" if required else ""
    rows.append(f"| `{path}`{flag} | {_type(node)} | {_cell(_constraints(node))} | {description} |")
    if node.get("x-kubernetes-preserve-unknown-fields") and not node.get("properties"):
        return
    children = node.get("properties") or (node.get("items") or {}).get("properties")
    if not children:
        return
    needed = set(node.get("required") or (node.get("items") or {}).get("required") or ())
    prefix = f"{path}[]" if node.get("type") == "array" else path
    for name, child in children.items():
        _rows(child, f"{prefix}.{name}", name in needed, rows)


def render() -> str:
    lines = [
        "# API reference",
        "",
        "Generated from the CRDs in `crds/` by `make api-reference` (`hack/api_reference.py`);",
        "`tests/unit/test_api_reference.py` fails when this page and the CRDs differ. Group",
        "`mcp-operator.dev`, version `v1alpha1`.",
        "",
    ]
    for path in sorted(CRDS.glob("*.yaml")):
        crd = yaml.safe_load(path.read_text())
        names = crd["spec"]["names"]
        (version,) = (v for v in crd["spec"]["versions"] if v.get("storage"))
        schema = version["schema"]["openAPIV3Schema"]
        lines += [f"## {names['kind']}", ""]
        lines += [_cell(str(schema.get("description") or "")), ""]
        short = ", ".join(f"`{n}`" for n in names.get("shortNames") or ())
        lines += [
            f"Plural `{names['plural']}`, short names {short}, scope {crd['spec']['scope']}.",
            "",
        ]
        for part in ("spec", "status"):
            node = schema["properties"][part]
            rows: list[str] = []
            _rows(node, part, part in (schema.get("required") or ()), rows)
            lines += [
                f"### {names['kind']} {part}",
                "",
                "| field | type | constraints | description |",
                "| --- | --- | --- | --- |",
                *rows,
                "",
            ]
        rules = schema["properties"]["spec"].get("x-kubernetes-validations") or ()
        if rules:
            lines += [f"Rules on {names['kind']} spec (checked by the API server):", ""]
        for rule in rules:
            lines.append(f"- {_cell(str(rule.get('message') or rule['rule']))}")
        lines.append("")
    return "\n".join(lines).rstrip("\n") + "\n"


def main() -> int:
    OUTPUT.write_text(render())
    print(f"Wrote {OUTPUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
