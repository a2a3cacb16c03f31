"""Parsing an object's body into its model, once, where its event arrives.

An object that does not parse still needs a status that says why
(``Ready=False, reason=InvalidSpec``): :func:`parse` returns an
:class:`InvalidSpec` with its metadata and the reasons instead of raising.
What an invalid object's status says is each controller's business.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

import pydantic

from mcp_operator.api import ObjectMeta

M = TypeVar("M", bound=pydantic.BaseModel)


@dataclass(frozen=True)
class InvalidSpec:
    """An object whose body did not parse: who it is, and why it is invalid."""

    metadata: ObjectMeta
    message: str


def parse(model: type[M], body: Mapping[str, Any]) -> M | InvalidSpec:
    """``model`` parsed from ``body``, or why it is invalid (metadata must parse)."""
    try:
        return model.model_validate(body)
    except pydantic.ValidationError as error:
        metadata = ObjectMeta.model_validate(body.get("metadata") or {})
        return InvalidSpec(metadata, describe_validation_error(error))


def describe_validation_error(error: pydantic.ValidationError) -> str:
    """One line per problem, each naming the field, e.g. ``spec.url: must start with http://``."""
    lines = []
    for problem in error.errors()[:10]:
        location = ".".join(
            str(part) for part in problem["loc"] if not str(part).startswith("function-")
        )
        lines.append(f"{location}: {problem['msg']}" if location else str(problem["msg"]))
    return "; ".join(lines)
