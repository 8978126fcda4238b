"""The one-line ASGI application (``mcp_server.asgi.get_asgi_application``), as the demo's
``project/asgi.py`` uses it: the endpoint at ``ENDPOINT_PATH``, static files and Django, under
daphne, uvicorn, hypercorn and daphne's ``runserver``; its routes composed into another router; the
system checks that say when ``runserver`` cannot serve the endpoint."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import httpx
import pytest
from django.core import checks
from django.core.management import get_commands
from django.test import override_settings

from mcp_server.asgi import BodyLimit, mcp_urlpatterns

from .harness import REPO
from .http_harness import database_env
from .http_support import Client, raw_http, running, split_reply
from .wire import check_server_message

MIB = 1 << 20


@pytest.fixture
def live(transactional_db):
    """Data the server processes write is committed: these tests run on a transactional database."""


class Assets(HTMLParser):
    """The stylesheets and scripts a page links."""

    def __init__(self) -> None:
        super().__init__()
        self.urls: list[str] = []

    def handle_starttag(self, tag: str, attrs: list) -> None:
        found = dict(attrs)
        if tag == "link" and found.get("rel") == "stylesheet" and found.get("href"):
            self.urls.append(found["href"])
        elif tag == "script" and found.get("src"):
            self.urls.append(found["src"])


def assert_admin_is_styled(base: str) -> None:
    """``/admin/login/`` and every stylesheet and script it links answer 200."""
    with httpx.Client(base_url=base, timeout=30) as http:
        page = http.get("/admin/login/")
        assert page.status_code == 200, page.text[:500]
        parser = Assets()
        parser.feed(page.text)
        assert len(parser.urls) >= 3, parser.urls  # admin's base.css, login.css, nav, dark mode...
        for url in parser.urls:
            asset = http.get(url)
            assert asset.status_code == 200, f"{url}: {asset.status_code}"
            kind = "text/css" if url.endswith(".css") else "javascript"
            assert kind in asset.headers["content-type"], (url, asset.headers["content-type"])
            assert asset.content and len(asset.content) == int(asset.headers["content-length"])


def initialize(url: str) -> dict:
    client = Client(url)
    result = client.initialize()
    client.close()
    return result


def oversized_reply(port: int, path: str) -> bytes:
    """What the server answers a POST of 8 MiB, sent whole before reading."""
    size = 8 * MIB
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(b"POST %s HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n"
                     b"accept: application/json, text/event-stream\r\ncontent-length: %d\r\n\r\n"
                     % (path.encode(), size))
        sock.sendall(b" " * size)
        sock.settimeout(30)
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


# Static files ------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def collected(tmp_path_factory, django_db_setup) -> Path:
    """``manage.py collectstatic`` of the demo, into a folder of the test's own."""
    root = tmp_path_factory.mktemp("static")
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "tests.http_settings", "MCP_TEST_STATIC_ROOT": str(root),
           **database_env()}
    done = subprocess.run([sys.executable, "manage.py", "collectstatic", "--noinput"], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (root / "admin" / "css" / "base.css").exists()
    # A file only the collected folder has: serving it shows what is served comes from there.
    (root / "collected-only.txt").write_text("from STATIC_ROOT\n")
    return root


@pytest.mark.feature("HTTP-36")
@pytest.mark.parametrize("server_kind", ["daphne", "uvicorn", "hypercorn", "granian"])
def test_the_admin_is_styled_in_development_from_the_apps_folders(django_db_blocker, live, server_kind):
    with running(django_db_blocker, server=server_kind) as server:
        assert_admin_is_styled(f"http://127.0.0.1:{server.port}")
        # And the endpoint is there too, in the same application.
        assert initialize(server.url)["serverInfo"]["name"] == "django-mcp-demo"
        assert_header_names_on_the_wire(server.port, server_kind)


# The framing headers an HTTP/1.1 server adds itself (h11 writes these in Header-Case).
FRAMING = {b"connection", b"transfer-encoding", b"content-length", b"date", b"server"}


def assert_header_names_on_the_wire(port: int, server_kind: str) -> None:
    """The endpoint's header names as each server writes them (HTTP-36): uvicorn, hypercorn and
    granian write the application's lower-case names as they are; daphne (Twisted) writes
    Header-Case."""
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "c", "version": "1"}}})
    request = ("POST /mcp HTTP/1.1\r\nhost: 127.0.0.1\r\nconnection: close\r\n"
               "content-type: application/json\r\naccept: application/json, text/event-stream\r\n"
               f"content-length: {len(body)}\r\n\r\n{body}").encode()
    status, reply = raw_http(port, request)
    assert status == 200, reply
    names = [line.split(b":", 1)[0] for line in reply.split(b"\r\n\r\n", 1)[0].split(b"\r\n")[1:]]
    ours = [name for name in names if name.lower() not in FRAMING]
    assert {b"mcp-session-id", b"content-type"} <= {name.lower() for name in ours}, names
    if server_kind == "daphne":
        assert b"Mcp-Session-Id" in ours and b"mcp-session-id" not in ours, names
    else:
        assert all(name == name.lower() for name in ours), names


