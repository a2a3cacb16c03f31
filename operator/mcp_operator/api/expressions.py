"""The expressions of authorization rules: CEL, compiled once, checked at admission.

A rule's ``match`` is a CEL expression (the language of the CRDs' own validation rules and
of ValidatingAdmissionPolicy) over four variables:

- ``caller``: ``{run, namespace, serviceAccount, pod}``, who calls (the AgentRun's identity);
- ``server``: ``{name, namespace}``, the MCPServer;
- ``tool``: ``{name, exposedName, title, annotations}``, the original and exposed names and
  the annotations as pinned by the operator;
- ``arguments``: the call's arguments (after they passed the tool's schema).

The engine is ``common-expression-language`` (Rust ``cel`` under Python bindings), chosen by
``bench/policy_bench.py``. The CRD's own CEL cannot parse a user's CEL, so the operator
checks each expression when it parses the object (:func:`check_expression`, called by the
models' validators): a syntax error or an unknown variable makes the object ``InvalidSpec``,
and pydantic's error location names the rule (``spec.policy.rules[2].match``). Evaluating the
rules is :mod:`mcp_operator.bridge.rules`' job.
"""

from __future__ import annotations

import functools
from typing import Final

import cel

VARIABLES: Final = frozenset({"caller", "server", "tool", "arguments"})
"""The variables a rule may read."""

STATIC_VARIABLES: Final = frozenset({"caller", "server", "tool"})
"""The variables fixed for a tool in a run: a rule reading only these has one answer per
tool, decided when the catalog is built."""

MAX_EXPRESSION_CHARS: Final = 4096


@functools.lru_cache(maxsize=1024)
def compiled(expression: str) -> cel.Program:
    """The compiled program of ``expression`` (cached: rules repeat across servers)."""
    return cel.compile(expression)


def check_expression(expression: str) -> str:
    """``expression`` if it compiles and reads only :data:`VARIABLES`; else ``ValueError``
    with a one-line reason."""
    try:
        program = compiled(expression)
    except (ValueError, RuntimeError) as error:
        first = str(error).strip().splitlines()
        raise ValueError(f"not a valid CEL expression: {first[0] if first else error}") from None
    if set(program.variables()) - VARIABLES:
        # The names a comprehension binds (``x`` in ``l.exists(x, ...)``) are listed too:
        # a dry run on empty variables tells them from a name nothing defines.
        try:
            program.execute({name: {} for name in VARIABLES})
        except RuntimeError as error:
            if "Undefined variable" in str(error):
                raise ValueError(
                    f"{str(error).splitlines()[0]}; a rule may read caller, server, tool and "
                    "arguments"
                ) from None
        except Exception:  # a missing field or a wrong type on empty values: fine here
            pass
    return expression


def is_static(expression: str) -> bool:
    """Whether the expression does not read ``arguments`` (only :data:`STATIC_VARIABLES` and
    the names its comprehensions bind)."""
    return "arguments" not in compiled(expression).variables()
