"""The README's quickstart, verbatim, on the package a user installs.

The sdist and the wheel are built from this checkout and checked with ``twine check``. The wheel
goes into a fresh virtualenv (the package index provides the rest), and a fresh ``django-admin
startproject`` project follows the quickstart's blocks in order (``tests/doc_blocks.py`` reads
them). The only change to what the README says is the port: the servers it names listen on a free
loopback port instead of 8000, and the client commands and files point there.

Then the documented apps are added as the docs pages say, ``manage.py check`` passes, and the
authorization server's login and consent pages render from the templates in the wheel.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import django
import httpx
import pytest

from .doc_blocks import Block, apply_file_block, blocks, section
from .harness import REPO
from .http_harness import HTTPClient, free_port, stop_process
from .services import require
from .waiting import PATIENCE, wait_until

SERVERS = ("daphne", "uvicorn", "runserver")
# Documented apps, each added as its page says (its `# mysite/...: add at the end` blocks).
APP_PAGES = ("authorization_server.md", "rest_api.md", "client.md", "admin.md")
INSTALL_TIMEOUT = 900  # pip installing everything from the package index, on a loaded machine


def run(command: str, cwd: Path, env: dict[str, str],
        timeout: float = PATIENCE) -> subprocess.CompletedProcess:
    result = subprocess.run(command, shell=True, cwd=cwd, env=env, capture_output=True, text=True,
                            timeout=timeout, executable="/bin/bash")
    assert result.returncode == 0, \
        f"`{command}` exited with {result.returncode}:\n{result.stdout}\n{result.stderr}"
    return result


@dataclass
class Quickstart:
    """A virtualenv with the wheel, the project the quickstart made in it, and what is left to run."""

    root: Path
    env: dict[str, str]
    port: int
    project: Path = field(init=False)
    outputs: dict[str, subprocess.CompletedProcess] = field(default_factory=dict)
    servers: dict[str, str] = field(default_factory=dict)
    http_clients: list[str] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def localize(self, text: str) -> str:
        return text.replace("127.0.0.1:8000", f"127.0.0.1:{self.port}")

    def follow(self, steps: list[Block]) -> None:
        """Run the setup commands and write the files; keep the servers and their clients."""
        cwd = self.root
        for block in steps:
            if block.file:
                apply_file_block(block, cwd, {"127.0.0.1:8000": f"127.0.0.1:{self.port}"})
                continue
            if block.language not in ("sh", "bash", "console"):
                continue
            for command in block.commands:
                words = shlex.split(command)
                if words[0] == "cd":
                    cwd = cwd / words[1]
                    self.project = cwd
                elif words[0] in ("daphne", "uvicorn") or "runserver" in words:
                    self.servers[server_name(words)] = command
                elif "127.0.0.1:8000" in command or words[:2] == ["python", "client.py"]:
                    self.http_clients.append(self.localize(command))
                else:
                    timeout = INSTALL_TIMEOUT if words[:2] == ["pip", "install"] else PATIENCE
                    self.outputs[command] = run(command, cwd, self.env, timeout)

    def python(self, code: str) -> str:
        return run(f"python -c {shlex.quote(code)}", self.project, self.env).stdout.strip()


def server_name(words: list[str]) -> str:
    return "runserver" if "runserver" in words else words[0]


def on_port(command: str, port: int) -> str:
    """The server command with its address: the one change made to what the README says."""
    words = shlex.split(command)
    if words[0] == "daphne":
        return f"{command} -b 127.0.0.1 -p {port}"
    if words[0] == "uvicorn":
        return f"{command} --host 127.0.0.1 --port {port}"
    return f"{command} 127.0.0.1:{port} --noreload"


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sdist and the wheel of this checkout, checked by twine."""
    out = tmp_path_factory.mktemp("dist")
    # Built from a copy: the build writes its egg-info and build/ into the source tree, which
    # another run of the suite on this checkout (CI's other leg) may be building at the same time.
    source = tmp_path_factory.mktemp("source") / "checkout"
    shutil.copytree(REPO, source, ignore=shutil.ignore_patterns(
        ".git", ".venv*", "node_modules", "*.egg-info", "build", "dist", "__pycache__", ".cache", "site",
        "*.sqlite3*", "results", "var"))
    built = subprocess.run([sys.executable, "-m", "build", "--outdir", str(out), str(source)],
                           capture_output=True, text=True, timeout=INSTALL_TIMEOUT)
    require(built.returncode == 0 or "No matching distribution" not in built.stdout + built.stderr,
            "the package index (for the build's setuptools) is not reachable")
    assert built.returncode == 0, built.stdout + built.stderr
    files = sorted(out.iterdir())
    assert sorted(f.suffix for f in files) == [".gz", ".whl"], files
    checked = subprocess.run([sys.executable, "-m", "twine", "check", "--strict", *map(str, files)],
                             capture_output=True, text=True, timeout=PATIENCE)
    assert checked.returncode == 0 and checked.stdout.count("PASSED") == 2, checked.stdout + checked.stderr
    return out