@pytest.mark.parametrize("server_kind", ["daphne", "uvicorn"])
def test_the_admin_is_styled_in_production_from_static_root(django_db_blocker, live, collected, server_kind):
    env = {"MCP_TEST_STATIC_ROOT": str(collected)}
    with running(django_db_blocker, server=server_kind, env=env) as server:
        base = f"http://127.0.0.1:{server.port}"
        assert_admin_is_styled(base)
        only = httpx.get(f"{base}/static/collected-only.txt", timeout=30)
        assert only.status_code == 200 and only.text == "from STATIC_ROOT\n"
        # Conditional requests: a client that has the file gets 304, nothing sent again.
        css = httpx.get(f"{base}/static/admin/css/base.css", timeout=30)
        again = httpx.get(f"{base}/static/admin/css/base.css", timeout=30,
                          headers={"if-none-match": css.headers["etag"]})
        assert again.status_code == 304 and again.content == b""
        # Not collected: Django's 404, as for any unknown path.
        assert httpx.get(f"{base}/static/nowhere.css", timeout=30).status_code == 404


def test_serve_static_off_leaves_static_files_to_the_server_in_front(django_db_blocker, live, collected):
    env = {"MCP_TEST_STATIC_ROOT": str(collected)}
    off = {"SERVE_STATIC": False}
    with running(django_db_blocker, server="uvicorn", env=env, mcp_settings=off) as server:
        base = f"http://127.0.0.1:{server.port}"
        assert httpx.get(f"{base}/static/admin/css/base.css", timeout=30).status_code == 404
        assert httpx.get(f"{base}/admin/login/", timeout=30).status_code == 200


# runserver ---------------------------------------------------------------------------------------
def test_runserver_with_daphne_installed_serves_the_endpoint_and_the_admins_styles(django_db_blocker, live):
    assert get_commands()["runserver"] == "daphne"  # the demo lists daphne first
    with running(django_db_blocker, server="runserver") as server:
        result = initialize(server.url)
        assert result["serverInfo"]["name"] == "django-mcp-demo"
        assert_admin_is_styled(f"http://127.0.0.1:{server.port}")
    assert "mcp_server.W07" not in server.log


# ENDPOINT_PATH -----------------------------------------------------------------------------------
@pytest.mark.parametrize("server_kind", ["daphne", "uvicorn", "granian"])
def test_the_endpoint_is_served_at_endpoint_path_with_its_protections(django_db_blocker, live, server_kind):
    settings = {"ENDPOINT_PATH": "/tools/mcp"}
    with running(django_db_blocker, server=server_kind, mcp_settings=settings) as server:
        base = f"http://127.0.0.1:{server.port}"
        assert initialize(f"{base}/tools/mcp")["serverInfo"]["name"] == "django-mcp-demo"
        # /mcp is nothing special any more: Django's 404.
        assert httpx.post(f"{base}/mcp", json={}, timeout=30).status_code == 404
        metadata = httpx.get(f"{base}/.well-known/oauth-protected-resource/tools/mcp", timeout=30).json()
        assert metadata["resource"] == f"{base}/tools/mcp"
        head, body = split_reply(oversized_reply(server.port, "/tools/mcp"))
        assert head.startswith(b"HTTP/1.1 413"), head
        answer = json.loads(body)
        check_server_message(answer, "2025-11-25")
        assert answer["error"]["message"] == f"Payload Too Large: the body exceeds {4 * MIB} bytes"
    if server_kind == "uvicorn":  # the application answers ASGI lifespan
        assert "Application startup complete" in server.log and "unsupported" not in server.log


# Composed into a project's own router ------------------------------------------------------------
async def asgi_request(app, path: str, chunks: list[bytes], headers: dict[str, str]) -> list[dict]:
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST",
             "scheme": "http", "path": path, "raw_path": path.encode(), "query_string": b"",
             "root_path": "", "headers": [(k.encode(), v.encode()) for k, v in headers.items()],
             "client": ("127.0.0.1", 50000), "server": ("127.0.0.1", 80)}
    pending = [{"type": "http.request", "body": chunk, "more_body": i < len(chunks) - 1}
               for i, chunk in enumerate(chunks)]
    sent: list[dict] = []

    async def receive() -> dict:
        if pending:
            return pending.pop(0)
        await asyncio.Event().wait()  # connected, sending nothing more
        return {"type": "http.disconnect"}

    async def send(message: dict) -> None:
        sent.append(message)

    await asyncio.wait_for(app(scope, receive, send), 30)
    return sent


