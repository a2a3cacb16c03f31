"""What GitOps tools say of an object: Argo CD's Lua health check and the real kstatus.

- :func:`argocd_health` runs the Lua health check of docs/gitops-health.md (the one a
  user pastes into ``argocd-cm``) in Lua 5.4 (PyPI ``lupa``), with ``obj`` bound as
  Argo CD binds it, and returns its ``{status, message}``.
- :func:`kstatus` asks ``kstatus-check`` (built by ``make kstatus`` from
  ``sigs.k8s.io/cli-utils``) what the kstatus library computes for an object.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from functools import cache
from pathlib import Path
from typing import Any

from mcp_operator.dev.processes import BIN_DIR

DOC = Path(__file__).resolve().parents[2] / "docs" / "gitops-health.md"


def health_script() -> str:
    """The Lua block of docs/gitops-health.md."""
    (script,) = re.findall(r"```lua\n(.*?)```", DOC.read_text(), re.DOTALL)
    return script


@cache
def _check() -> Any:
    import lupa.lua54 as lupa

    runtime = lupa.LuaRuntime(unpack_returned_tuples=True)
    return runtime, runtime.eval(f"function(obj)\n{health_script()}\nend")


def argocd_health(obj: dict[str, Any]) -> dict[str, Any]:
    runtime, check = _check()
    answer = check(runtime.table_from(obj, recursive=True))
    return {key: answer[key] for key in ("status", "message") if answer[key] is not None}


def kstatus_path() -> str | None:
    candidate = BIN_DIR / "kstatus-check"
    if candidate.is_file() and os.access(candidate, os.X_OK):
        return str(candidate)
    return shutil.which("kstatus-check")


def kstatus_missing() -> str | None:
    """Why kstatus-check cannot run here, or ``None`` when it can."""
    return (
        None if kstatus_path() else f"kstatus-check is not built in {BIN_DIR}; run `make kstatus`"
    )


def kstatus(obj: dict[str, Any]) -> dict[str, str]:
    """kstatus' ``{name, status, message}`` of one object."""
    found = kstatus_path()
    assert found is not None, kstatus_missing()
    result = subprocess.run(
        [found], input=json.dumps(obj), capture_output=True, text=True, timeout=30, check=True
    )
    answer: dict[str, str] = json.loads(result.stdout)
    return answer
