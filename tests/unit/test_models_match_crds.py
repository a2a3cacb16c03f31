"""The pydantic models mirror the CRDs field for field.

The CRD YAML under ``crds/`` is the schema; the models in ``mcp_operator.api`` must agree with it
on every field's wire name, required-ness, default, enum and bound (length, range, item
count, pattern). The walk is recursive over spec and status of both kinds, so a field added
to one side only fails here, with the path of the field in the message.
"""

from __future__ import annotations

import types
import typing
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any, Literal, Union

import pytest
import yaml
from pydantic import BaseModel, StringConstraints
from pydantic.fields import FieldInfo

from mcp_operator.api import AgentRun, MCPServer

REPO = Path(__file__).resolve().parents[2]
CRDS = REPO / "crds"

SchemaNode = dict[str, Any]
SCALARS: dict[Any, str] = {str: "string", int: "integer", bool: "boolean"}


def load_schema(filename: str) -> SchemaNode:
    document = yaml.safe_load((CRDS / filename).read_text())
    versions = document["spec"]["versions"]
    assert [v["name"] for v in versions] == ["v1alpha1"]
    schema: SchemaNode = versions[0]["schema"]["openAPIV3Schema"]
    return schema


@dataclass
class Shape:
    """A model-side annotation, unwrapped: the bare type and the bounds gathered on the way."""

    type: Any
    bounds: dict[str, Any] = field(default_factory=dict)
    optional: bool = False
    union: tuple[Any, ...] = ()
    """The members of a real union (``int | str``, a quantity), when ``type`` is one."""


def _bounds_of(metadata: typing.Iterable[object]) -> dict[str, Any]:
    bounds: dict[str, Any] = {}
    for item in metadata:
        if isinstance(item, FieldInfo):
            bounds.update(_bounds_of(item.metadata))
            continue
        for attr in ("min_length", "max_length", "ge", "le", "pattern"):
            value = getattr(item, attr, None)
            if value is not None:
                bounds[attr] = value
    return bounds


def unwrap(annotation: Any, metadata: typing.Iterable[object] = ()) -> Shape:
    """Strip ``Annotated`` and ``| None`` layers, collecting their constraints."""
    shape = Shape(annotation, _bounds_of(metadata))
    while True:
        origin = typing.get_origin(shape.type)
        if origin is Annotated:
            base, *extra = typing.get_args(shape.type)
            shape.bounds.update(_bounds_of(extra))
            shape.type = base
        elif origin in (Union, types.UnionType):
            members = [m for m in typing.get_args(shape.type) if m is not type(None)]
            if len(members) != len(typing.get_args(shape.type)):
                shape.optional = True
            if len(members) != 1:
                shape.union = tuple(members)
                return shape
            shape.type = members[0]
        else:
            return shape


def _schema_bounds(node: SchemaNode, kind: str) -> dict[str, Any]:
    names = {
        "string": {"minLength": "min_length", "maxLength": "max_length", "pattern": "pattern"},
        "integer": {"minimum": "ge", "maximum": "le"},
        "array": {"minItems": "min_length", "maxItems": "max_length"},
        "object": {"maxProperties": "max_length"},
    }[kind]
    return {ours: node[theirs] for theirs, ours in names.items() if theirs in node}


def _model_bounds(bounds: dict[str, Any]) -> dict[str, Any]:
    return {key: getattr(value, "pattern", value) for key, value in bounds.items()}


def compare(model: type[BaseModel], node: SchemaNode, path: str, problems: list[str]) -> None:
    """Compare one model with one ``type: object`` schema node, recursively."""
    if node.get("type") != "object" or "properties" not in node:
        problems.append(f"{path}: the model {model.__name__} is an object, the CRD is not")
        return
    properties: dict[str, SchemaNode] = node["properties"]
    fields = {(info.alias or name): info for name, info in model.model_fields.items()}
    for name in sorted(set(properties) - set(fields)):
        problems.append(f"{path}.{name}: in the CRD, not in {model.__name__}")
    for name in sorted(set(fields) - set(properties)):
        problems.append(f"{path}.{name}: in {model.__name__}, not in the CRD")
    crd_required = set(node.get("required", ()))
    for name in sorted(set(fields) & set(properties)):
        info = fields[name]
        where = f"{path}.{name}"
        if info.is_required() != (name in crd_required):
            problems.append(
                f"{where}: required in the {'model' if info.is_required() else 'CRD'} only"
            )
        compare_field(info, properties[name], where, problems)


def compare_field(info: FieldInfo, node: SchemaNode, path: str, problems: list[str]) -> None:
    if "default" in node:
        model_default = info.get_default(call_default_factory=True)
        if isinstance(model_default, BaseModel):
            model_default = model_default.model_dump(by_alias=True, exclude_defaults=True)
        if model_default != node["default"]:
            problems.append(
                f"{path}: default {node['default']!r} in the CRD, {model_default!r} in the model"
            )
    elif not info.is_required() and info.get_default(call_default_factory=True) is not None:
        problems.append(f"{path}: the model has a default the CRD does not")
    compare_type(unwrap(info.annotation, info.metadata), node, path, problems)