def test_the_wheel_has_what_documented_features_need(dist: Path):
    [wheel] = dist.glob("*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for needed in ("mcp_server/authorization_server/templates/oauth/consent.html",
                   "mcp_server/authorization_server/templates/mcp_authorization_server/login.html",
                   "mcp_server/templates/mcp_server/try_it.html",
                   "mcp_server/migrations/0001_initial.py",
                   "mcp_server/authorization_server/migrations/0001_initial.py",
                   "mcp_client/contrib/django/migrations/0001_initial.py",
                   "mcp_server/py.typed", "mcp_client/py.typed", "mcp_protocol/py.typed"):
        assert needed in names, f"{needed} is not in the wheel"
    assert not any(name.startswith(("project/", "tests/", "conformance/")) for name in names)


@pytest.fixture(scope="module")
def quickstart(dist: Path, tmp_path_factory: pytest.TempPathFactory) -> Quickstart:
    root = tmp_path_factory.mktemp("quickstart")
    subprocess.run([sys.executable, "-m", "venv", str(root / "venv")], check=True, timeout=PATIENCE)
    drop = ("DJANGO_SETTINGS_MODULE", "DATABASE_URL", "PYTHONPATH", "VIRTUAL_ENV", "DJANGO_DEVELOPMENT",
            "CELERY_BROKER_URL", "REDIS_URL")
    env = {k: v for k, v in os.environ.items() if k not in drop and not k.startswith("MCP_")}
    env["PATH"] = f"{root / 'venv' / 'bin'}:{env['PATH']}"
    # pip finds the wheel beside whatever it already looks at.
    env["PIP_FIND_LINKS"] = " ".join(filter(None, [str(dist), env.get("PIP_FIND_LINKS", "")]))
    env["PYTHONUNBUFFERED"] = "1"
    started = Quickstart(root, env, free_port())
    started.follow(blocks(section(REPO / "README.md", "quickstart")))
    return started


def test_the_quickstart_installs_the_wheel_on_this_django(quickstart: Quickstart, dist: Path):
    [wheel] = dist.glob("*.whl")
    installed = json.loads(quickstart.python(
        "import json, django, mcp_server, importlib.metadata as m; "
        "record = m.distribution('django-mcp-sdk').read_text('RECORD'); "
        "print(json.dumps([django.__version__, mcp_server.__file__, record]))"))
    assert installed[0].split(".")[:2] == [str(part) for part in django.VERSION[:2]], installed[:2]
    assert "site-packages" in installed[1] and str(REPO) not in installed[1], installed[:2]
    # Every file with its hash, as the built wheel lists them: this is the wheel, not another build.
    with zipfile.ZipFile(wheel) as archive:
        record = next(name for name in archive.namelist() if name.endswith(".dist-info/RECORD"))
        built = {line for line in archive.read(record).decode().splitlines() if ",sha256=" in line}
    assert built and built <= set(installed[2].splitlines()), f"django-mcp-sdk did not come from {wheel.name}"


def test_stdio_lists_and_calls_the_apps_tools(quickstart: Quickstart):
    stdio = {command: result for command, result in quickstart.outputs.items() if "mcp_stdio" in command}
    assert len(stdio) >= 2, f"the quickstart should list and call tools over stdio: {list(stdio)}"
    listed = "".join(result.stdout for command, result in stdio.items() if command.endswith(" list"))
    assert "count_to" in listed and "count_users" in listed, listed
    called = [result for command, result in stdio.items() if " call " in command]
    assert called and all(result.stdout.strip() for result in called), called


@pytest.mark.parametrize("server", SERVERS)
def test_http_serves_mcp_with_progress_and_admin_with_its_styles(quickstart: Quickstart, server: str):
    assert server in quickstart.servers, f"the quickstart does not say how to serve with {server}"
    assert quickstart.http_clients, "the quickstart does not connect a client over HTTP"
    with serving(quickstart, server, "/admin/login/"):
        for command in quickstart.http_clients:
            result = run(command, quickstart.project, quickstart.env)
            if "count_to" in command:
                # The command line draws progress on stderr: "[###...] 5/5".
                assert re.search(r"\] 5/5", result.stderr), result.stderr
            if command.startswith("python client.py"):
                progress = [line for line in result.stdout.splitlines() if "'progress'" in line]
                assert len(progress) == 5, result.stdout
        progress_over_the_wire(f"{quickstart.url}/mcp")
        admin_styles(quickstart.url)


@contextlib.contextmanager
def serving(quickstart: Quickstart, server: str, ready_path: str) -> Iterator[None]:
    """The README's ``server`` command running, until ``ready_path`` answers 200."""
    log = quickstart.root / f"{server}.log"
    with open(log, "wb") as output:
        process = subprocess.Popen(on_port(quickstart.servers[server], quickstart.port), shell=True,
                                   cwd=quickstart.project, env=quickstart.env, stdout=output,
                                   stderr=subprocess.STDOUT, executable="/bin/bash", start_new_session=True)
    try:
        wait_until(lambda: process.poll() is not None or answers(quickstart.url + ready_path),
                   what=f"{server} to answer {ready_path}")
        assert process.poll() is None, log.read_text()
        yield
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        stop_process(process)


