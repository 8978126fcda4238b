"""``python -m mcp_client URL --oauth`` against the demo running protected (tests/oauth_flow_support.py).

The person at the terminal is the ``ConsentAgent``: given the authorization URL (opened through
``webbrowser``, or read from the terminal with ``--no-browser``) they log in, approve, and their
browser follows the redirect back to the command's loopback listener. The tokens land in a file
of mode 0600 under ``$XDG_CONFIG_HOME``, and the next command uses them without asking anyone.
"""

from __future__ import annotations

import io
import json
import re
import stat
import threading
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

from mcp_client import cli, cli_oauth
from mcp_client.cli import main

from .client_support import CheckedHTTPTransport, every_message_checked
from .oauth_flow_support import ConsentAgent, access_row, create_user, protected_demo
from .waiting import PATIENCE, wait_until

pytestmark = [pytest.mark.django_db(transaction=True)]

AUTHORIZATION_URL = re.compile(r"^  (http://\S+/oauth/authorize/\S+)$", re.MULTILINE)


@pytest.fixture(scope="module")
def demo(django_db_setup, django_db_blocker):
    with protected_demo(django_db_blocker) as running:
        yield running


@pytest.fixture(autouse=True)
def _checked(monkeypatch, tmp_path):
    """Every message checked against the schema; the configuration directory is the test's."""
    monkeypatch.setattr(cli, "HTTPTransport", CheckedHTTPTransport)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    yield from every_message_checked()


@pytest.fixture
def person(demo, transactional_db):
    create_user()
    agent = ConsentAgent(demo.base, redirect_prefix="http://127.0.0.1:")
    yield agent
    agent.close()


def browse(person: ConsentAgent, url: str) -> None:
    """The person's browser: consent, then the redirect back to the command's listener."""
    location = person.approve(url)
    with httpx.Client(timeout=PATIENCE) as http:
        page = http.get(location)
    assert page.status_code == 200 and "Authorized" in page.text


class Terminal(io.StringIO):
    """stderr of the command; the person reads the authorization URL there and acts on it."""

    def __init__(self, person: ConsentAgent):
        super().__init__()
        self.person = person
        self.threads: list[threading.Thread] = []

    def write(self, text: str) -> int:
        found = AUTHORIZATION_URL.search(text)
        if found:
            thread = threading.Thread(target=browse, args=(self.person, found.group(1)), daemon=True)
            thread.start()
            self.threads.append(thread)
        return super().write(text)


def run(*argv: str, err: io.StringIO | None = None) -> tuple[int, str, str]:
    out, err = io.StringIO(), err if err is not None else io.StringIO()
    code = main(list(argv), out, err)
    return code, out.getvalue(), err.getvalue()


def token_file(tmp_path, demo) -> dict:
    directory = tmp_path / "config" / "django-mcp-sdk" / "oauth"
    [path] = directory.glob("*.json")
    assert path.name.startswith(f"127.0.0.1_{demo.server.port}_mcp-")
    for written in directory.iterdir():  # the file and its lock
        assert stat.S_IMODE(written.stat().st_mode) == 0o600, written
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    return json.loads(path.read_text())


