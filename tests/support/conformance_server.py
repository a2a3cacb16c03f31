"""A stdio MCP server on the official SDK with what the conformance suite's scenarios call.

Run it as ``python tests/support/conformance_server.py`` (stdio, the legacy era: a
stdio child is initialized by the adapter). It implements the ``test_*`` tools,
prompts and resources of ``@modelcontextprotocol/conformance`` (0.1.16 for the
legacy revisions, 0.2.0-alpha.12 for 2026-07-28), so that the suite measures the
adapter in front of it rather than a server that lacks what the scenarios call.

Every server→client request it sends mid-call (sampling, elicitation, roots)
carries, in ``params._meta``:

- ``progressToken``: the token of the call that caused it, so that the adapter
  attributes the request to that call exactly (its attribution rule); its log
  messages carry it too;
- ``mcp-operator.dev/inputKey``: the key under which a 2026-07-28 caller sees the
  request in an ``input_required`` result's ``inputRequests`` (the scenarios name
  their keys: ``user_name``, ``capital_question``, …).

A tool the scenarios call with ``sampling``/``elicitation`` but without those
capabilities gets the adapter's refusal of its request (an ``MCPError``); tools
that need the answer let it propagate as the call's error, tools that can do
without carry on.
"""

from __future__ import annotations

import asyncio
import json
import sys
import warnings
from typing import Any, Literal

import anyio
import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import NotificationOptions, Server
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError

INPUT_KEY = "mcp-operator.dev/inputKey"
IMAGE = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg"
    "=="
)
AUDIO = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA="
SCHEMA_2020_12: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {
        "address": {
            "$anchor": "address",
            "type": "object",
            "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
        }
    },
    "properties": {
        "name": {"type": "string"},
        "address": {"$ref": "#/$defs/address"},
        "kind": {"type": "string", "enum": ["person", "company"]},
        "vat": {"type": "string"},
    },
    "allOf": [{"anyOf": [{"required": ["name"]}, {"required": ["address"]}]}],
    "if": {"properties": {"kind": {"const": "company"}}},
    "then": {"required": ["vat"]},
    "else": {"not": {"required": ["vat"]}},
    "additionalProperties": False,
}
NO_ARGS: dict[str, Any] = {"type": "object", "properties": {}}
WATCHED = "test://watched-resource"


def _schema(**properties: str) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {name: {"type": kind} for name, kind in properties.items()},
        "required": list(properties),
    }


TOOLS: dict[str, tuple[str, dict[str, Any]]] = {
    "test_simple_text": ("Returns simple text", NO_ARGS),
    "test_image_content": ("Returns an image", NO_ARGS),
    "test_audio_content": ("Returns audio", NO_ARGS),
    "test_embedded_resource": ("Returns an embedded resource", NO_ARGS),
    "test_multiple_content_types": ("Returns text, image and resource", NO_ARGS),
    "test_tool_with_logging": ("Logs three messages while it runs", NO_ARGS),
    "test_tool_with_progress": ("Reports progress 0, 50, 100", NO_ARGS),
    "test_error_handling": ("Always fails", NO_ARGS),
    "test_reconnection": ("Answers after a short pause", NO_ARGS),
    "test_sampling": ("Asks the client's LLM", _schema(prompt="string")),
    "test_elicitation": ("Asks the user", _schema(message="string")),
    "test_elicitation_sep1034_defaults": ("Elicitation with defaults", NO_ARGS),
    "test_elicitation_sep1330_enums": ("Elicitation with enum forms", NO_ARGS),
    "json_schema_2020_12_tool": ("Has a JSON Schema 2020-12 input schema", SCHEMA_2020_12),
    "test_missing_capability": ("Needs sampling", NO_ARGS),
    "test_input_required_result_elicitation": ("Asks for a name", NO_ARGS),
    "test_input_required_result_sampling": ("Asks the LLM", NO_ARGS),
    "test_input_required_result_list_roots": ("Asks for roots", NO_ARGS),
    "test_input_required_result_request_state": ("Asks for a confirmation", NO_ARGS),
    "test_input_required_result_multiple_inputs": ("Asks three things at once", NO_ARGS),
    "test_input_required_result_multi_round": ("Asks twice, one after the other", NO_ARGS),
    "test_input_required_result_tampered_state": ("Asks for a confirmation", NO_ARGS),
    "test_input_required_result_capabilities": ("Asks for sampling and elicitation", NO_ARGS),
    "test_logging_tool": ("Logs while it runs", NO_ARGS),
    "test_streaming_elicitation": ("Asks the user mid-call", NO_ARGS),
    "test_trigger_tool_change": ("Says the tool list changed", NO_ARGS),
    "test_trigger_prompt_change": ("Says the prompt list changed", NO_ARGS),
    "test_custom_headers": (
        "Has a parameter mirrored in an Mcp-Param header",
        {
            "type": "object",
            "properties": {"region": {"type": "string", "x-mcp-header": "Region"}},
            "required": ["region"],
        },
    ),
}
PROMPTS: dict[str, tuple[str, list[str]]] = {
    "test_simple_prompt": ("A prompt without arguments", []),
    "test_prompt_with_arguments": ("A prompt with two arguments", ["arg1", "arg2"]),
    "test_prompt_with_embedded_resource": ("A prompt with a resource", ["resourceUri"]),
    "test_prompt_with_image": ("A prompt with an image", []),
    "test_input_required_result_prompt": ("A prompt that asks for context", []),
}
RESOURCES: dict[str, tuple[str, str, dict[str, str]]] = {
    "test://static-text": (
        "static-text",
        "text/plain",
        {"text": "This is the content of the static text resource."},
    ),
    "test://static-binary": ("static-binary", "image/png", {"blob": IMAGE}),
    WATCHED: ("watched-resource", "text/plain", {"text": "Watched resource content"}),
}