async def hello(scope: dict, receive, send) -> None:
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"hello"})


async def test_the_routes_compose_into_a_projects_own_router():
    from channels.routing import ProtocolTypeRouter, URLRouter
    from django.urls import path

    application = ProtocolTypeRouter({"http": URLRouter([*mcp_urlpatterns("/x/mcp"), path("hello", hello)])})
    assert (await asgi_request(application, "/hello", [b""], {}))[1]["body"] == b"hello"
    # The endpoint, body limit included: a declared length past it is refused before anything runs.
    sent = await asgi_request(application, "/x/mcp", [b""], {"content-length": str(5 * MIB)})
    assert sent[0]["status"] == 413 and dict(sent[0]["headers"])[b"connection"] == b"close"
    answer = json.loads(sent[1]["body"])
    check_server_message(answer, "2025-11-25")


async def test_a_body_passing_the_limit_is_refused_as_it_arrives_and_the_application_sees_the_client_go():
    seen: list[dict] = []

    async def reader(scope: dict, receive, send) -> None:
        while True:
            message = await receive()
            seen.append(message)
            if message["type"] == "http.disconnect" or not message.get("more_body"):
                break
        await send({"type": "http.response.start", "status": 200, "headers": []})  # dropped
        await send({"type": "http.response.body", "body": b"too late"})

    sent = await asgi_request(BodyLimit(reader, max_bytes=1000), "/mcp", [b"x" * 600] * 4, {})
    assert [message["type"] for message in seen] == ["http.request", "http.disconnect"]
    assert sent[0]["status"] == 413 and (b"content-type", b"application/json") in sent[0]["headers"]
    answer = json.loads(sent[1]["body"])
    check_server_message(answer, "2025-11-25")
    assert answer["error"]["message"] == "Payload Too Large: the body exceeds 1000 bytes"
    assert b"too late" not in b"".join(message.get("body", b"") for message in sent)
    # A body at the limit goes through whole.
    seen.clear()
    sent = await asgi_request(BodyLimit(reader, max_bytes=1000), "/mcp", [b"x" * 500] * 2, {})
    assert sent[0]["status"] == 200 and [len(m["body"]) for m in seen] == [500, 500]


# System checks -----------------------------------------------------------------------------------
def check_ids() -> list[str]:
    return [message.id for message in checks.run_checks() if message.id.startswith("mcp_server.")]


@pytest.mark.parametrize("value", ["mcp", "/", "", "/mcp?x=1", "/m cp", 7, None,
                                   "/.well-known/oauth-protected-resource/mcp"])
def test_a_bad_endpoint_path_fails_the_checks(settings, value):
    settings.MCP_SERVER = {**settings.MCP_SERVER, "ENDPOINT_PATH": value}
    errors = [m for m in checks.run_checks() if m.id == "mcp_server.E070"]
    assert len(errors) == 1 and "ENDPOINT_PATH" in errors[0].msg


def test_serve_static_must_be_a_boolean_or_none(settings):
    settings.MCP_SERVER = {**settings.MCP_SERVER, "SERVE_STATIC": "yes"}
    assert "mcp_server.E071" in check_ids()
    settings.MCP_SERVER = {**settings.MCP_SERVER, "SERVE_STATIC": False}
    assert "mcp_server.E071" not in check_ids()


@pytest.fixture
def fresh_commands():
    get_commands.cache_clear()
    yield
    get_commands.cache_clear()


def test_daphne_listed_after_staticfiles_is_flagged(settings, fresh_commands):
    apps = [app for app in settings.INSTALLED_APPS if app != "daphne"]
    with override_settings(INSTALLED_APPS=[*apps, "daphne"]):
        get_commands.cache_clear()
        assert get_commands()["runserver"] == "django.contrib.staticfiles"
        assert "mcp_server.W070" in check_ids()
    get_commands.cache_clear()
    assert "mcp_server.W070" not in check_ids()


def test_runserver_without_daphne_says_how_to_serve_the_endpoint(settings, fresh_commands, monkeypatch):
    apps = [app for app in settings.INSTALLED_APPS if app != "daphne"]
    with override_settings(INSTALLED_APPS=apps):
        get_commands.cache_clear()
        monkeypatch.setattr(sys, "argv", ["manage.py", "migrate"])
        assert "mcp_server.W071" not in check_ids()  # a project served by uvicorn needs no daphne
        monkeypatch.setattr(sys, "argv", ["manage.py", "runserver"])
        warning = next(m for m in checks.run_checks() if m.id == "mcp_server.W071")
        assert "/mcp answers 404" in warning.msg and '"daphne" first in INSTALLED_APPS' in warning.hint
