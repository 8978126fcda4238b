"""Reading request params with clear -32602 errors."""

from __future__ import annotations

from typing import Any

from mcp_protocol.errors import InvalidParamsError


def as_object(params: Any, method: str) -> dict:
    if params is None:
        return {}
    if not isinstance(params, dict):
        raise InvalidParamsError(f"Invalid params: {method} takes an object")
    return params



def required_string(params: dict, key: str, method: str) -> str:
    value = params.get(key)
    if not isinstance(value, str):
        raise InvalidParamsError(f"Invalid params: {method} needs a string '{key}'")
    return value


# The longest URI a subscription keeps (ResourceSubscription.uri is a column of this length).
MAX_SUBSCRIPTION_URI_LENGTH = 2048


def subscription_uri(params: dict, method: str) -> str:
    uri = required_string(params, "uri", method)
    if len(uri) > MAX_SUBSCRIPTION_URI_LENGTH:
        raise InvalidParamsError(
            f"Invalid params: {method} takes a 'uri' of at most {MAX_SUBSCRIPTION_URI_LENGTH} characters"
        )
    return uri


def optional_object(params: dict, key: str, method: str) -> dict:
    value = params.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise InvalidParamsError(f"Invalid params: '{key}' of {method} must be an object")
    return value
