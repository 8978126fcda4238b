"""Checks every message on the wire against the JSON schema of its protocol revision.

Schemas are copies of the published ones (``tests/schemas/<revision>/schema.json``).
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

from jsonschema import Draft7Validator, Draft202012Validator

SCHEMAS = Path(__file__).parent / "schemas"
REVISIONS = sorted(p.name for p in SCHEMAS.iterdir() if p.is_dir())

# The result type of each request method, by the name the schemas use.
RESULT_TYPES = {
    "initialize": "InitializeResult",
    "server/discover": "DiscoverResult",
    "ping": "EmptyResult",
    "logging/setLevel": "EmptyResult",
    "tools/list": "ListToolsResult",
    "tools/call": "CallToolResult",
    "prompts/list": "ListPromptsResult",
    "prompts/get": "GetPromptResult",
    "resources/list": "ListResourcesResult",
    "resources/read": "ReadResourceResult",
    "resources/templates/list": "ListResourceTemplatesResult",
    "resources/subscribe": "EmptyResult",
    "resources/unsubscribe": "EmptyResult",
    "completion/complete": "CompleteResult",
    "roots/list": "ListRootsResult",
    "sampling/createMessage": "CreateMessageResult",
    "elicitation/create": "ElicitResult",
}


# The Tasks extension (SEP-2663) on the 2026-07-28 wire: its definitions (schemas/tasks-extension.json)
# are merged into that revision's schema, and its messages checked against them.
TASKS_REVISION = "2026-07-28"
TASK_REQUESTS = {"tasks/get": "GetTaskRequest", "tasks/update": "UpdateTaskRequest",
                 "tasks/cancel": "CancelTaskRequest"}
TASK_RESULTS = {"tasks/get": "GetTaskResult", "tasks/update": "TaskAckResult",
                "tasks/cancel": "TaskAckResult"}
TASK_NOTIFICATION = "notifications/tasks"

# The Skills extension (SEP-2640), defined in both eras: schemas/skills-extension.json, merged the same way.
SKILLS_REVISIONS = ("2025-11-25", "2026-07-28")
SKILL_REQUESTS = {"skills/list": "ListSkillsRequest", "skills/get": "GetSkillRequest",
                  "resources/directory/read": "ReadDirectoryRequest"}
SKILL_RESULTS = {"skills/list": "ListSkillsResult", "skills/get": "GetSkillResult",
                 "resources/directory/read": "ReadDirectoryResult"}


class WireError(AssertionError):
    pass


@cache
def _document(revision: str) -> dict:
    document = json.loads((SCHEMAS / revision / "schema.json").read_text())
    if revision == TASKS_REVISION:
        extension = json.loads((SCHEMAS / "tasks-extension.json").read_text())
        document["$defs"].update(extension["$defs"])
    if revision in SKILLS_REVISIONS:
        document["$defs"].update(json.loads((SCHEMAS / "skills-extension.json").read_text())["$defs"])
    return document


@cache
def _validator(revision: str, definition: str) -> Any:
    document = _document(revision)
    defs_key = "$defs" if "$defs" in document else "definitions"
    if definition not in document[defs_key]:
        raise WireError(f"schema {revision} has no definition {definition}")
    schema = {**document, "$ref": f"#/{defs_key}/{definition}"}
    cls = Draft202012Validator if defs_key == "$defs" else Draft7Validator
    return cls(schema)


@cache
def _typed_messages_carry_envelope(revision: str) -> bool:
    """Newer schemas define requests with ``jsonrpc`` and ``id``; older ones only method and params."""
    document = _document(revision)
    defs = document.get("$defs", document.get("definitions", {}))
    return "jsonrpc" in defs["CallToolRequest"].get("properties", {})  # (every revision has it)


def _typed(message: dict, revision: str) -> dict:
    if _typed_messages_carry_envelope(revision):
        return message
    return {k: v for k, v in message.items() if k in ("method", "params")}


def has_definition(revision: str, definition: str) -> bool:
    document = _document(revision)
    return definition in document.get("$defs", document.get("definitions", {}))


def validate(instance: Any, revision: str, definition: str) -> None:
    errors = sorted(_validator(revision, definition).iter_errors(instance), key=lambda e: e.path)
    if errors:
        details = "; ".join(
            f"{'/'.join(map(str, e.absolute_path)) or '<root>'}: {e.message}" for e in errors[:5]
        )
        raise WireError(f"not a valid {definition} of {revision}: {details}\n{json.dumps(instance)[:2000]}")


def check_server_message(message: Any, revision: str, method: str | None = None) -> None:
    """A message the server wrote: a response to ``method``, a notification or a request."""
    if isinstance(message, list):
        for item in message:
            check_server_message(item, revision)
        return
    if "method" in message:
        if revision == TASKS_REVISION and message["method"] == TASK_NOTIFICATION:
            validate(message, revision, "TaskStatusNotification")
            return
        kind = "ServerRequest" if "id" in message else "ServerNotification"
        envelope = "JSONRPCRequest" if "id" in message else "JSONRPCNotification"
        validate(message, revision, envelope)
        validate(_typed(message, revision), revision, kind)
        return
    if "error" in message:
        check_error(message, revision)
        return
    envelope = "JSONRPCResultResponse" if has_definition(revision, "JSONRPCResultResponse") \
        else "JSONRPCResponse"
    validate(message, revision, envelope)
    result = message["result"]
    if revision == TASKS_REVISION and method in TASK_RESULTS:
        validate(result, revision, TASK_RESULTS[method])
    elif revision in SKILLS_REVISIONS and method in SKILL_RESULTS:
        validate(result, revision, SKILL_RESULTS[method])
    elif isinstance(result, dict) and result.get("resultType") == "task":
        validate(result, revision, "CreateTaskResult")
    elif isinstance(result, dict) and result.get("resultType") == "input_required":
        # SEP-2322: any of the three producers may answer so instead of its own result type.
        validate(result, revision, "InputRequiredResult")
    elif method in RESULT_TYPES:
        validate(result, revision, RESULT_TYPES[method])


def check_error(message: dict, revision: str) -> None:
    if message.get("id") is None:
        # JSON-RPC 2.0 requires "id": null when the request id could not be read; 2025-11-25
        # made the id optional for exactly this case, so check the rest against that revision.
        assert "id" in message and message["id"] is None, message
        validate({k: v for k, v in message.items() if k != "id"}, "2025-11-25",
                 "JSONRPCErrorResponse")
        return
    definition = "JSONRPCErrorResponse" if has_definition(revision, "JSONRPCErrorResponse") \
        else "JSONRPCError"
    validate(message, revision, definition)


def check_client_message(message: Any, revision: str) -> None:
    """A message a client wrote (requests, notifications and responses to the server)."""
    if isinstance(message, list):
        for item in message:
            check_client_message(item, revision)
        return
    if "method" in message and revision == TASKS_REVISION and message["method"] in TASK_REQUESTS:
        validate(message, revision, TASK_REQUESTS[message["method"]])
    elif "method" in message and revision in SKILLS_REVISIONS and message["method"] in SKILL_REQUESTS:
        validate(message, revision, SKILL_REQUESTS[message["method"]])
    elif "method" in message:
        kind = "ClientRequest" if "id" in message else "ClientNotification"
        envelope = "JSONRPCRequest" if "id" in message else "JSONRPCNotification"
        validate(message, revision, envelope)
        validate(_typed(message, revision), revision, kind)
    elif "error" in message:
        check_error(message, revision)
    else:
        validate(message["result"], revision, "ClientResult")
