"""The filter layers of the bridge file: which tools, prompts and resources an agent may see.

This module owns :class:`FilterLayer` (allow and deny globs on a server's original names and
URIs) and the checks that a name passes every layer (:func:`tool_allowed`,
:func:`prompt_allowed`, :func:`resource_allowed`). A later layer can only narrow. Pure.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import Field

from mcp_operator.api.common import ConfigModel, Globs, UriGlobs
from mcp_operator.mcp.naming import matches


class FilterLayer(ConfigModel):
    """One layer of tool filters: globs (``*``, ``?``) on the server's original tool names."""

    allow: Globs = Field(default_factory=list)
    """A tool must match one of these; empty means every tool."""
    deny: Globs = Field(default_factory=list)
    """A tool matching one of these is refused, even when allowed above."""
    prompts_allow: Globs = Field(default_factory=list)
    """A prompt (by its original name) must match one of these; empty means every prompt."""
    prompts_deny: Globs = Field(default_factory=list)
    """A prompt matching one of these is hidden and cannot be got."""
    resources_allow: UriGlobs = Field(default_factory=list)
    """A resource (by its original URI) or template (by its original URI template) must
    match one of these; empty means every one."""
    resources_deny: UriGlobs = Field(default_factory=list)
    """A resource or template matching one of these is hidden and cannot be read."""


def prompt_allowed(layers: Sequence[FilterLayer], original_name: str) -> bool:
    """Whether the prompt ``original_name`` passes every layer's prompt filters."""
    return all(
        (not layer.prompts_allow or matches(layer.prompts_allow, original_name))
        and not matches(layer.prompts_deny, original_name)
        for layer in layers
    )


def resource_allowed(layers: Sequence[FilterLayer], original_uri: str) -> bool:
    """Whether the resource (or template) ``original_uri`` passes every layer's resource
    filters."""
    return all(
        (not layer.resources_allow or matches(layer.resources_allow, original_uri))
        and not matches(layer.resources_deny, original_uri)
        for layer in layers
    )


def tool_allowed(layers: Sequence[FilterLayer], original_name: str) -> bool:
    """Whether ``original_name`` passes every layer (allow, empty = all; then deny)."""
    return all(
        (not layer.allow or matches(layer.allow, original_name))
        and not matches(layer.deny, original_name)
        for layer in layers
    )
