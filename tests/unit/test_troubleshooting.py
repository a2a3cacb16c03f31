"""docs/troubleshooting.md explains every condition reason the code can set, and no other.

Reasons are found in the source where they are set: a condition written with a literal
reason, a probe error's rule, a Secret reference error, a reason chosen between literals.
"""

from __future__ import annotations

import re
from pathlib import Path

from mcp_operator.mcp.translation import RULES

ROOT = Path(__file__).resolve().parents[2]
SOURCE = ROOT / "operator" / "mcp_operator"
DOC = ROOT / "docs" / "troubleshooting.md"
SETTING = (
    r'WantedCondition\(\s*"\w+",\s*"\w+",\s*"(\w+)"',
    r'ProbeError\(\s*"(\w+)"',
    r'SecretReferenceError\(\s*"(\w+)"',
    r'Outcome\(\s*"[\w-]+",\s*"(\w+)"',
    r'ready_reason="(\w+)"',
    r'^\s*reason = "(\w+)"',
    r'reason = "\w+" if .* else "(\w+)"',
    r'reason = str\(.* or "(\w+)"\)',
    r'^\s*"(Rollout\w+|Disabled)",$',
    r'^[A-Z_]+ = "([A-Z][a-z]+[A-Z]\w*)"$',  # a module constant naming a reason
)


def reasons_in_code() -> set[str]:
    found = {rule.reason for rule in RULES}
    files = [
        *SOURCE.glob("controller/**/*.py"),
        *SOURCE.glob("mcp/*.py"),
        SOURCE / "kube/client.py",
    ]
    for path in files:
        text = path.read_text()
        for pattern in SETTING:
            found.update(re.findall(pattern, text, re.MULTILINE))
    return found


def reasons_in_doc() -> set[str]:
    cells = re.findall(r"^\| (`\w+`(?:, `\w+`)*) \|", DOC.read_text(), re.MULTILINE)
    return {name for cell in cells for name in re.findall(r"`(\w+)`", cell)}


def test_every_reason_the_code_sets_is_explained() -> None:
    found = reasons_in_code()
    assert len(found) > 30, "the source scan finds the reasons"
    missing = sorted(found - reasons_in_doc())
    assert not missing, f"docs/troubleshooting.md does not explain {missing}"


def test_every_explained_reason_is_one_the_code_can_set() -> None:
    everything = "\n".join(p.read_text() for p in SOURCE.rglob("*.py"))
    stale = sorted(r for r in reasons_in_doc() if f'"{r}"' not in everything)
    assert not stale, f"docs/troubleshooting.md explains reasons nothing sets: {stale}"
