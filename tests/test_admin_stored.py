"""Admin forms of prompts, resources and resource templates defined with no code: what the
registry could not serve is refused with a message on the field at fault; a valid one is saved
for the default server and announced."""

from __future__ import annotations

import json
import re

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

import mcp_server
from mcp_server.models import StoredPrompt, StoredResource, StoredResourceTemplate

from .admin_support import form_errors

pytestmark = [pytest.mark.django_db(transaction=True)]

PROMPTS, RESOURCES, TEMPLATES = ("/admin/mcp_server/storedprompt/", "/admin/mcp_server/storedresource/",
                                 "/admin/mcp_server/storedresourcetemplate/")
HAIKU = {"name": "haiku", "title": "Haiku", "description": "", "permission": "", "enabled": "on",
         "arguments": json.dumps([{"name": "topic", "required": True}]),
         "messages": json.dumps([{"role": "user", "text": "Write a haiku about {topic}."}])}


@pytest.fixture(autouse=True)
def media(settings, tmp_path):
    settings.MEDIA_ROOT = str(tmp_path)


def add_prompt(client, **fields):
    return client.post(f"{PROMPTS}add/", {**HAIKU, **fields})


def test_a_valid_prompt_is_saved_for_the_default_server_and_announced(admin_client, announced):
    form = admin_client.get(f"{PROMPTS}add/").content.decode()
    assert mcp_server.get_server().name in form  # the server it is for, read-only
    assert 'name="server"' not in form
    for field in ("arguments", "messages"):  # empty to start with (not "null")
        assert re.search(f'<textarea name="{field}"[^>]*>\\s*</textarea>', form), field
    assert add_prompt(admin_client, server="another").status_code == 302
    prompt = StoredPrompt.objects.get()
    assert (prompt.server, prompt.name, prompt.arguments, prompt.messages) == (
        mcp_server.get_server().name, "haiku", [{"name": "topic", "required": True}],
        [{"role": "user", "text": "Write a haiku about {topic}."}])
    assert announced == [(mcp_server.get_server().name, {"prompts"})]
    # Shown again indented, one key per line.
    page = admin_client.get(f"{PROMPTS}{prompt.pk}/change/").content.decode()
    assert "[\n  {\n    &quot;name&quot;: &quot;topic&quot;," in page


@pytest.mark.parametrize(("fields", "field", "message"), [
    ({"arguments": "[{name: 'topic'}]"}, "arguments", "Enter a valid JSON."),
    ({"arguments": '{"name": "topic"}'}, "arguments",
     "arguments must be a list of {name, description?, required?} objects"),
    ({"arguments": '[{"name": "the topic"}]'}, "arguments",
     "each argument needs a name made of letters, digits and _: {'name': 'the topic'}"),
    ({"arguments": '[{"name": "topic", "default": "x"}]'}, "arguments",
     "argument 'topic' has unknown keys: default"),
    ({"messages": ""}, "messages", 'Give at least one message: [{"role": "user", "text": "..."}].'),
    ({"messages": "[]"}, "messages", 'Give at least one message: [{"role": "user", "text": "..."}].'),
    ({"messages": '{"role": "user"}'}, "messages",
     'messages must be a non-empty list of {"role", "text"} objects'),
    ({"messages": '[{"role": "system", "text": "x"}]'}, "messages",
     'message 1 must be {"role": "user" or "assistant", "text": "..."}'),
    ({"messages": '[{"role": "user", "text": "About {subject}"}]'}, "messages",
     "message 1 uses {subject}, which no argument declares"),
    ({"messages": '[{"role": "user", "text": "About {topic.__class__}"}]'}, "messages",
     "message 1: {topic.__class__} is not a placeholder: use {name} with a plain name"),
    ({"name": "greeting"}, "name",
     "Code already registers a prompt 'greeting' (code wins): choose another, or shape that one "
     "under Registered primitives."),
    ({"permission": "mcp_server.fly"}, "permission",
     'There is no permission "mcp_server.fly". Name an existing one as "app_label.codename", for '
     'example "mcp_server.view_session".'),
])
def test_an_invalid_prompt_is_refused_with_a_message_on_the_field(admin_client, fields, field, message):
    errors = form_errors(add_prompt(admin_client, **fields))
    assert errors == {field: [message]}
    assert not StoredPrompt.objects.exists()


