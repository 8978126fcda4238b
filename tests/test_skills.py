"""The Skills extension (SEP-2640): skills found in apps' ``skills/`` folders and defined in admin,
served as the extension says (``skills/list``, ``skills/get``, the manifest with its digests,
``resources/read`` and ``resources/directory/read``) in both eras, and our client's side.

Every message goes through the schema checks of tests/wire.py (with schemas/skills-extension.json).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from django.core.management import call_command

from mcp_client import AsyncClient, Client, ClientError, ValidationError
from mcp_client.skills import SkillFileEntry, verified
from mcp_server import Server
from mcp_server.extensions.skills import Skills
from mcp_server.extensions.skills.catalog import SkillRegistry, folder_skills, stored_skill
from mcp_server.extensions.skills.loading import SkillError, check_path, parse_frontmatter, read_folder
from mcp_server.http import StreamableHTTPTransport
from mcp_server.models import StoredSkill
from mcp_server.registry.overlay import RegistryOverlay

from .client_support import InProcessTransport, every_message_checked
from .harness import REPO, InProcessClient
from .modern_support import MODERN, Reply, modern_request, post
from .wire import check_client_message

DEMO_SKILL = REPO / "project" / "demo" / "skills" / "note-keeping"
SKILL_URI = "skill://note-keeping/SKILL.md"
TITLES_URI = "skill://note-keeping/references/TITLES.md"
CAPABILITIES = {"resources": {"listChanged": True}, "extensions": Skills.capability()}
LIMITS = {"max_files": 512, "max_bytes": 16 * 1024 * 1024}


@pytest.fixture(autouse=True)
def _every_client_message_checked():
    yield from every_message_checked()


def skills_server(capabilities: dict | None = None) -> Server:
    """A server declaring the extension, with the skills of the apps' folders (the demo's)."""
    server = Server("skills", capabilities=capabilities or CAPABILITIES)
    SkillRegistry().server_built(server)
    return server


def sha256(path: Path) -> str:
    return "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()


def write_skill(folder: Path, name: str, frontmatter: str | None = None, files: dict | None = None) -> Path:
    skill = folder / name
    skill.mkdir(parents=True)
    head = frontmatter if frontmatter is not None else f"name: {name}\ndescription: Does {name}."
    (skill / "SKILL.md").write_text(f"---\n{head}\n---\n\nBody.\n")
    for path, text in (files or {}).items():
        target = skill / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    return skill


# --- Reading a skill ----------------------------------------------------------------------------

@pytest.mark.feature("SKILL-03")
def test_a_folder_skill_has_its_frontmatter_and_a_manifest_of_every_file(tmp_path):
    folder = write_skill(tmp_path, "pdf-forms", "name: pdf-forms\ndescription: Fill forms.\n"
                         "metadata:\n  owner: docs", {"references/FORMS.md": "# Forms\n"})
    skill = read_folder(folder, **LIMITS)
    assert skill.frontmatter == {"name": "pdf-forms", "description": "Fill forms.",
                                 "metadata": {"owner": "docs"}}
    entry = skill.entry()
    assert entry["uri"] == "skill://pdf-forms/SKILL.md"
    assert [(r["uri"], r["size"]) for r in entry["resources"]] == [
        ("skill://pdf-forms/SKILL.md", (tmp_path / "pdf-forms/SKILL.md").stat().st_size),
        ("skill://pdf-forms/references/FORMS.md", 8)]
    assert entry["resources"][1]["digest"] == sha256(tmp_path / "pdf-forms/references/FORMS.md")
    assert skill.directories == {"references"}


@pytest.mark.parametrize(("frontmatter", "message"), [
    ("name: other\ndescription: x", "must be the skill's folder name"),
    ("name: Bad--Name\ndescription: x", "lowercase letters"),
    ("name: ok\ndescription: ''", "description must be a non-empty string"),
    ("name: ok\ndescription: x\ncreated: 2026-01-01", "JSON values only"),
    ("name: [unclosed", "not valid YAML"),
])
@pytest.mark.feature("SKILL-03")
def test_a_skill_that_breaks_the_rules_is_refused_with_the_reason(tmp_path, frontmatter, message):
    with pytest.raises(SkillError, match=message):
        read_folder(write_skill(tmp_path, "ok", frontmatter), **LIMITS)


@pytest.mark.feature("SKILL-03")
def test_a_skill_over_the_limits_is_refused_not_cut(tmp_path):
    folder = write_skill(tmp_path, "big", files={"a": "x" * 100, "b": "y"})
    with pytest.raises(SkillError, match="SKILLS_MAX_FILES"):
        read_folder(folder, max_files=2, max_bytes=10_000)
    with pytest.raises(SkillError, match="SKILLS_MAX_BYTES"):
        read_folder(folder, max_files=10, max_bytes=100)


@pytest.mark.feature("SKILL-05")
def test_links_and_hidden_files_are_not_part_of_a_skill(tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("password")
    folder = write_skill(tmp_path / "skills", "linked")
    (folder / "leak.txt").symlink_to(secret)
    (folder / "outside").symlink_to(tmp_path, target_is_directory=True)
    (folder / ".env").write_text("KEY=1")
    assert list(read_folder(folder, **LIMITS).files) == ["SKILL.md"]


@pytest.mark.parametrize("path", ["../x.md", "a/../../x.md", "/etc/passwd", "a//b", ".", "a\\..\\b", ""])
@pytest.mark.feature("SKILL-05")
def test_a_supporting_file_path_that_could_leave_the_skill_is_refused(path):
    with pytest.raises(SkillError):
        check_path(path)


def test_frontmatter_must_open_the_file():
    with pytest.raises(SkillError, match="must begin with"):
        parse_frontmatter("# Title\n---\nname: x\n---\n")


# --- Serving: the handshake era ---------------------------------------------------------------

@pytest.mark.feature("SKILL-01", "SKILL-02", "SKILL-04")
def test_the_demo_skill_is_listed_with_digests_that_match_its_files():
    assert [s.name for s in folder_skills()] == ["note-keeping"]
    client = InProcessClient(skills_server())
    result = client.initialize()
    assert result["capabilities"]["extensions"] == {"io.modelcontextprotocol/skills": {"directoryRead": True}}
    listed = client.result("skills/list", {})
    assert "nextCursor" not in listed and "ttlMs" not in listed  # hints are opt-in before 2026-07-28
    [entry] = listed["skills"]
    assert entry["uri"] == SKILL_URI and entry["frontmatter"]["name"] == "note-keeping"
    assert entry["frontmatter"]["license"] == "MIT"
    assert {r["uri"]: r["digest"] for r in entry["resources"]} == {
        SKILL_URI: sha256(DEMO_SKILL / "SKILL.md"),
        TITLES_URI: sha256(DEMO_SKILL / "references" / "TITLES.md")}
    assert client.result("skills/get", {"uri": SKILL_URI}) == {"skill": entry}
    for uri, path in ((SKILL_URI, "SKILL.md"), (TITLES_URI, "references/TITLES.md")):
        [contents] = client.result("resources/read", {"uri": uri})["contents"]
        assert contents["text"].encode() == (DEMO_SKILL / path).read_bytes()
        assert contents["mimeType"] == "text/markdown"


@pytest.mark.feature("SKILL-05")
def test_only_skill_md_is_listed_among_resources_named_by_its_frontmatter():
    client = InProcessClient(skills_server())
    client.initialize()
    [resource] = client.result("resources/list", {})["resources"]
    assert resource["uri"] == SKILL_URI and resource["name"] == "note-keeping"
    assert resource["description"].startswith("Keep the user's notes tidy")
    assert resource["mimeType"] == "text/markdown"


@pytest.mark.feature("SKILL-05")
def test_the_directory_of_a_skill_lists_files_and_folders():
    client = InProcessClient(skills_server())
    client.initialize()
    root = client.result("resources/directory/read", {"uri": "skill://note-keeping"})["resources"]
    assert [(r["uri"], r["mimeType"]) for r in root] == [
        (SKILL_URI, "text/markdown"), ("skill://note-keeping/references", "inode/directory")]
    inner = client.result("resources/directory/read", {"uri": "skill://note-keeping/references"})
    assert [r["uri"] for r in inner["resources"]] == [TITLES_URI]
    for uri in (SKILL_URI, "skill://note-keeping/nope", "skill://other", "file:///etc"):
        error = client.request("resources/directory/read", {"uri": uri})["error"]
        assert error["code"] == -32602, error


@pytest.mark.feature("SKILL-04", "SKILL-05")
def test_unknown_skills_and_paths_out_of_a_skill_are_not_served():
    client = InProcessClient(skills_server())
    client.initialize()
    error = client.request("skills/get", {"uri": "skill://nothing-here/SKILL.md"})["error"]
    assert error["code"] == -32602
    not_found = client.request("resources/read", {"uri": "skill://nothing-here/SKILL.md"})["error"]
    assert not_found["message"].startswith("Resource not found")
    for uri in ("skill://note-keeping/../../settings.py", "skill://note-keeping/references/../SKILL.md",
                "skill://note-keeping/%2e%2e/SKILL.md"):
        assert client.request("resources/read", {"uri": uri})["error"]["code"] == not_found["code"], uri


@pytest.mark.feature("SKILL-01")
def test_a_server_that_does_not_declare_the_extension_does_not_answer_it():
    server = skills_server({"resources": {}})
    client = InProcessClient(server)
    capabilities = client.initialize()["capabilities"]
    assert "extensions" not in capabilities and not server.resources
    for method, params in (("skills/list", {}), ("skills/get", {"uri": SKILL_URI}),
                           ("resources/directory/read", {"uri": "skill://note-keeping"})):
        assert client.request(method, params)["error"]["code"] == -32601


# --- Serving: the 2026-07-28 era ----------------------------------------------------------------

@pytest.mark.django_db(transaction=True)
@pytest.mark.feature("SKILL-01", "SKILL-04")
async def test_a_modern_request_gets_the_skills_with_cache_hints():
    transport = StreamableHTTPTransport(skills_server())
    app = transport.as_asgi()

    async def modern(method: str, **params) -> Reply:
        message = modern_request(method, **params)
        check_client_message(message, MODERN)
        return await post(app, message)  # the reply is checked against the schema

    try:
        discovered = (await modern("server/discover")).result["capabilities"]
        assert discovered["extensions"]["io.modelcontextprotocol/skills"] == {"directoryRead": True}
        listed = (await modern("skills/list")).result
        assert listed["resultType"] == "complete"
        assert listed["cacheScope"] == "private" and listed["ttlMs"] == 0
        got = (await modern("skills/get", uri=SKILL_URI)).result
        assert got["skill"] == listed["skills"][0] and "nextCursor" not in got and "ttlMs" in got
        directory = (await modern("resources/directory/read", uri="skill://note-keeping")).result
        assert len(directory["resources"]) == 2 and "cacheScope" in directory
        assert (await modern("skills/get", uri="skill://x/SKILL.md")).error["code"] == -32602
    finally:
        await transport.close()


@pytest.mark.feature("SKILL-04")
def test_skills_list_pages_whole_entries():
    server = Server("paged", capabilities=CAPABILITIES, page_size=1)
    SkillRegistry().server_built(server)
    client = InProcessClient(server)
    client.initialize()
    first = client.result("skills/list", {})
    assert len(first["skills"]) == 1 and "nextCursor" not in first  # one skill: one page


# --- Skills defined in admin ----------------------------------------------------------------------

@pytest.mark.django_db(transaction=True)  # the registry reads its rows on a worker thread
@pytest.mark.feature("SKILL-06")
def test_an_admin_skill_sits_beside_the_folder_skills_and_keeps_its_restrictions():
    server = skills_server()
    server.overlay = RegistryOverlay(server)
    StoredSkill.objects.create(server=server.name, name="triage", description="Sort incoming bugs.",
                               instructions="Label each bug.", files={"checklists/labels.md": "- bug\n"})
    StoredSkill.objects.create(server=server.name, name="hidden", description="Staff only.",
                               instructions="x", permission="mcp_server.view_session")
    StoredSkill.objects.create(server=server.name, name="note-keeping", description="Shadowed.",
                               instructions="x")  # the folder's skill of that name wins
    client = InProcessClient(server)
    client.initialize()
    entries = {e["frontmatter"]["name"]: e for e in client.result("skills/list", {})["skills"]}
    assert set(entries) == {"note-keeping", "triage"}
    assert entries["note-keeping"]["frontmatter"]["description"].startswith("Keep the user's notes")
    triage = entries["triage"]
    assert triage["frontmatter"] == {"name": "triage", "description": "Sort incoming bugs."}
    [skill_md, labels] = triage["resources"]
    text = client.result("resources/read", {"uri": skill_md["uri"]})["contents"][0]["text"]
    assert text.startswith("---\nname: triage\n") and text.endswith("Label each bug.\n")
    assert "sha256:" + hashlib.sha256(text.encode()).hexdigest() == skill_md["digest"]
    assert labels["uri"] == "skill://triage/checklists/labels.md" and labels["size"] == 6


@pytest.mark.parametrize(("files", "message"), [
    ({"../escape.md": "x"}, "relative path"), ({"SKILL.md": "x"}, "not another SKILL.md"),
    ({"a.md": 3}, "give a text"),
])
@pytest.mark.feature("SKILL-06")
def test_an_admin_skill_with_a_bad_file_is_refused(files, message):
    row = StoredSkill(name="bad", description="d", instructions="i", files=files)
    with pytest.raises(SkillError, match=message):
        stored_skill(row)


@pytest.mark.django_db
@pytest.mark.feature("SKILL-06")
def test_the_admin_form_refuses_a_broken_skill_and_saves_a_good_one(admin_client):
    url = "/admin/mcp_server/storedskill/add/"
    form = {"name": "Not A Name", "description": "d", "instructions": "i", "files": "{}", "enabled": "on"}
    page = admin_client.post(url, form)
    assert "1-64 lowercase letters" in page.content.decode()
    page = admin_client.post(url, {**form, "name": "good", "files": '{"../x.md": "x"}'})
    assert "relative path of plain segments" in page.content.decode()
    page = admin_client.post(url, {**form, "name": "note-keeping"})
    assert "A skill folder already serves" in page.content.decode()
    assert admin_client.post(url, {**form, "name": "good", "files": '{"a.md": "x"}'}).status_code == 302
    assert StoredSkill.objects.get().files == {"a.md": "x"}


@pytest.mark.feature("SKILL-02", "SKILL-03")
def test_the_settings_add_folders_and_set_the_limits(tmp_path, settings):
    write_skill(tmp_path, "extra", files={"notes/a.md": "a"})
    settings.MCP_SERVER = {**settings.MCP_SERVER, "SKILLS_DIRS": [tmp_path]}
    assert [s.name for s in folder_skills()] == ["note-keeping", "extra"]  # apps' folders first
    settings.MCP_SERVER = {**settings.MCP_SERVER, "SKILLS_MAX_FILES": 1}
    errors: list[str] = []
    assert folder_skills(errors) == [] and len(errors) == 2 and "SKILLS_MAX_FILES (1)" in errors[0]
    settings.MCP_SERVER = {**settings.MCP_SERVER, "SKILLS_MAX_FILES": 512, "SKILLS_MAX_BYTES": 10}
    assert folder_skills(errors := []) == [] and "SKILLS_MAX_BYTES (10)" in errors[0]
    for key, value in (("SKILLS_MAX_BYTES", 0), ("SKILLS_MAX_FILES", True), ("SKILLS_DIRS", "skills")):
        settings.MCP_SERVER = {**settings.MCP_SERVER, "SKILLS_MAX_BYTES": 100, key: value}
        with pytest.raises(Exception, match=r"mcp_server\.E062"):
            call_command("check")


@pytest.mark.feature("SKILL-02")
def test_manage_py_check_names_a_folder_skill_it_cannot_serve(tmp_path, settings):
    write_skill(tmp_path, "broken", "name: other\ndescription: x")
    settings.MCP_SERVER = {**settings.MCP_SERVER, "SKILLS_DIRS": [str(tmp_path)]}
    with pytest.raises(Exception, match=r"mcp_server\.E060"):
        call_command("check")


# --- Our client ------------------------------------------------------------------------------------

@pytest.mark.feature("SKILL-07")
async def test_our_client_lists_gets_reads_and_walks_skills():
    client = AsyncClient(InProcessTransport(skills_server()), mode="legacy")
    await client.connect()
    try:
        [skill] = await client.skills()
        assert skill.name == "note-keeping" and skill.uri == SKILL_URI
        assert (await client.get_skill(SKILL_URI)).resources == skill.resources
        files = await client.read_skill(skill)
        assert files == {SKILL_URI: (DEMO_SKILL / "SKILL.md").read_bytes(),
                         TITLES_URI: (DEMO_SKILL / "references" / "TITLES.md").read_bytes()}
        assert await client.read_skill(SKILL_URI) == files
        page = await client.read_directory("skill://note-keeping")
        assert [(r.uri, r.mime_type) for r in page.items] == [
            (SKILL_URI, "text/markdown"), ("skill://note-keeping/references", "inode/directory")]
    finally:
        await client.close()


@pytest.mark.feature("SKILL-07")
def test_our_client_refuses_what_the_server_did_not_declare():
    plain = Server("plain", capabilities={"resources": {},
                                          "extensions": Skills.capability(directory_read=False)})
    with Client(InProcessTransport(plain), mode="legacy") as client:
        assert client.skills() == []
        with pytest.raises(ClientError, match="directoryRead"):
            client.read_directory("skill://x")
    bare = Server("none", capabilities={"resources": {}})
    with Client(InProcessTransport(bare), mode="legacy") as client, \
            pytest.raises(ClientError, match=r"does not declare the io\.modelcontextprotocol/skills"):
        client.list_skills()


@pytest.mark.feature("SKILL-07")
def test_a_file_that_does_not_match_its_manifest_is_never_returned():
    data = b"Evil body"
    good = SkillFileEntry("skill://x/SKILL.md", "sha256:" + hashlib.sha256(data).hexdigest(), len(data))
    assert verified(good, data) == data
    with pytest.raises(ValidationError, match="the manifest says 9 bytes"):
        verified(good, data + b"!")
    with pytest.raises(ValidationError, match="its digest is"):
        verified(good, b"Good body")
    with pytest.raises(ValidationError, match="no digest"):
        verified(SkillFileEntry("skill://x/SKILL.md", None, 9), data)


@pytest.mark.django_db(transaction=True)
@pytest.mark.feature("SKILL-07")
async def test_our_client_in_the_modern_era_over_http():
    from .client_support import CheckedHTTPTransport

    transport = StreamableHTTPTransport(skills_server())
    app = transport.as_asgi()

    def factory():
        import httpx

        return httpx.AsyncClient(transport=httpx.ASGITransport(app=app))

    client = AsyncClient(CheckedHTTPTransport("http://127.0.0.1/mcp", http_client_factory=factory))
    try:
        await client.connect()
        assert client.is_modern
        [skill] = await client.skills()
        files = await client.read_skill(skill)
        assert json.dumps(sorted(files)) == json.dumps(sorted([SKILL_URI, TITLES_URI]))
    finally:
        await client.close()
        await transport.close()
