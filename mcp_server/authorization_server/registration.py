"""What a client may register (RFC 7591 and 7592), checked before the toolkit reads the request.

Registration is open to anyone, so everything a request can make the server keep or compute is
bounded here: its size and nesting (checked before decoding, so a deep or huge body costs a scan),
characters no database or page can keep (NUL, lone surrogates, control characters in a name),
redirect URIs (https or loopback http, in number and length), grant types OAuth 2.1 keeps, and
grants with no user, which open registration hands out only when the deployment says so. Every
refusal is a 400 with the RFC 7591 error code; nothing is stored.
"""

from __future__ import annotations

import unicodedata
from typing import Any

from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, JsonResponse

from mcp_protocol.jsonrpc import DecodeError, decode

from ..settings import mcp_settings
from ..telemetry import metrics
from .redirect_uris import problems
from .throttle import Rate, Throttle, client_address

# Grant types a client may register: OAuth 2.1 has no implicit or password grant.
REGISTRABLE_GRANT_TYPES = {"authorization_code", "refresh_token", "client_credentials"}
AUTH_METHODS = ("none", "client_secret_basic", "client_secret_post")
# Client metadata is a flat object of strings and arrays (a "jwks" nests four levels): these
# bounds only cut off bodies no client sends.
MAX_DEPTH = 10
MAX_CONTAINERS = 1000
# Application.name's column.
MAX_CLIENT_NAME_LENGTH = 255
SETTING = "MCP_SERVER['AUTHORIZATION_SERVER']"


def error(code: str, description: str, status: int = 400) -> JsonResponse:
    return JsonResponse({"error": code, "error_description": description}, status=status)


def registration_throttle() -> Throttle:
    """Registrations per client address (``REGISTRATION_RATE``)."""
    rate = mcp_settings.AUTHORIZATION_SERVER["REGISTRATION_RATE"]
    return Throttle("registrations", Rate.parse(rate, f"{SETTING}['REGISTRATION_RATE']"))


def too_many_registrations(request: HttpRequest) -> JsonResponse | None:
    """Count this registration of its client address; 429 once the address made too many."""
    throttle = registration_throttle()
    retry_after = throttle.record(client_address(request))
    if retry_after is None or throttle.rate is None:
        return None
    metrics.refused("registration_rate", 429)
    answer = error("temporarily_unavailable",
                   f"too many registrations from this address (at most {throttle.rate.count} every "
                   f"{throttle.rate.seconds} s); try again in {retry_after} s", status=429)
    answer["Retry-After"] = str(retry_after)
    return answer


def check_registration(request: HttpRequest) -> JsonResponse | None:
    """The refusal of a registration request's body, or None when the toolkit may go on with it."""
    conf = mcp_settings.AUTHORIZATION_SERVER
    limit = conf["MAX_REGISTRATION_BYTES"]
    too_large = error("invalid_client_metadata", f"the request body is larger than {limit} bytes")
    declared = request.META.get("CONTENT_LENGTH") or "0"
    if not declared.isdigit() or int(declared) > limit:
        return too_large  # refused before it is read
    try:
        body = request.body
    except RequestDataTooBig:  # a body sent without its length, past DATA_UPLOAD_MAX_MEMORY_SIZE
        return too_large
    if len(body) > limit:
        return too_large
    try:
        data = decode(body, max_depth=MAX_DEPTH, max_containers=MAX_CONTAINERS)
    except DecodeError as exc:
        return error("invalid_client_metadata", _decode_problem(exc))
    if not isinstance(data, dict):
        return error("invalid_client_metadata", "the request body must be a JSON object")
    return check_metadata(data, conf)


def _decode_problem(exc: DecodeError) -> str:
    reason = exc.message.removeprefix("Parse error: ").removeprefix("Invalid Request: ")
    return f"the request body is not acceptable JSON: {reason}"


def check_metadata(data: dict[str, Any], conf: dict[str, Any]) -> JsonResponse | None:
    """What the toolkit's registration does not check for MCP: grant types OAuth 2.1 keeps, auth
    methods that fit them, grants with no user, redirect URIs and the client's name."""
    grant_types = data.get("grant_types", ["authorization_code"])
    if not isinstance(grant_types, list) or not all(isinstance(g, str) for g in grant_types):
        return error("invalid_client_metadata", "grant_types must be an array of strings")
    unknown = sorted(set(grant_types) - REGISTRABLE_GRANT_TYPES)
    if unknown:
        return error("invalid_client_metadata",
                     f"unsupported grant_types {unknown}: use authorization_code (with refresh_token) "
                     "or client_credentials")
    if "client_credentials" in grant_types and not conf["DYNAMIC_CLIENT_CREDENTIALS"]:
        return error("invalid_client_metadata",
                     "client_credentials is not open to dynamic registration on this server: its "
                     "tokens act for no user, so such a client is registered by an administrator")
    method = data.get("token_endpoint_auth_method", "client_secret_basic")
    if method not in AUTH_METHODS:
        return error("invalid_client_metadata", f"unsupported token_endpoint_auth_method {method!r}: "
                                                f"use one of {', '.join(AUTH_METHODS)}")
    if "client_credentials" in grant_types and method == "none":
        return error("invalid_client_metadata",
                     "client_credentials needs a confidential client: token_endpoint_auth_method "
                     "client_secret_basic or client_secret_post")
    # A client_credentials client needs none, but any it names must still be valid ones.
    if "authorization_code" in grant_types or data.get("redirect_uris"):
        reasons = problems(data.get("redirect_uris"), max_count=conf["MAX_REDIRECT_URIS"],
                           max_length=conf["MAX_REDIRECT_URI_LENGTH"])
        if reasons:
            return error("invalid_redirect_uri", "; ".join(reasons))
    reason = client_name_problem(data.get("client_name"))
    if reason is not None:
        return error("invalid_client_metadata", reason)
    return None


def client_name_problem(name: object) -> str | None:
    """Why ``name`` cannot be a client's name (shown on the consent page), or None."""
    if name is None:
        return None
    if not isinstance(name, str):
        return "client_name must be a string"
    if len(name) > MAX_CLIENT_NAME_LENGTH:
        return f"client_name is longer than {MAX_CLIENT_NAME_LENGTH} characters"
    if any(unicodedata.category(character) == "Cc" for character in name):
        return "client_name must not contain control characters"
    return None
