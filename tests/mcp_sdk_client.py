"""RuntimeMCP driven by the official MCP Python SDK, for the tests (tests/it/mcp_sdk.rs).

Usage: python mcp_sdk_client.py URL TOKEN < plan.json

The plan (JSON on standard input) names the tool calls to make (a "$proposal" argument is the
id of the last proposal made), the resources to read, the prompts to get and the arguments to
complete; or it is {"failover": true}: one call, then (on a line from the test, which kills
the node meanwhile) another in the same session, then one in a new session. Every structured result is checked against its tool's outputSchema twice: by the
SDK's own call_tool, and here with jsonschema's Draft 2020-12 validator (the schema itself
checked first). The report (JSON on standard output) says what each step gave; a failure is
reported in it, never raised, so the test shows all of them.
"""

import asyncio
import json
import sys

import jsonschema
import mcp.types as types
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client


def dump(model):
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


async def run(url, token, plan):
    report = {"calls": [], "reads": [], "rendered": [], "completions": [], "updates": []}
    updates = asyncio.Queue()

    async def on_message(message):
        if isinstance(message, types.ResourceUpdatedNotification):
            await updates.put(str(message.params.uri))

    http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
    async with http, streamable_http_client(url, http_client=http) as (read, write):
        async with ClientSession(read, write, message_handler=on_message, read_timeout_seconds=30) as session:
            initialized = await session.initialize()
            report["protocolVersion"] = initialized.protocol_version
            report["capabilities"] = dump(initialized.capabilities)
            tools = (await session.list_tools()).tools
            schemas = {tool.name: tool.output_schema for tool in tools}
            report["tools"] = [
                {"name": tool.name, "title": tool.title, "outputSchema": tool.output_schema is not None}
                for tool in tools
            ]
            last_proposal = None
            for name, arguments in plan.get("calls", []):
                arguments = {
                    key: (last_proposal if value == "$proposal" else value) for key, value in arguments.items()
                }
                step = {"name": name}
                try:
                    result = await session.call_tool(name, arguments)
                    step["isError"] = bool(result.is_error)
                    structured = result.structured_content
                    step["structured"] = structured
                    schema = schemas.get(name)
                    if not result.is_error and schema is not None:
                        jsonschema.Draft202012Validator.check_schema(schema)
                        errors = [error.message for error in jsonschema.Draft202012Validator(schema).iter_errors(structured)]
                        step["validated"] = not errors
                        step["schemaErrors"] = errors
                        if name.startswith("runtime_propose_"):
                            last_proposal = structured["result"]["proposal"]
                except Exception as error:  # the SDK's own check raises RuntimeError
                    step["error"] = f"{type(error).__name__}: {error}"
                report["calls"].append(step)

            report["resources"] = [dump(resource) for resource in (await session.list_resources()).resources]
            report["templates"] = [
                template.uri_template for template in (await session.list_resource_templates()).resource_templates
            ]
            for uri in plan.get("reads", []):
                step = {"uri": uri}
                try:
                    contents = (await session.read_resource(uri)).contents
                    step["mimeType"] = contents[0].mime_type
                    step["text"] = contents[0].text
                except Exception as error:
                    step["error"] = f"{type(error).__name__}: {error}"
                report["reads"].append(step)

            report["prompts"] = [dump(prompt) for prompt in (await session.list_prompts()).prompts]
            for name, arguments in plan.get("prompts", []):
                step = {"name": name}
                try:
                    got = await session.get_prompt(name, arguments)
                    step["text"] = got.messages[0].content.text
                except Exception as error:
                    step["error"] = f"{type(error).__name__}: {error}"
                report["rendered"].append(step)

            for kind, reference, argument, typed in plan.get("completions", []):
                ref = (
                    types.PromptReference(type="ref/prompt", name=reference)
                    if kind == "prompt"
                    else types.ResourceTemplateReference(type="ref/resource", uri=reference)
                )
                completed = await session.complete(ref, {"name": argument, "value": typed})
                report["completions"].append(completed.completion.values)

            # A subscription, told when the alarms change (the test changes them on its cue).
            if plan.get("subscribe"):
                await session.subscribe_resource(plan["subscribe"])
                print(json.dumps({"subscribed": plan["subscribe"]}), flush=True)
                try:
                    report["updates"].append(await asyncio.wait_for(updates.get(), timeout=30))
                except asyncio.TimeoutError:
                    report["updates"].append(None)
    return report


async def call_value(session):
    result = await session.call_tool("runtime_get_value", {"tag": "Tank1.Level"})
    return bool(result.is_error)


async def failover(url, token):
    """A session whose node dies under it: what the next call says, and a new session after."""
    report = {"statuses": []}

    async def seen(response):
        report["statuses"].append([response.request.method, response.status_code])

    try:
        http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
        http.event_hooks["response"].append(seen)
        async with http, streamable_http_client(url, http_client=http) as (read, write):
            async with ClientSession(read, write, read_timeout_seconds=30) as session:
                await session.initialize()
                report["before"] = await call_value(session)
                print(json.dumps({"called": True}), flush=True)
                await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
                try:
                    report["after"] = await call_value(session)
                except Exception as error:
                    report["afterError"] = f"{type(error).__name__}: {error}"
    except BaseException as error:  # closing a session whose node is gone may fail too
        report["closeError"] = f"{type(error).__name__}: {error}"
    # As the error says: a new session, on whichever node answers now.
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
    async with http, streamable_http_client(url, http_client=http) as (read, write):
        async with ClientSession(read, write, read_timeout_seconds=30) as session:
            await session.initialize()
            report["again"] = await call_value(session)
    return report


def main():
    url, token = sys.argv[1], sys.argv[2]
    plan = json.loads(sys.stdin.readline())
    report = asyncio.run(failover(url, token) if plan.get("failover") else run(url, token, plan))
    print(json.dumps({"report": report}), flush=True)


if __name__ == "__main__":
    main()