def _text(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text=text)])


class ConformanceServer:
    """The handlers; one instance per process (the adapter runs one child)."""

    def __init__(self) -> None:
        self.subscriptions: set[str] = set()
        self.server: Server[Any] = Server(
            "mcp-operator-conformance-server",
            version="1.0.0",
            on_list_tools=self.list_tools,
            on_call_tool=self.call_tool,
            on_list_prompts=self.list_prompts,
            on_get_prompt=self.get_prompt,
            on_list_resources=self.list_resources,
            on_list_resource_templates=self.list_templates,
            on_read_resource=self.read_resource,
            on_subscribe_resource=self.subscribe,
            on_unsubscribe_resource=self.unsubscribe,
            on_completion=self.complete,
            on_set_logging_level=self.set_level,
        )

    # ------------------------------------------------------------------ server→client requests

    async def ask(
        self, ctx: ServerRequestContext[Any], method: str, params: dict[str, Any], key: str
    ) -> dict[str, Any]:
        """Send one server→client request tied to the current call; its result as a dict."""
        meta: dict[str, Any] = {INPUT_KEY: key}
        token = _progress_token(ctx)
        if token is not None:
            meta["progressToken"] = token
        request: Any
        result_type: Any
        body = {**params, "_meta": meta}
        if method == "sampling/createMessage":
            request = types.CreateMessageRequest(
                params=types.CreateMessageRequestParams.model_validate(body)
            )
            result_type = types.CreateMessageResult
        elif method == "elicitation/create":
            request = types.ElicitRequest(params=types.ElicitRequestFormParams.model_validate(body))
            result_type = types.ElicitResult
        else:
            request = types.ListRootsRequest(params=types.RequestParams.model_validate(body))
            result_type = types.ListRootsResult
        result = await ctx.session.send_request(request, result_type)
        dumped: dict[str, Any] = result.model_dump(by_alias=True, mode="json", exclude_none=True)
        return dumped

    async def log(self, ctx: ServerRequestContext[Any], text: str) -> None:
        """An info log message about the current call, carrying its progress token."""
        params: dict[str, Any] = {"level": "info", "data": text, "logger": "conformance"}
        token = _progress_token(ctx)
        if token is not None:
            params["_meta"] = {"progressToken": token}
        notification = types.LoggingMessageNotification(
            params=types.LoggingMessageNotificationParams.model_validate(params)
        )
        await ctx.session.send_notification(notification)

    async def elicit(
        self, ctx: ServerRequestContext[Any], key: str, message: str, **fields: str
    ) -> dict[str, Any]:
        params = {"mode": "form", "message": message, "requestedSchema": _schema(**fields)}
        return await self.ask(ctx, "elicitation/create", params, key)

    async def sample(self, ctx: ServerRequestContext[Any], key: str, text: str) -> dict[str, Any]:
        params = {
            "messages": [{"role": "user", "content": {"type": "text", "text": text}}],
            "maxTokens": 100,
        }
        return await self.ask(ctx, "sampling/createMessage", params, key)

    # ------------------------------------------------------------------ tools

    async def list_tools(
        self, ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        tools = [
            types.Tool(name=name, description=text, input_schema=schema)
            for name, (text, schema) in TOOLS.items()
        ]
        return types.ListToolsResult(tools=tools)

    async def call_tool(
        self, ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        name, args = params.name, params.arguments or {}
        simple = self._simple_tool(name, args)
        if simple is not None:
            return simple
        if name == "test_trigger_tool_change":
            await ctx.session.send_tool_list_changed()
            return _text("Tool list change sent")
        if name == "test_trigger_prompt_change":
            await ctx.session.send_prompt_list_changed()
            return _text("Prompt list change sent")
        if name in ("test_tool_with_logging", "test_logging_tool"):
            for step in (
                "Tool execution started",
                "Tool processing data",
                "Tool execution completed",
            ):
                await self.log(ctx, step)
                await anyio.sleep(0.05)
            return _text("Tool with logging executed successfully")
        if name == "test_tool_with_progress":
            token = _progress_token(ctx)
            for value in (0, 50, 100):
                if token is not None:
                    await ctx.session.send_progress_notification(
                        token, value, total=100, message=f"Completed step {value} of 100"
                    )
                await anyio.sleep(0.05)
            return _text(str(token))
        if name == "test_reconnection":
            await anyio.sleep(0.1)
            return _text("Reconnection test completed successfully")
        return await self._interactive_tool(ctx, name, args)

    def _simple_tool(self, name: str, args: dict[str, Any]) -> types.CallToolResult | None:
        image = types.ImageContent(data=IMAGE, mime_type="image/png")
        if name == "test_simple_text":
            return _text("This is a simple text response for testing.")
        if name == "test_image_content":
            return types.CallToolResult(content=[image])
        if name == "test_audio_content":
            return types.CallToolResult(
                content=[types.AudioContent(data=AUDIO, mime_type="audio/wav")]
            )
        if name == "test_embedded_resource":
            resource = types.TextResourceContents(
                uri="test://embedded-resource",
                mime_type="text/plain",
                text="This is an embedded resource content.",
            )
            return types.CallToolResult(content=[types.EmbeddedResource(resource=resource)])
        if name == "test_multiple_content_types":
            resource = types.TextResourceContents(
                uri="test://mixed-content-resource",
                mime_type="application/json",
                text=json.dumps({"test": "data", "value": 123}),
            )
            return types.CallToolResult(
                content=[
                    types.TextContent(text="Multiple content types test:"),
                    image,
                    types.EmbeddedResource(resource=resource),
                ]
            )
        if name == "test_error_handling":
            return types.CallToolResult(
                content=[
                    types.TextContent(text="This tool intentionally returns an error for testing")
                ],
                is_error=True,
            )
        if name == "test_custom_headers":
            return _text(f"Region: {args.get('region')}")
        if name == "json_schema_2020_12_tool":
            return _text(f"JSON Schema 2020-12 tool called with: {json.dumps(args)}")
        return None

    async def _interactive_tool(
        self, ctx: ServerRequestContext[Any], name: str, args: dict[str, Any]
    ) -> types.CallToolResult:
        if name == "test_sampling":
            answer = await self.sample(ctx, "prompt", str(args.get("prompt", "")))
            return _text(f"LLM response: {answer.get('content', {}).get('text', 'No response')}")
        if name == "test_elicitation":
            answer = await self.elicit(
                ctx, "response", str(args.get("message", "")), response="string"
            )
            return _text(f"User response: {_outcome(answer)}")
        if name in ("test_elicitation_sep1034_defaults", "test_elicitation_sep1330_enums"):
            answer = await self.ask(ctx, "elicitation/create", _form(name), "form")
            return _text(f"Elicitation completed: {_outcome(answer)}")
        if name in ("test_missing_capability", "test_input_required_result_sampling"):
            answer = await self.sample(ctx, "capital_question", "What is the capital of France?")
            return _text(f"LLM response: {answer.get('content', {}).get('text')}")
        if name in ("test_input_required_result_elicitation", "test_streaming_elicitation"):
            answer = await self.elicit(ctx, "user_name", "What is your name?", name="string")
            return _text(f"Hello, {answer.get('content', {}).get('name')}!")
        if name == "test_input_required_result_list_roots":
            roots = await self.ask(ctx, "roots/list", {}, "client_roots")
            return _text("Roots: " + ", ".join(r["uri"] for r in roots.get("roots", [])))
        if name in (
            "test_input_required_result_request_state",
            "test_input_required_result_tampered_state",
        ):
            await self.ask(ctx, "elicitation/create", _confirm(), "confirm")
            return _text("Confirmed: state-ok")
        if name == "test_input_required_result_multiple_inputs":
            person, greeting, roots = await asyncio.gather(
                self.elicit(ctx, "user_name", "What is your name?", name="string"),
                self.sample(ctx, "greeting", "Generate a greeting"),
                self.ask(ctx, "roots/list", {}, "client_roots"),
            )
            return _text(f"Got {person['action']}, {greeting['role']}, {len(roots['roots'])} roots")
        if name == "test_input_required_result_multi_round":
            first = await self.elicit(ctx, "step1", "Step 1: What is your name?", name="string")
            second = await self.elicit(
                ctx, "step2", "Step 2: What is your favorite color?", color="string"
            )
            return _text(f"{first.get('content')} then {second.get('content')}")
        if name == "test_input_required_result_capabilities":
            return await self._what_the_client_can(ctx)
        raise MCPError(code=-32602, message=f"Unknown tool: {name}")

    async def _what_the_client_can(self, ctx: ServerRequestContext[Any]) -> types.CallToolResult:
        """Ask for elicitation and sampling at once; use what the client could answer."""

        async def attempt(ask: Any) -> str:
            try:
                answer = await ask
            except MCPError as error:
                return f"refused ({error.error.code})"
            return "answered" if answer else "empty"

        name, text = await asyncio.gather(
            attempt(self.elicit(ctx, "user_name", "What is your name?", name="string")),
            attempt(self.sample(ctx, "capital_question", "What is the capital of France?")),
        )
        return _text(f"elicitation {name}, sampling {text}")

    # ------------------------------------------------------------------ prompts

    async def list_prompts(
        self, ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListPromptsResult:
        prompts = [
            types.Prompt(
                name=name,
                description=text,
                arguments=[types.PromptArgument(name=arg, required=True) for arg in args],
            )
            for name, (text, args) in PROMPTS.items()
        ]
        return types.ListPromptsResult(prompts=prompts)

    async def get_prompt(
        self, ctx: ServerRequestContext[Any], params: types.GetPromptRequestParams
    ) -> types.GetPromptResult:
        args = params.arguments or {}
        user: Literal["user"] = "user"
        if params.name == "test_simple_prompt":
            messages = [
                types.PromptMessage(
                    role=user,
                    content=types.TextContent(text="This is a simple prompt for testing."),
                )
            ]
        elif params.name == "test_prompt_with_arguments":
            text = f"Prompt with arguments: arg1='{args.get('arg1')}', arg2='{args.get('arg2')}'"
            messages = [types.PromptMessage(role=user, content=types.TextContent(text=text))]
        elif params.name == "test_prompt_with_embedded_resource":
            resource = types.TextResourceContents(
                uri=args.get("resourceUri", "test://example-resource"),
                mime_type="text/plain",
                text="Embedded resource content for testing.",
            )
            messages = [
                types.PromptMessage(role=user, content=types.EmbeddedResource(resource=resource)),
                types.PromptMessage(
                    role=user,
                    content=types.TextContent(text="Please process the embedded resource above."),
                ),
            ]
        elif params.name == "test_prompt_with_image":
            messages = [
                types.PromptMessage(
                    role=user, content=types.ImageContent(data=IMAGE, mime_type="image/png")
                ),
                types.PromptMessage(
                    role=user, content=types.TextContent(text="Please analyze the image above.")
                ),
            ]
        elif params.name == "test_input_required_result_prompt":
            answer = await self.elicit(
                ctx, "user_context", "What context should the prompt use?", context="string"
            )
            text = f"Use this context: {answer.get('content', {}).get('context')}"
            messages = [types.PromptMessage(role=user, content=types.TextContent(text=text))]
        else:
            raise MCPError(code=-32602, message=f"Unknown prompt: {params.name}")
        return types.GetPromptResult(messages=messages)

    # ------------------------------------------------------- resources, completion, logging

    async def list_resources(
        self, ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        resources = [
            types.Resource(uri=uri, name=name, mime_type=mime)
            for uri, (name, mime, _body) in RESOURCES.items()
        ]
        return types.ListResourcesResult(resources=resources)

    async def list_templates(
        self, ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourceTemplatesResult:
        template = types.ResourceTemplate(
            uri_template="test://template/{id}/data", name="template", mime_type="application/json"
        )
        return types.ListResourceTemplatesResult(resource_templates=[template])

    async def read_resource(
        self, ctx: ServerRequestContext[Any], params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        uri = str(params.uri)
        contents: Any
        if uri in RESOURCES:
            _name, mime, body = RESOURCES[uri]
            contents = {"uri": uri, "mimeType": mime, **body}
        elif uri.startswith("test://template/") and uri.endswith("/data"):
            item = uri.removeprefix("test://template/").removesuffix("/data")
            text = json.dumps({"id": item, "templateTest": True, "data": f"Data for ID: {item}"})
            contents = {"uri": uri, "mimeType": "application/json", "text": text}
        else:
            raise MCPError(code=-32602, message=f"Resource not found: {uri}", data={"uri": uri})
        return types.ReadResourceResult.model_validate({"contents": [contents]})

    async def subscribe(
        self, ctx: ServerRequestContext[Any], params: types.SubscribeRequestParams
    ) -> types.EmptyResult:
        self.subscriptions.add(str(params.uri))
        return types.EmptyResult()

    async def unsubscribe(
        self, ctx: ServerRequestContext[Any], params: types.UnsubscribeRequestParams
    ) -> types.EmptyResult:
        self.subscriptions.discard(str(params.uri))
        return types.EmptyResult()

    async def complete(
        self, ctx: ServerRequestContext[Any], params: types.CompleteRequestParams
    ) -> types.CompleteResult:
        return types.CompleteResult(completion=types.Completion(values=[], total=0, has_more=False))

    async def set_level(
        self, ctx: ServerRequestContext[Any], params: types.SetLevelRequestParams
    ) -> types.EmptyResult:
        return types.EmptyResult()


def _outcome(answer: dict[str, Any]) -> str:
    return f"action={answer['action']}, content={json.dumps(answer.get('content', {}))}"


def _progress_token(ctx: ServerRequestContext[Any]) -> Any:
    meta: Any = ctx.meta or {}
    return meta.get("progress_token", meta.get("progressToken"))


def _form(name: str) -> dict[str, Any]:
    if name == "test_elicitation_sep1034_defaults":
        properties: dict[str, Any] = {
            "name": {"type": "string", "default": "John Doe"},
            "age": {"type": "integer", "default": 30},
            "score": {"type": "number", "default": 95.5},
            "status": {
                "type": "string",
                "enum": ["active", "inactive", "pending"],
                "default": "active",
            },
            "verified": {"type": "boolean", "default": True},
        }
        message = "Please review and update the form fields with defaults"
    else:
        titled = [{"const": f"value{i}", "title": f"Option {i}"} for i in (1, 2, 3)]
        properties = {
            "untitledSingle": {"type": "string", "enum": ["option1", "option2", "option3"]},
            "titledSingle": {"type": "string", "oneOf": titled},
            "legacyEnum": {
                "type": "string",
                "enum": ["opt1", "opt2", "opt3"],
                "enumNames": ["Option One", "Option Two", "Option Three"],
            },
            "untitledMulti": {
                "type": "array",
                "minItems": 1,
                "maxItems": 3,
                "items": {"type": "string", "enum": ["option1", "option2", "option3"]},
            },
            "titledMulti": {
                "type": "array",
                "minItems": 1,
                "maxItems": 3,
                "items": {"anyOf": titled},
            },
        }
        message = "Please select options from the enum fields"
    return {
        "mode": "form",
        "message": message,
        "requestedSchema": {"type": "object", "properties": properties, "required": []},
    }


def _confirm() -> dict[str, Any]:
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
    return {"mode": "form", "message": "Please confirm", "requestedSchema": schema}


async def main() -> None:
    server = ConformanceServer().server
    async with stdio_server() as (read_stream, write_stream):
        changes = NotificationOptions(
            prompts_changed=True, resources_changed=True, tools_changed=True
        )
        options = server.create_initialization_options(notification_options=changes)
        await server.run(read_stream, write_stream, options)


if __name__ == "__main__":
    warnings.simplefilter("ignore")  # the SDK warns that logging is deprecated in 2026-07-28
    sys.exit(anyio.run(main))
