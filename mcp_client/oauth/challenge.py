"""``WWW-Authenticate`` parsing (RFC 9110 §11.6.1 with RFC 6750 and RFC 9728 parameters)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_TOKEN = r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+"
_PARAM = re.compile(rf'\s*({_TOKEN})\s*=\s*(?:"((?:[^"\\]|\\.)*)"|({_TOKEN}=*))\s*')
_SCHEME = re.compile(rf"\s*({_TOKEN})(?:\s+|$)")


@dataclass(frozen=True)
class Challenge:
    """One challenge: its scheme (lower-cased) and parameters (names lower-cased)."""

    scheme: str
    params: dict[str, str] = field(default_factory=dict)

    @property
    def resource_metadata(self) -> str | None:
        return self.params.get("resource_metadata")

    @property
    def scope(self) -> str | None:
        return self.params.get("scope")

    @property
    def error(self) -> str | None:
        return self.params.get("error")


def parse_www_authenticate(value: str) -> list[Challenge]:
    """Every challenge in a header value: ``Bearer realm="x", scope="a b", Basic realm="y"``.

    Quoted strings keep commas and unescape ``\\x``; a malformed tail ends the parse without an error
    (a server's bad header must not crash the client).
    """
    challenges: list[Challenge] = []
    position, length = 0, len(value)
    while position < length:
        while position < length and value[position] in ", \t":
            position += 1
        scheme = _SCHEME.match(value, position)
        if not scheme:
            break
        current = Challenge(scheme.group(1).lower())
        challenges.append(current)
        position = scheme.end()
        while position < length:
            param = _PARAM.match(value, position)
            if not param:
                break  # a token68, or the next challenge's scheme
            quoted, bare = param.group(2), param.group(3)
            current.params[param.group(1).lower()] = (
                re.sub(r"\\(.)", r"\1", quoted) if quoted is not None else bare)
            position = param.end()
            if position < length and value[position] == ",":
                position += 1
            else:
                break
        else:
            continue
        # Skip a token68 value (``Basic abc==``) if one is here.
        token68 = re.compile(r"\s*[A-Za-z0-9\-._~+/]+=*\s*(?:,|$)").match(value, position)
        if token68 and not _PARAM.match(value, position):
            position = token68.end()
    return challenges


def token_challenge(values: list[str], schemes: tuple[str, ...] = ("bearer", "dpop")) -> Challenge | None:
    """The challenge of the first of ``schemes`` the ``WWW-Authenticate`` header values carry: the
    Bearer one, else the DPoP one (RFC 9449 §7.1) by default."""
    challenges = [challenge for value in values for challenge in parse_www_authenticate(value)]
    for scheme in schemes:
        for challenge in challenges:
            if challenge.scheme == scheme:
                return challenge
    return None