def answers(url: str) -> bool:
    try:
        return httpx.get(url, timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def progress_over_the_wire(url: str) -> None:
    """The tool's progress notifications, each checked against the protocol's schema."""
    client = HTTPClient(url)
    try:
        client.initialize()
        exchange = client.request("tools/call", {"name": "count_to", "arguments": {"n": 3},
                                                 "_meta": {"progressToken": "quickstart"}})
        progress = [event.message["params"]["progress"] for event in exchange.events
                    if event.message and event.message.get("method") == "notifications/progress"]
        assert progress == [1, 2, 3], exchange.events
        assert exchange.response and not exchange.response["result"].get("isError"), exchange.response
    finally:
        client.close()


def admin_styles(url: str) -> None:
    """The admin's login page and every stylesheet and script it links, from the same application."""
    page = httpx.get(f"{url}/admin/login/", timeout=PATIENCE)
    assert page.status_code == 200, page.text[:500]
    assets = re.findall(r'<(?:link[^>]+href|script[^>]+src)="([^"]+\.(?:css|js))"', page.text)
    assert any(asset.endswith(".css") for asset in assets), page.text[:2000]
    for asset in assets:
        response = httpx.get(httpx.URL(url).join(asset), timeout=PATIENCE)
        assert response.status_code == 200, f"{asset}: {response.status_code}"


@pytest.fixture(scope="module")
def documented_apps(quickstart: Quickstart) -> subprocess.CompletedProcess:
    """The project with each documented app added as its page says, migrated and checked; the
    HTTP tests above ran on the quickstart's project alone."""
    # The client's token storage reads its encryption key from the environment, as its page says.
    from cryptography.fernet import Fernet

    quickstart.env["MCP_CLIENT_OAUTH_KEY"] = Fernet.generate_key().decode()
    for page in APP_PAGES:
        for block in blocks((REPO / "docs" / page).read_text()):
            if block.file and block.file[1]:
                apply_file_block(block, quickstart.project, {})
    run("python manage.py migrate --noinput", quickstart.project, quickstart.env)
    return subprocess.run("python manage.py check --fail-level WARNING", shell=True, cwd=quickstart.project,
                          env=quickstart.env, capture_output=True, text=True, timeout=PATIENCE)


def test_each_documented_app_added_as_its_page_says_passes_the_checks(documented_apps):
    output = documented_apps.stdout + documented_apps.stderr
    assert documented_apps.returncode == 0 and "System check identified no issues" in output, output


def test_the_consent_page_renders_from_the_packaged_template(quickstart: Quickstart, documented_apps):
    """Log in on the authorization server's own login page, then see the consent page."""
    env = {**quickstart.env, "DJANGO_SUPERUSER_USERNAME": "ada", "DJANGO_SUPERUSER_PASSWORD": "quickstart-pw",
           "DJANGO_SUPERUSER_EMAIL": "ada@example.com"}
    run("python manage.py createsuperuser --noinput", quickstart.project, env)
    with serving(quickstart, "daphne", "/oauth/login/"):
        consent_page(quickstart.url)


def consent_page(url: str) -> None:
    redirect_uri = "http://127.0.0.1:9/callback"
    with httpx.Client(base_url=url, timeout=PATIENCE) as http:
        registered = http.post("/oauth/register/", json={
            "client_name": "Quickstart client", "redirect_uris": [redirect_uri],
            "token_endpoint_auth_method": "none", "grant_types": ["authorization_code"],
            "response_types": ["code"]})
        assert registered.status_code == 201, registered.text
        client_id = registered.json()["client_id"]
        authorize = "/oauth/authorize/?" + str(httpx.QueryParams({
            "response_type": "code", "client_id": client_id, "redirect_uri": redirect_uri,
            "code_challenge": "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM", "code_challenge_method": "S256",
            "state": "quickstart"}))
        to_login = http.get(authorize)
        assert to_login.status_code == 302 and "/oauth/login/" in to_login.headers["location"], to_login
        login = http.get(to_login.headers["location"])
        assert login.status_code == 200 and 'id="login-form"' in login.text, login.text[:1000]
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', login.text)[1]
        logged_in = http.post(to_login.headers["location"], data={
            "csrfmiddlewaretoken": token, "username": "ada", "password": "quickstart-pw", "next": authorize},
            headers={"referer": f"{url}/oauth/login/"})
        assert logged_in.status_code == 302, logged_in.text[:1000]
        consent = http.get(logged_in.headers["location"])
        assert consent.status_code == 200, consent.text[:1000]
        assert 'id="consent"' in consent.text and "Quickstart client" in consent.text, consent.text[:2000]
