"""What the audit trail and span attributes keep of a call's arguments and results: one policy.

``MCP_SERVER["REDACTED_KEYS"]`` names the keys whose values are replaced, at any depth
(case-insensitive, and a key containing a name counts: ``db_password``); a project with other
rules names its own ``REDACTION_POLICY(name, value) -> value``. ``digest`` fingerprints the
arguments before redaction, so that two calls with the same secret can be matched without it.

The audit trail's writer redacts and digests every call's arguments, so both are made for speed:
the policy is read once a batch (:func:`redactor`), a key's verdict is kept, only what changed is
copied, and the JSON encoder is built once.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import Any

from .settings import mcp_settings

REDACTED = "[REDACTED]"
Redactor = Callable[[str, Any], Any]


def _refuse(value: Any) -> Any:
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def json_encoder(*, sort_keys: bool, allow_nan: bool, default: Callable) -> Callable[[Any], str]:
    """``json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, ...).encode``, made once: the
    json module makes its C encoder anew at each call, which costs more than encoding a call's
    small arguments. (Without the module's cycle check: arguments and results are parsed or
    already sent JSON, never cyclic.)"""
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:  # a Python without the C accelerator
        return json.JSONEncoder(sort_keys=sort_keys, separators=(",", ":"), ensure_ascii=False,
                                allow_nan=allow_nan, default=default).encode
    encode = make(None, default, json.encoder.encode_basestring, None, ":", ",", sort_keys, False, allow_nan)
    return lambda value: "".join(encode(value, 0))


# Canonical JSON (sorted keys, no spaces), what the digest hashes; and jsonrpc.encode's compact JSON.
canonical = json_encoder(sort_keys=True, allow_nan=True, default=str)
compact = json_encoder(sort_keys=False, allow_nan=False, default=_refuse)


def digest(value: Any) -> str:
    """A SHA-256 of ``value`` as canonical JSON: the same arguments give the same digest on every
    process. (A lone surrogate, which UTF-8 cannot carry, is hashed as its surrogatepass bytes.)"""
    return hashlib.sha256(canonical(value).encode("utf-8", "surrogatepass")).hexdigest()


def redact(name: str, value: Any) -> Any:
    """``value`` (the arguments or result of the tool, prompt or resource ``name``) as the
    project's policy lets it be kept: ``value`` itself when nothing in it is redacted."""
    return redactor()(name, value)


def redact_keys(value: Any, keys: list[str] | tuple[str, ...]) -> Any:
    """``value`` with the value of every mapping key that contains one of ``keys``
    (case-insensitive) replaced by ``[REDACTED]``, at any depth; what changed is a copy."""
    return _keys_redactor(tuple(key.lower() for key in keys))("", value)


def redactor() -> Redactor:
    """:func:`redact` with the settings read now: the project's ``REDACTION_POLICY``, or a
    redactor of ``REDACTED_KEYS``, made again only when that setting changed."""
    policy = mcp_settings.REDACTION_POLICY
    if policy is not None:
        return policy
    keys = mcp_settings.REDACTED_KEYS
    global _made
    if _made is None or _made[0] is not keys or _made[1] != keys:  # a new list, or the same edited
        _made = (keys, list(keys), _keys_redactor(tuple(key.lower() for key in keys)))
    return _made[2]


_made: tuple[Any, list[str], Redactor] | None = None
# Verdicts kept per key: a tool's argument names are few and come back with every call.
_MAX_VERDICTS = 10_000
_PLAIN = frozenset({str, int, float, bool, type(None)})  # what JSON holds besides containers


def _keys_redactor(needles: tuple[str, ...]) -> Redactor:
    if not needles:
        return lambda _name, value: value
    verdicts: dict[str, bool] = {}

    def search(key: str) -> bool:
        verdict = verdicts.get(key)
        if verdict is None:
            lowered = key.lower()
            verdict = any(needle in lowered for needle in needles)
            if len(verdicts) >= _MAX_VERDICTS:
                verdicts.clear()
            verdicts[key] = verdict
        return verdict

    def redact(_name: str, value: Any) -> Any:
        if type(value) is dict:  # the usual arguments: keys known to be kept, plain values
            for key, item in value.items():
                if verdicts.get(key) is not False or type(item) not in _PLAIN:
                    return _redacted(value, search)
            return value
        return _redacted(value, search)

    return redact


def _redacted(value: Any, search: Callable[[str], bool]) -> Any:
    """``value``, or a copy with what ``search`` finds redacted (only what changed is copied)."""
    if isinstance(value, dict):
        copy = None
        for key, item in value.items():
            if search(key if isinstance(key, str) else str(key)):
                new = REDACTED
            elif isinstance(item, dict | list | tuple):
                new = _redacted(item, search)
            else:
                continue
            if new is not item:
                if copy is None:
                    copy = dict(value)
                copy[key] = new
        return value if copy is None else copy
    if isinstance(value, list | tuple):
        items = [_redacted(item, search) if isinstance(item, dict | list | tuple) else item for item in value]
        return value if all(new is old for new, old in zip(items, value, strict=True)) else items
    return value