def test_a_prompt_name_taken_by_another_row_is_refused(admin_client):
    assert add_prompt(admin_client).status_code == 302
    assert form_errors(add_prompt(admin_client)) == {"name": ["Another prompt is already 'haiku'."]}
    prompt = StoredPrompt.objects.get()
    edited = admin_client.post(f"{PROMPTS}{prompt.pk}/change/", {**HAIKU, "title": "Haiku!"})
    assert edited.status_code == 302  # its own name is not "taken"


def resource(**fields):
    return {"uri": "docs://holidays", "name": "holidays", "title": "", "description": "",
            "mime_type": "text/plain", "text": "", "permission": "", "enabled": "on", **fields}


def test_a_resource_is_a_text_or_a_file(admin_client):
    both = admin_client.post(f"{RESOURCES}add/", resource(
        text="Closed on Mondays", file=SimpleUploadedFile("h.txt", b"Closed")))
    assert form_errors(both) == {"file": ["A resource is a text or a file, not both: empty the text or "
                                          "clear the file."]}
    neither = admin_client.post(f"{RESOURCES}add/", resource())
    assert form_errors(neither) == {"text": ["Give the resource a text, or upload a file."]}
    taken = admin_client.post(f"{RESOURCES}add/", resource(uri="demo://readme", text="x"))
    assert form_errors(taken) == {"uri": ["Code already registers a resource with the URI 'demo://readme' "
                                          "(code wins): choose another, or shape that one under "
                                          "Registered primitives."]}
    assert not StoredResource.objects.exists()
    upload = admin_client.post(f"{RESOURCES}add/", resource(
        mime_type="", file=SimpleUploadedFile("logo.png", b"\x89PNG\r\n")))
    assert upload.status_code == 302
    saved = StoredResource.objects.get()
    assert (saved.mime_type, saved.text, saved.file.read()) == ("image/png", "", b"\x89PNG\r\n")
    # A text added while the file is still there is refused; with the file cleared it is taken.
    change = f"{RESOURCES}{saved.pk}/change/"
    assert "file" in form_errors(admin_client.post(change, resource(text="now a text")))
    assert admin_client.post(change, resource(text="now a text", **{"file-clear": "on"})).status_code == 302
    saved.refresh_from_db()
    assert (saved.text, bool(saved.file)) == ("now a text", False)


def template(**fields):
    return {"uri_template": "weather://{city}/today", "name": "weather", "title": "", "description": "",
            "mime_type": "text/plain", "text": "Sunny in {city}.", "permission": "", "enabled": "on",
            **fields}


@pytest.mark.parametrize(("fields", "field", "message"), [
    ({"uri_template": "weather://today"}, "uri_template", "the URI template has no {variable}"),
    ({"text": "Sunny in {town}."}, "text", "the text uses {town}, which the URI template does not have"),
    ({"text": "Sunny in {city"}, "text",
     "text: unbalanced braces: expected '}' before end of string; write {{ and }} for literal braces"),
    ({"uri_template": "demo://users/{user_id}/profile", "text": "{user_id}"}, "uri_template",
     "Code already registers a resource template 'demo://users/{user_id}/profile' (code wins): choose "
     "another, or shape that one under Registered primitives."),
])
def test_an_invalid_resource_template_is_refused_with_a_message_on_the_field(admin_client, fields, field,
                                                                             message):
    assert form_errors(admin_client.post(f"{TEMPLATES}add/", template(**fields))) == {field: [message]}
    assert not StoredResourceTemplate.objects.exists()


def test_a_valid_resource_template_is_saved(admin_client, announced):
    assert admin_client.post(f"{TEMPLATES}add/", template()).status_code == 302
    saved = StoredResourceTemplate.objects.get()
    assert (saved.server, saved.uri_template) == (mcp_server.get_server().name, "weather://{city}/today")
    assert announced == [(mcp_server.get_server().name, {"resources"})]