@pytest.mark.feature("OAUTH-14", "OAUTH-17", "CHTTP-01")
def test_oauth_opens_the_browser_keeps_the_tokens_in_a_0600_file_and_the_next_run_reuses_them(
        demo, person, monkeypatch, tmp_path):
    opened: list[str] = []

    def open_browser(url: str) -> bool:
        opened.append(url)
        threading.Thread(target=browse, args=(person, url), daemon=True).start()
        return True

    monkeypatch.setattr(cli_oauth.webbrowser, "open", open_browser)
    mark = demo.log_mark()
    code, out, err = run(demo.url, "--oauth", "call", "add", "a=2", "b=3")
    assert code == 0, err
    assert json.loads(out.split("\n", 1)[1]) == {"sum": 5}
    [url] = opened
    assert f"Open this URL in a browser to authorize:\n  {url}\n" in err
    query = {k: v[0] for k, v in parse_qs(urlsplit(url).query).items()}
    redirect_uri = query["redirect_uri"]
    assert re.fullmatch(r"http://127\.0\.0\.1:\d+/callback", redirect_uri)
    assert query["code_challenge_method"] == "S256" and query["resource"] == demo.url
    assert f"Waiting for the redirect back to {redirect_uri}" in err

    stored = token_file(tmp_path, demo)
    tokens, client = stored["tokens"], stored["client_information"]
    row = access_row(tokens["access_token"])
    assert row is not None and row.user.username == person.username and row.scope == "mcp"
    assert row.application.client_id == client["client_id"] == query["client_id"]
    assert row.application.redirect_uris.split() == [redirect_uri] == client["redirect_uris"]
    assert client["issuer"] == demo.base and tokens["refresh_token"]
    demo.wait_for_requests(mark, ("POST", "/oauth/register/", 201), ("POST", "/oauth/token/", 200))

    # The next command: the stored token, no browser, no request to the authorization server.
    monkeypatch.setattr(cli_oauth.webbrowser, "open", lambda url: pytest.fail(f"opened {url}"))
    mark = demo.log_mark()
    code, out, err = run(demo.url, "--oauth", "tools")
    assert code == 0, err
    assert "add" in out and "Open this URL" not in err
    seen = demo.wait_for_requests(mark, ("POST", "/mcp", 200))
    assert not [entry for entry in seen if entry[1].startswith(("/oauth/", "/.well-known/"))], seen
    assert {status for method, path, status in seen if path == "/mcp"} <= {200, 202}
    assert token_file(tmp_path, demo) == stored


@pytest.mark.feature("OAUTH-14")
def test_no_browser_prints_the_url_for_the_person_to_open(demo, person, monkeypatch, tmp_path):
    monkeypatch.setattr(cli_oauth.webbrowser, "open", lambda url: pytest.fail(f"opened {url}"))
    terminal = Terminal(person)
    code, out, err = run(demo.url, "--oauth", "--no-browser", "call", "echo", "message=hi", err=terminal)
    assert code == 0, err
    assert out.splitlines()[0] == "hi"
    assert len(terminal.threads) == 1 and len(person.opened) == 1
    assert token_file(tmp_path, demo)["tokens"]["access_token"]
    wait_until(lambda: not terminal.threads[0].is_alive(), what="the browser to finish")


def test_oauth_needs_a_url_and_no_browser_needs_oauth():
    code, _, err = run("python manage.py mcp_stdio", "--oauth")
    assert code == 2 and "error: --oauth needs the server's http(s) URL" in err
    code, _, err = run("http://127.0.0.1:1/mcp", "--no-browser")
    assert code == 2 and "error: --no-browser goes with --oauth" in err


def test_a_refusal_at_the_redirect_is_a_clear_error(monkeypatch):
    """An authorization server that sends the browser back with error=access_denied."""
    listener = cli_oauth.RedirectListener()
    try:
        with httpx.Client(timeout=PATIENCE) as http:
            page = http.get(f"{listener.redirect_uri}?error=access_denied&state=s")
        assert page.status_code == 200 and "Not authorized: access_denied" in page.text
        assert listener.wait(PATIENCE) == {"error": "access_denied", "state": "s"}
        with httpx.Client(timeout=PATIENCE) as http:
            assert http.get(f"{listener.redirect_uri}?code=late").status_code == 404  # the first counts
    finally:
        listener.close()


@pytest.mark.feature("OAUTH-34")
def test_the_dpop_key_is_kept_beside_the_tokens_for_the_next_command(tmp_path):
    url = "http://127.0.0.1:9/mcp"
    first, listener = cli_oauth.person_provider(url, open_browser=False, err=io.StringIO())
    listener.close()
    second, listener = cli_oauth.person_provider(url, open_browser=False, err=io.StringIO())
    listener.close()
    assert first.dpop_key.thumbprint == second.dpop_key.thumbprint
    [key_file] = (tmp_path / "config" / "django-mcp-sdk" / "oauth").glob("*.dpop-key.pem")
    assert key_file.name == cli_oauth.token_path(url).stem + ".dpop-key.pem"
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    other, listener = cli_oauth.person_provider("http://127.0.0.1:9/other", open_browser=False,
                                                err=io.StringIO())
    listener.close()
    assert other.dpop_key.thumbprint != first.dpop_key.thumbprint