def compare_type(shape: Shape, node: SchemaNode, path: str, problems: list[str]) -> None:
    tp = shape.type
    origin = typing.get_origin(tp)
    if node.get("x-kubernetes-int-or-string"):
        members = {unwrap(m).type for m in shape.union}
        if members != {int, str}:
            problems.append(f"{path}: int-or-string in the CRD, {tp!r} in the model")
        return
    kind = node.get("type")
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        compare(tp, node, path, problems)
        return
    if origin is list:
        if kind != "array":
            problems.append(f"{path}: a list in the model, {kind} in the CRD")
            return
        compare_type(unwrap(typing.get_args(tp)[0]), node["items"], f"{path}[]", problems)
    elif origin is dict:
        if kind != "object" or "additionalProperties" not in node:
            problems.append(f"{path}: a map in the model, not in the CRD")
            return
        value = unwrap(typing.get_args(tp)[1])
        compare_type(value, node["additionalProperties"], f"{path}{{}}", problems)
    elif origin is Literal:
        if sorted(typing.get_args(tp)) != sorted(node.get("enum", ())):
            problems.append(f"{path}: enum {node.get('enum')} in the CRD, {tp!r} in the model")
    elif tp is datetime:
        if kind != "string" or node.get("format") != "date-time":
            problems.append(f"{path}: a datetime in the model, not a date-time in the CRD")
        return
    else:
        if SCALARS.get(tp) != kind:
            problems.append(f"{path}: {tp!r} in the model, {kind} in the CRD")
            return
    if "enum" in node and origin is not Literal:
        problems.append(f"{path}: enum in the CRD, not a Literal in the model")
    if kind in ("string", "integer", "array", "object"):
        crd_bounds = _schema_bounds(node, kind)
        model_bounds = _model_bounds(shape.bounds)
        if crd_bounds != model_bounds:
            problems.append(f"{path}: bounds {crd_bounds} in the CRD, {model_bounds} in the model")


@pytest.mark.parametrize(
    ("filename", "model"),
    [
        ("mcpservers.mcp-operator.dev.yaml", MCPServer),
        ("agentruns.mcp-operator.dev.yaml", AgentRun),
    ],
    ids=["MCPServer", "AgentRun"],
)
def test_the_model_and_the_crd_have_the_same_fields_required_ness_defaults_and_bounds(
    filename: str, model: type[BaseModel]
) -> None:
    schema = load_schema(filename)
    problems: list[str] = []
    for part in ("spec", "status"):
        info = model.model_fields[part]
        compare_field(info, schema["properties"][part], part, problems)
    assert set(schema["properties"]) == {"apiVersion", "kind", "metadata", "spec", "status"}
    assert schema["required"] == ["spec"]
    assert model.model_fields["spec"].is_required()
    assert not model.model_fields["status"].is_required()
    assert problems == []


class _Inner(BaseModel):
    name: Annotated[str, StringConstraints(max_length=3)]


class _Drifted(BaseModel):
    inner: _Inner
    extra: int | None = None
    mode: Literal["a", "b"] = "a"


def test_the_walk_reports_fields_required_ness_defaults_enums_and_bounds_that_differ() -> None:
    node: SchemaNode = {
        "type": "object",
        "required": ["inner", "gone"],
        "properties": {
            "inner": {
                "type": "object",
                "properties": {"name": {"type": "string", "maxLength": 4}},
            },
            "gone": {"type": "string", "maxLength": 1},
            "mode": {"type": "string", "enum": ["a", "c"], "default": "c"},
        },
    }
    problems: list[str] = []
    compare(_Drifted, node, "spec", problems)
    assert problems == [
        "spec.gone: in the CRD, not in _Drifted",
        "spec.extra: in _Drifted, not in the CRD",
        "spec.inner.name: required in the model only",
        "spec.inner.name: bounds {'max_length': 4} in the CRD, {'max_length': 3} in the model",
        "spec.mode: default 'c' in the CRD, 'a' in the model",
        "spec.mode: enum ['a', 'c'] in the CRD, typing.Literal['a', 'b'] in the model",
    ]


def test_every_string_list_number_and_map_in_the_crds_is_bounded() -> None:
    unbounded: list[str] = []

    def walk(node: SchemaNode, path: str) -> None:
        kind = node.get("type")
        if (
            kind == "string"
            and "maxLength" not in node
            and "enum" not in node
            and node.get("format") != "date-time"
            and not path.endswith(("apiVersion", "kind"))
        ):
            unbounded.append(path)
        if kind == "integer" and not ("minimum" in node and "maximum" in node):
            unbounded.append(path)
        if kind == "array":
            if "maxItems" not in node:
                unbounded.append(path)
            walk(node["items"], f"{path}[]")
        if kind == "object" and "additionalProperties" in node:
            if "maxProperties" not in node:
                unbounded.append(path)
            walk(node["additionalProperties"], f"{path}{{}}")
        for name, child in node.get("properties", {}).items():
            walk(child, f"{path}.{name}")

    for filename in ("mcpservers.mcp-operator.dev.yaml", "agentruns.mcp-operator.dev.yaml"):
        walk(load_schema(filename), filename)
    assert unbounded == []


def test_every_field_in_the_crds_has_a_description() -> None:
    missing: list[str] = []

    def walk(node: SchemaNode, path: str) -> None:
        if not node.get("description") and not path.endswith(".metadata"):
            missing.append(path)
        for name, child in node.get("properties", {}).items():
            walk(child, f"{path}.{name}")
        if "items" in node:
            walk(node["items"], f"{path}[]")
        if isinstance(node.get("additionalProperties"), dict):
            walk(node["additionalProperties"], f"{path}{{}}")

    for filename in ("mcpservers.mcp-operator.dev.yaml", "agentruns.mcp-operator.dev.yaml"):
        walk(load_schema(filename), filename)
    assert missing == []
