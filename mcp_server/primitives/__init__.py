"""The things a server offers: tools, prompts, resources and resource templates."""

from .prompt import Prompt, PromptArgument, PromptMessage, PromptResult
from .resource import Resource, ResourceTemplate
from .schema import InputSchema, OutputSchema
from .tool import Tool
from .tool_response import ToolResponse

__all__ = [
    "InputSchema",
    "OutputSchema",
    "Prompt",
    "PromptArgument",
    "PromptMessage",
    "PromptResult",
    "Resource",
    "ResourceTemplate",
    "Tool",
    "ToolResponse",
]
