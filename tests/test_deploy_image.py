"""deploy/Dockerfile builds: every ``COPY`` source is in the image's build context (the files git
tracks, less what .dockerignore leaves out), and where a Docker engine answers, the image builds.
The static files: the image collects them, docker-compose.yml hands them to nginx, and nginx with
deploy/nginx.conf serves them itself and passes everything else on."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import warnings
from pathlib import Path

import httpx

from .harness import REPO
from .http_harness import free_port
from .http_support import Client, running
from .services import reachable, require
from .waiting import wait_until

DOCKERFILE = Path(REPO) / "deploy" / "Dockerfile"


def copy_sources(dockerfile: Path) -> list[str]:
    """The sources of every ``COPY`` of the build context (not ``--from`` another stage)."""
    sources = []
    for line in dockerfile.read_text().replace("\\\n", " ").splitlines():
        words = shlex.split(line, comments=True)
        if not words or words[0].upper() != "COPY":
            continue
        arguments = [word for word in words[1:] if not word.startswith("--")]
        if any(word.startswith("--from") for word in words[1:]):
            continue
        sources += arguments[:-1]  # the last one is the destination
    return sources


def _pattern(pattern: str) -> re.Pattern[str]:
    """A .dockerignore pattern as a regular expression over paths from the context's root:
    ``*`` and ``?`` stay within one folder, ``**`` spans any number of them."""
    parts, i = [], 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            parts.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            parts.append(".*")
            i += 2
        else:
            parts.append({"*": "[^/]*", "?": "[^/]"}.get(pattern[i], re.escape(pattern[i])))
            i += 1
    return re.compile("".join(parts))


def ignored(path: str, patterns: list[str]) -> bool:
    """Whether .dockerignore leaves ``path`` out (``!`` makes exceptions, the last match wins).
    A pattern that matches a folder leaves out everything under it."""
    parts = path.split("/")
    prefixes = ["/".join(parts[:n]) for n in range(1, len(parts) + 1)]
    left_out = False
    for pattern in patterns:
        exception = pattern.startswith("!")
        regex = _pattern(pattern.removeprefix("!").strip("/"))
        if any(regex.fullmatch(prefix) for prefix in prefixes):
            left_out = not exception
    return left_out


def build_context() -> set[str]:
    """The files ``docker build .`` sends from a fresh clone of the repository."""
    tracked = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True)
    files = [name for name in tracked.stdout.decode().split("\0") if name]
    ignore = Path(REPO) / ".dockerignore"
    patterns = [line.strip() for line in ignore.read_text().splitlines()
                if line.strip() and not line.startswith("#")] if ignore.exists() else []
    return {name for name in files if not ignored(name, patterns)}


def docker_answers() -> bool:
    if shutil.which("docker") is None:
        return False
    try:
        return subprocess.run(["docker", "version"], capture_output=True, timeout=30).returncode == 0
    except subprocess.TimeoutExpired:
        return False


def test_the_ignore_rules_are_read_as_docker_reads_them():
    patterns = [".git", "**/__pycache__", "*.sqlite3", "conformance/results", "docs", "!docs/keep.md"]
    assert ignored("mcp_server/__pycache__/x.pyc", patterns)
    assert ignored("__pycache__/x.pyc", patterns)
    assert ignored("db.sqlite3", patterns) and not ignored("project/db.sqlite3", patterns)
    assert ignored("conformance/results/a.json", patterns) and not ignored("conformance/run", patterns)
    assert ignored("docs/a.md", patterns) and not ignored("docs/keep.md", patterns)
    assert not ignored("templates/admin/base_site.html", patterns)


def test_every_copy_source_of_the_dockerfile_is_in_the_build_context():
    sources = copy_sources(DOCKERFILE)
    assert {"pyproject.toml", "README.md", "mcp_server", "project", "templates"} <= set(sources)
    context = build_context()
    missing = [source for source in sources
               if source not in context and not any(name.startswith(source.rstrip("/") + "/")
                                                    for name in context)]
    assert missing == [], f"deploy/Dockerfile copies what the build context lacks: {missing}"
    if not docker_answers():
        warnings.warn("no Docker engine answers `docker version` here: checked the COPY sources of "
                      "deploy/Dockerfile against the build context only, without building the image",
                      stacklevel=1)
        return
    built = subprocess.run(["docker", "build", "-f", str(DOCKERFILE), "-t", "django-mcp-sdk:test", REPO],
                           capture_output=True, text=True, timeout=1800)
    assert built.returncode == 0, built.stdout[-4000:] + built.stderr[-4000:]


def compose_service(name: str) -> str:
    """The text of one service of docker-compose.yml (up to the next one at its indent)."""
    text = (Path(REPO) / "docker-compose.yml").read_text()
    found = re.search(rf"^  {name}:\n((?:    .*\n|\s*\n)*)", text, re.MULTILINE)
    assert found, f"docker-compose.yml has no service {name}"
    return found.group(1)


def volume_path(service: str, volume: str) -> str:
    found = re.search(rf"^\s+- {volume}:([^:\s]+)", compose_service(service), re.MULTILINE)
    assert found, f"the {service} service mounts no {volume} volume"
    return found.group(1)


def test_nginx_serves_the_static_files_the_image_collected():
    from django.conf import settings

    # The image gathers them where the settings say: STATIC_ROOT, under the image's /app.
    dockerfile = DOCKERFILE.read_text()
    assert re.search(r"^RUN .*python manage\.py collectstatic --noinput", dockerfile, re.MULTILINE)
    assert re.search(r"^WORKDIR /app$", dockerfile, re.MULTILINE)
    static_root = "/app/" + Path(settings.STATIC_ROOT).relative_to(REPO).as_posix()
    # Each start copies them to the shared volume, before nginx starts.
    collect = compose_service("collectstatic")
    assert "command: python manage.py collectstatic --noinput --clear" in collect
    assert volume_path("collectstatic", "static") == static_root
    nginx = compose_service("nginx")
    assert re.search(r"collectstatic:\n\s+condition: service_completed_successfully", nginx)
    served_from = volume_path("nginx", "static")
    assert re.search(rf"- static:{served_from}:ro", nginx)
    # nginx answers STATIC_URL from that volume itself.
    conf = (Path(REPO) / "deploy" / "nginx.conf").read_text()
    prefix = "/" + settings.STATIC_URL.strip("/") + "/"
    location = re.search(rf"location {re.escape(prefix)} \{{([^}}]*)\}}", conf)
    assert location, f"nginx.conf has no location {prefix}"
    assert re.search(rf"^\s*alias {re.escape(served_from)}/;", location.group(1), re.MULTILINE)
    assert "proxy_pass" not in location.group(1)


def test_nginx_with_the_deploy_config_serves_static_files_and_passes_the_endpoint_on(
        tmp_path, django_db_blocker, transactional_db):
    """deploy/nginx.conf as it is, but for its addresses: the upstream a daphne process of the
    test's own, the static volume a folder of it, listening on a free loopback port."""
    nginx = shutil.which("nginx") or shutil.which("nginx", path="/usr/sbin")
    require(nginx is not None, "nginx is not installed (apt-get install nginx-light)")
    static = tmp_path / "static"
    (static / "admin" / "css").mkdir(parents=True)
    (static / "admin" / "css" / "base.css").write_text("body { color: black }\n")
    (tmp_path / "logs").mkdir()
    port = free_port()
    with running(django_db_blocker) as web:
        conf = (Path(REPO) / "deploy" / "nginx.conf").read_text()
        conf = re.sub(r"server web1:8000;\s*server web2:8000;", f"server 127.0.0.1:{web.port};", conf)
        conf = conf.replace("listen 80;", f"listen 127.0.0.1:{port};")
        conf = conf.replace("alias /srv/static/;", f"alias {static}/;")
        conf = conf.replace("worker_processes auto;", "worker_processes 1;\nuser root;\n"
                            f"pid {tmp_path}/nginx.pid;\nerror_log {tmp_path}/error.log;")
        assert f"alias {static}/;" in conf and f"127.0.0.1:{web.port}" in conf and "user root;" in conf
        (tmp_path / "nginx.conf").write_text(conf)
        process = subprocess.Popen([nginx, "-p", str(tmp_path), "-c", str(tmp_path / "nginx.conf"),
                                    "-g", "daemon off;"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        base = f"http://127.0.0.1:{port}"
        try:
            wait_until(lambda: process.poll() is not None or reachable("127.0.0.1", port))
            assert process.poll() is None, process.stdout.read().decode()
            css = httpx.get(f"{base}/static/admin/css/base.css", timeout=30)
            # The volume's file, not the web process's (which would answer admin's own base.css).
            assert css.status_code == 200 and css.text == "body { color: black }\n"
            assert css.headers["server"].startswith("nginx")
            assert "max-age=86400" in css.headers["cache-control"]
            assert httpx.get(f"{base}/static/missing.css", timeout=30).status_code == 404
            # Everything else goes to the web processes: the endpoint and the admin.
            client = Client(f"{base}/mcp")
            assert client.initialize()["serverInfo"]["name"] == "django-mcp-demo"
            client.close()
            assert httpx.get(f"{base}/admin/login/", timeout=30).status_code == 200
        finally:
            process.terminate()
            process.wait(30)
