"""URL rules of the OAuth flow: canonical resource URIs, https-or-loopback, refused address ranges.

No DNS resolution is done: the checks look at what the URL says, so a hostname that resolves to a
private address is not caught here (that is the job of the network's egress rules).
"""

from __future__ import annotations

import ipaddress
import posixpath
import re
from urllib.parse import urlsplit, urlunsplit

from .errors import InsecureURL

DEFAULT_PORTS = {"http": 80, "https": 443}

# Address classes a URL handed to us by a server may not point into (RFC 9728 §7.7 SSRF advice),
# unless the MCP server itself is in the same class: a loopback server's AS may be loopback too.
RANGES: dict[str, list[ipaddress.IPv4Network | ipaddress.IPv6Network]] = {
    "loopback": [ipaddress.ip_network("127.0.0.0/8"), ipaddress.ip_network("::1/128")],  # before ::/96
    "unspecified": [ipaddress.ip_network("0.0.0.0/8"), ipaddress.ip_network("::/96")],
    "link-local": [ipaddress.ip_network("169.254.0.0/16"), ipaddress.ip_network("fe80::/10")],
    "private": [ipaddress.ip_network(net) for net in
                ("10.0.0.0/8", "100.64.0.0/10", "172.16.0.0/12", "192.168.0.0/16", "fc00::/7")],
}


def redact(url: str) -> str:
    """The URL without userinfo, query or fragment, for error messages."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        if ":" in host:
            host = f"[{host}]"
        port = f":{parts.port}" if parts.port else ""
    except ValueError:
        return "<unparsable URL>"
    return urlunsplit((parts.scheme, host + port, parts.path, "", ""))


def parse_host(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """The address an IP-literal host names, in any of its spellings (``127.1``, ``0x7f.0.0.1``,
    ``2130706433``, ``::ffff:127.0.0.1``); None for a name."""
    host = host.strip("[]").lower()
    try:
        address = ipaddress.ip_address(host.split("%")[0])
    except ValueError:
        address = _numeric_ipv4(host)
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def _numeric_ipv4(host: str) -> ipaddress.IPv4Address | None:
    """The inet_aton forms browsers and curl accept: 1 to 4 parts, decimal, octal or hex."""
    parts = host.split(".")
    if not 1 <= len(parts) <= 4 or not all(re.fullmatch(r"0x[0-9a-f]*|[0-9]+", p) for p in parts):
        return None
    try:
        numbers = [int(p, 16) if p.startswith("0x") else int(p, 8) if len(p) > 1 and p.startswith("0")
                   else int(p) for p in parts]
    except ValueError:
        return None
    *head, last = numbers
    if any(n > 255 for n in head) or last >= 256 ** (5 - len(numbers)):
        return None
    value = 0
    for n in head:
        value = value * 256 + n
    value = value * 256 ** (5 - len(numbers)) + last
    return ipaddress.IPv4Address(value) if value < 2 ** 32 else None


def address_class(host: str) -> str | None:
    """Which refused class a host is in (``localhost`` counts as loopback), or None."""
    name = host.lower().rstrip(".")
    if name == "localhost" or name.endswith(".localhost"):
        return "loopback"
    address = parse_host(name)
    if address is None:
        return None
    for label, networks in RANGES.items():
        if any(address in network for network in networks if network.version == address.version):
            return label
    return None


def is_loopback(url: str) -> bool:
    try:
        return address_class(urlsplit(url).hostname or "") == "loopback"
    except ValueError:
        return False


def require_secure(url: str, what: str) -> str:
    """Raise InsecureURL unless ``url`` is absolute https, or http on a loopback host."""
    try:
        parts = urlsplit(url)
        host = parts.hostname
        parts.port  # noqa: B018 - raises on a bad port
    except ValueError as exc:
        raise InsecureURL(f"the {what} is not a valid URL: {redact(url)}") from exc
    if parts.scheme == "https" and host:
        return url
    if parts.scheme == "http" and host and address_class(host) == "loopback":
        return url
    raise InsecureURL(f"the {what} {redact(url)} must use https (plain http only on a loopback address)")


def require_public(url: str, what: str, server_url: str) -> str:
    """Raise InsecureURL when a URL a server handed us names an address in a refused class that the
    MCP server itself is not in."""
    require_secure(url, what)
    target = address_class(urlsplit(url).hostname or "")
    if target is None:
        return url
    if target == address_class(urlsplit(server_url).hostname or ""):
        return url
    raise InsecureURL(f"the {what} {redact(url)} points to a {target} address, which the MCP server "
                      "is not on; refused (server-side request forgery)")


def origin(url: str) -> str:
    parts = urlsplit(url)
    scheme, host = parts.scheme.lower(), (parts.hostname or "").lower()
    if ":" in host:
        host = f"[{host}]"
    port = parts.port
    return f"{scheme}://{host}" + (f":{port}" if port and port != DEFAULT_PORTS.get(scheme) else "")


def canonical_resource(url: str) -> str:
    """The canonical URI of an MCP server (RFC 8707 and the MCP spec): lower-case scheme and host,
    no default port, no userinfo or fragment, ``%2e`` decoded and dot segments removed; no trailing
    slash unless it is the whole path."""
    parts = urlsplit(url)
    path = re.sub(r"%2[eE]", ".", parts.path)
    if path:
        trailing = path.endswith("/")
        path = posixpath.normpath(path)
        if path.startswith("//"):
            path = "/" + path.lstrip("/")
        if path == ".":
            path = "/"
        elif trailing and path != "/":
            path += "/"
    if path == "/":
        path = ""
    return origin(url) + path + (f"?{parts.query}" if parts.query else "")


def covers(resource: str, server_url: str) -> bool:
    """Whether a PRM ``resource`` names this server: the same origin, and its path a prefix of the
    server's at a segment boundary."""
    want, have = canonical_resource(server_url), canonical_resource(resource)
    if origin(want) != origin(have):
        return False
    want_path = urlsplit(want).path or "/"
    have_path = urlsplit(have).path or "/"
    if urlsplit(have).query and have != want:
        return False
    if have_path in ("", "/") or want_path == have_path:
        return True
    prefix = have_path.rstrip("/") + "/"
    return want_path.startswith(prefix)
