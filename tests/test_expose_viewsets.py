"""A Django REST framework ViewSet as MCP tools (mcp_server.expose.viewset_tools), on the demo's
TicketViewSet: its owner-only permission, throttle, FilterSet and cursor pagination decide each
call as they do over HTTP. In process through the dispatcher with a principal, then with the
official Python SDK client against daphne in both eras."""

from __future__ import annotations

from typing import Any

import anyio
import django_filters
import httpx2
import jsonschema
import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth import get_user_model
from django.core.cache.backends.locmem import LocMemCache
from django_filters.rest_framework import DjangoFilterBackend
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client
from rest_framework import mixins, serializers, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import ValidationError
from rest_framework.response import Response

from mcp_server import Server
from mcp_server.auth import Principal
from mcp_server.expose import viewset_tools
from project.demo.api import TicketSerializer, TicketThrottle, TicketViewSet
from project.demo.models import Ticket

from .http_support import running
from .test_http_interop import WireTap
from .waiting import PATIENCE

ACTIONS = ["list", "retrieve", "create", "update", "partial_update", "destroy", "close"]


def build_server() -> Server:
    server = Server("tickets")
    for tool in viewset_tools(TicketViewSet, prefix="ticket", actions=ACTIONS):
        server.add_tool(tool)
    return server


def tool_entries() -> dict[str, dict]:
    tools = viewset_tools(TicketViewSet, prefix="ticket", actions=ACTIONS)
    return {tool.name: tool.to_dict() for tool in tools}


# Schemas ------------------------------------------------------------------------------------------

def test_the_schemas_are_json_schema_and_say_what_the_serializer_does():
    entries = tool_entries()
    assert sorted(entries) == sorted(f"ticket_{action}" for action in ACTIONS)
    for entry in entries.values():
        jsonschema.Draft202012Validator.check_schema(entry["inputSchema"])
        if "outputSchema" in entry:
            jsonschema.Draft202012Validator.check_schema(entry["outputSchema"])
    fields = TicketSerializer().fields
    writable = [name for name, field in fields.items() if not field.read_only]
    readable = [name for name, field in fields.items() if not field.write_only]
    assert writable == ["title", "body", "status", "priority"]

    create = entries["ticket_create"]["inputSchema"]
    assert list(create["properties"]) == writable and create["required"] == ["title"]
    assert create["properties"]["status"]["enum"] == ["open", "closed"]
    assert create["properties"]["priority"] == {"type": "integer", "minimum": 1, "maximum": 5,
                                                "title": "Priority", "description": "1 (urgent) to 5"}
    assert create["properties"]["title"]["maxLength"] == 200
    update = entries["ticket_update"]["inputSchema"]
    assert list(update["properties"]) == ["pk", *writable] and update["required"] == ["pk", "title"]
    partial = entries["ticket_partial_update"]["inputSchema"]
    assert partial["required"] == ["pk"] and list(partial["properties"]) == ["pk", *writable]
    for name in ("ticket_retrieve", "ticket_destroy", "ticket_close"):
        schema = entries[name]["inputSchema"]
        assert schema["properties"]["pk"]["type"] == "integer" and schema["required"] == ["pk"]

    listing = entries["ticket_list"]["inputSchema"]
    assert listing.get("required") is None
    assert list(listing["properties"]) == ["status", "priority", "priority__lte", "priority__gte",
                                           "title__icontains", "mine", "search", "ordering", "cursor"]
    assert listing["properties"]["status"]["enum"] == ["open", "closed"]
    assert listing["properties"]["priority__lte"]["type"] == "number"
    assert listing["properties"]["mine"]["type"] == "boolean"

    item = entries["ticket_retrieve"]["outputSchema"]
    assert list(item["properties"]) == readable
    assert item["properties"]["owner"]["type"] == ["string", "null"]
    assert item["properties"]["created_at"] == {"type": "string", "format": "date-time",
                                                "title": "Created at"}
    page = entries["ticket_list"]["outputSchema"]
    assert page["properties"]["results"]["items"] == {k: v for k, v in item.items() if k != "$schema"}
    assert page["required"] == ["results", "next_cursor"]
    assert "outputSchema" not in entries["ticket_close"]  # an @action answers what its code returns

    hints = {name: entry["annotations"] for name, entry in entries.items()}
    assert hints["ticket_list"]["readOnlyHint"] and hints["ticket_retrieve"]["readOnlyHint"]
    assert not hints["ticket_list"]["destructiveHint"]
    assert hints["ticket_create"] == {"readOnlyHint": False, "destructiveHint": False,
                                      "idempotentHint": False, "openWorldHint": False}
    for name in ("ticket_update", "ticket_partial_update", "ticket_destroy", "ticket_close"):
        assert hints[name]["destructiveHint"] and not hints[name]["readOnlyHint"], name


class Note(serializers.Serializer):
    note = serializers.CharField(max_length=10)


class Everything(serializers.Serializer):
    """One field of each kind the schemas know."""

    flag = serializers.BooleanField()
    count = serializers.IntegerField(min_value=0, required=False, default=1)
    ratio = serializers.FloatField(allow_null=True)
    price = serializers.DecimalField(max_digits=6, decimal_places=2)
    when = serializers.DateTimeField()
    day = serializers.DateField()
    email = serializers.EmailField()
    ident = serializers.UUIDField()
    kind = serializers.ChoiceField(choices=[("a", "A"), ("b", "B")], allow_null=True)
    tags = serializers.MultipleChoiceField(choices=["x", "y"])
    numbers = serializers.ListField(child=serializers.IntegerField())
    extra = serializers.DictField(child=serializers.CharField())
    data = serializers.JSONField()
    detail = Note()
    notes = Note(many=True)
    secret = serializers.CharField(write_only=True)
    computed = serializers.SerializerMethodField()
    user = serializers.HiddenField(default=serializers.CurrentUserDefault())
    made = serializers.DateTimeField(read_only=True)

    def get_computed(self, obj: Any) -> int:
        return 1


class EverythingViewSet(mixins.CreateModelMixin, viewsets.GenericViewSet):
    serializer_class = Everything


class TicketSieve(django_filters.FilterSet):
    priority__in = django_filters.BaseInFilter(field_name="priority", lookup_expr="in")
    numbers = django_filters.NumberFilter(field_name="priority")
    statuses = django_filters.MultipleChoiceFilter(field_name="status", choices=Ticket.Status.choices)
    since = django_filters.IsoDateTimeFilter(field_name="created_at", lookup_expr="gte")
    owner = django_filters.ModelChoiceFilter(queryset=get_user_model().objects.all())

    class Meta:
        model = Ticket
        fields: list[str] = []


class SievedTickets(viewsets.ReadOnlyModelViewSet):
    queryset = Ticket.objects.all()
    serializer_class = TicketSerializer
    filter_backends = [DjangoFilterBackend]
    filterset_class = TicketSieve
    pagination_class = None


class TicketsByField(SievedTickets):
    filterset_class = None
    filterset_fields = ["status", "owner"]
    lookup_field = "title"


def test_each_kind_of_serializer_field_has_its_schema():
    [create] = viewset_tools(EverythingViewSet, prefix="everything", actions=["create"])
    entry = create.to_dict()
    jsonschema.Draft202012Validator.check_schema(entry["inputSchema"])
    jsonschema.Draft202012Validator.check_schema(entry["outputSchema"])
    given = entry["inputSchema"]["properties"]
    assert list(given) == ["flag", "count", "ratio", "price", "when", "day", "email", "ident", "kind",
                           "tags", "numbers", "extra", "data", "detail", "notes", "secret"]
    assert entry["inputSchema"]["required"] == [name for name in given if name != "count"]
    assert given["flag"] == {"type": "boolean", "title": "Flag"}
    assert given["count"] == {"type": "integer", "minimum": 0, "title": "Count", "default": 1}
    assert given["ratio"]["type"] == ["number", "null"]
    assert given["price"]["type"] == ["number", "string"]
    assert given["when"]["format"] == "date-time" and given["day"]["format"] == "date"
    assert given["email"]["format"] == "email" and given["ident"]["format"] == "uuid"
    assert given["kind"]["type"] == ["string", "null"] and given["kind"]["enum"] == ["a", "b", None]
    assert given["tags"]["items"] == {"type": "string", "enum": ["x", "y"]}
    assert given["numbers"]["items"] == {"type": "integer"}
    assert given["extra"]["additionalProperties"] == {"type": "string"}
    assert "type" not in given["data"]
    assert given["detail"]["properties"]["note"] == {"type": "string", "maxLength": 10, "title": "Note"}
    assert given["notes"]["type"] == "array" and given["notes"]["items"]["required"] == ["note"]
    shown = entry["outputSchema"]["properties"]
    assert "secret" not in shown and "user" not in shown and "user" not in given
    assert shown["price"]["type"] == "string" and "type" not in shown["computed"]
    assert shown["made"]["format"] == "date-time" and "made" not in given
    valid = {"flag": True, "ratio": None, "price": "1.50", "when": "2026-01-01T00:00:00Z",
             "day": "2026-01-01", "email": "a@example.com", "ident": "0" * 32, "kind": None,
             "tags": ["x"], "numbers": [1],
             "extra": {"k": "v"}, "data": [1, {"a": 2}], "detail": {"note": "n"}, "notes": [], "secret": "s"}
    assert create.input_schema.errors(valid) == []
    assert create.input_schema.errors({**valid, "kind": "c"}) != []


def test_each_kind_of_filter_has_its_schema_and_goes_into_the_query_as_django_filter_reads_it():
    [listing, retrieve] = viewset_tools(SievedTickets, prefix="sieved", actions=["list", "retrieve"])
    arguments = listing.to_dict()["inputSchema"]["properties"]
    assert list(arguments) == ["priority__in", "numbers", "statuses", "since", "owner"]  # no cursor
    assert arguments["priority__in"]["type"] == "array"
    assert arguments["statuses"]["items"] == {"type": "string", "enum": ["open", "closed"]}
    assert arguments["since"]["format"] == "date-time"
    assert arguments["owner"]["type"] == "integer"
    assert listing.handler._query({"priority__in": [1, 2], "statuses": ["open", "closed"], "owner": 3}) == [
        ("priority__in", "1,2"), ("statuses", "open"), ("statuses", "closed"), ("owner", "3")]
    assert retrieve.to_dict()["inputSchema"]["properties"]["pk"]["type"] == "integer"
    [listing, retrieve] = viewset_tools(TicketsByField, prefix="by_field", actions=["list", "retrieve"])
    arguments = listing.to_dict()["inputSchema"]["properties"]
    assert arguments["status"]["enum"] == ["open", "closed"] and arguments["owner"]["type"] == "integer"
    assert retrieve.to_dict()["inputSchema"]["required"] == ["title"]
    assert retrieve.to_dict()["inputSchema"]["properties"]["title"]["type"] == "string"


@pytest.mark.parametrize("actions, message", [
    (["list", "archive"], "has no action 'archive'"),
    ("list", "must be a list"),
    (["close:get"], "does not answer GET"),
    (["list:get"], "name it without a method"),
])
def test_an_action_the_viewset_does_not_have_is_refused_when_the_tools_are_made(actions, message):
    with pytest.raises(ValueError, match=message):
        viewset_tools(TicketViewSet, prefix="ticket", actions=actions)


def test_only_viewsets_are_taken():
    with pytest.raises(TypeError, match="takes a ViewSet class"):
        viewset_tools(TicketSerializer, prefix="ticket", actions=["list"])


# In process -----------------------------------------------------------------------------------------

@pytest.fixture
def tickets(make_client, monkeypatch, short_lived_connections, transactional_db):
    """A server with the ticket tools, a client of it, and two users; the throttle counts in a
    cache of this test alone."""
    monkeypatch.setattr(TicketThrottle, "cache", LocMemCache("tickets-under-test", {}))
    users = get_user_model().objects
    server = build_server()
    return server, make_client(server), users.create_user("alice"), users.create_user("bob")


def call(client, name: str, **arguments: Any) -> dict:
    return client.result("tools/call", {"name": name, "arguments": arguments})


def structured(client, name: str, **arguments: Any) -> Any:
    result = call(client, name, **arguments)
    assert result["isError"] is False, result
    schema = tool_entries()[name].get("outputSchema")
    if schema is not None:
        jsonschema.validate(result["structuredContent"], schema)
    return result["structuredContent"]


def error_text(result: dict) -> str:
    assert result["isError"] is True, result
    return result["content"][0]["text"]


def test_an_allowed_user_lists_filters_pages_creates_and_updates(tickets):
    server, client, alice, _bob = tickets
    server.session.act_for(Principal(user=alice))
    made = [structured(client, "ticket_create", title=f"Printer {n}", priority=n % 5 + 1,
                       body="paper jam" if n == 3 else "")
            for n in range(7)]
    assert made[0]["owner"] == "alice" and made[0]["status"] == "open" and made[0]["priority"] == 1

    first = structured(client, "ticket_list")
    assert [t["title"] for t in first["results"]] == [f"Printer {n}" for n in (6, 5, 4, 3, 2)]
    assert first["next_cursor"]
    second = structured(client, "ticket_list", cursor=first["next_cursor"])
    assert [t["title"] for t in second["results"]] == ["Printer 1", "Printer 0"]
    assert second["next_cursor"] is None

    urgent = structured(client, "ticket_list", priority__lte=2)
    assert sorted(t["title"] for t in urgent["results"]) == [
        "Printer 0", "Printer 1", "Printer 5", "Printer 6"]
    assert [t["title"] for t in structured(client, "ticket_list", search="jam")["results"]] == ["Printer 3"]
    by_priority = structured(client, "ticket_list", ordering="priority", priority__gte=4)["results"]
    assert [t["priority"] for t in by_priority] == [4, 5]

    changed = structured(client, "ticket_partial_update", pk=made[2]["id"], status="closed", priority=1)
    assert changed["status"] == "closed" and changed["priority"] == 1 and changed["title"] == "Printer 2"
    assert structured(client, "ticket_retrieve", pk=made[2]["id"]) == changed
    replaced = structured(client, "ticket_update", pk=made[4]["id"], title="Scanner", priority=2)
    assert replaced["title"] == "Scanner" and replaced["body"] == ""
    closed_ones = structured(client, "ticket_list", status="closed")["results"]
    assert [t["title"] for t in closed_ones] == ["Printer 2"]
    assert structured(client, "ticket_list", mine=False)["results"] == []
    closed = call(client, "ticket_close", pk=made[0]["id"])
    assert closed["isError"] is False and closed["structuredContent"]["status"] == "closed"
    assert structured(client, "ticket_destroy", pk=made[1]["id"]) == {"deleted": True}
    assert error_text(call(client, "ticket_retrieve", pk=made[1]["id"])).startswith("not found: ")


def test_another_user_and_nobody_are_refused_by_the_same_permission(tickets):
    server, client, alice, bob = tickets
    server.session.act_for(Principal(user=alice))
    ticket = structured(client, "ticket_create", title="Alice's laptop")
    server.session.act_for(Principal(user=bob))
    # Bob reads it (IsOwnerOrReadOnly lets anyone signed in read) but may not change it.
    assert structured(client, "ticket_retrieve", pk=ticket["id"])["title"] == "Alice's laptop"
    refused = call(client, "ticket_partial_update", pk=ticket["id"], title="Bob's now")
    assert error_text(refused) == "permission denied: only the ticket's owner may change it"
    assert error_text(call(client, "ticket_close", pk=ticket["id"])).startswith("permission denied")
    server.session.act_for(None)
    assert error_text(call(client, "ticket_list")) == (
        "permission denied: Authentication credentials were not provided.")
    server.session.act_for(Principal(user=alice))
    assert structured(client, "ticket_retrieve", pk=ticket["id"])["title"] == "Alice's laptop"


def test_the_throttle_refuses_the_call_past_its_rate(tickets, monkeypatch):
    server, client, alice, bob = tickets
    monkeypatch.setattr(TicketThrottle, "rate", "3/minute")
    server.session.act_for(Principal(user=alice))
    for _ in range(3):
        assert call(client, "ticket_list")["isError"] is False
    text = error_text(call(client, "ticket_list"))
    assert text.startswith("throttled: try again in ") and "seconds" in text
    wait = int(text.removeprefix("throttled: try again in ").split(" ")[0])
    assert 1 <= wait <= 60
    server.session.act_for(Principal(user=bob))  # a rate per user
    assert call(client, "ticket_list")["isError"] is False


def test_an_invalid_body_is_a_tool_error_naming_the_field(tickets):
    server, client, alice, _bob = tickets
    server.session.act_for(Principal(user=alice))
    # Blank once trimmed: the serializer refuses it, not the schema.
    text = error_text(call(client, "ticket_create", title="   ", status="open"))
    assert text == "invalid input: title: This field may not be blank."
    # What the schema says is refused before the ViewSet runs.
    assert "priority" in error_text(call(client, "ticket_create", title="ok", priority=9))
    assert structured(client, "ticket_list")["results"] == []


class Burn(serializers.Serializer):
    title = serializers.CharField()


class BurningTickets(TicketViewSet):
    throttle_classes: list = []

    @action(detail=False, methods=["get", "post"], serializer_class=Burn)
    def burn(self, request: Any) -> Response:
        """Write a ticket, then refuse: what ATOMIC_REQUESTS undoes."""
        serializer = self.get_serializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        Ticket.objects.create(title=serializer.validated_data["title"], owner=request.user)
        raise ValidationError({"title": ["burnt"]})


@pytest.mark.parametrize("atomic", [True, False])
def test_a_refused_call_is_rolled_back_where_atomic_requests_says(tickets, monkeypatch, atomic):
    from django.db import connection

    server, client, alice, _bob = tickets
    monkeypatch.setitem(connection.settings_dict, "ATOMIC_REQUESTS", atomic)
    [burn] = viewset_tools(BurningTickets, prefix="burning", actions=["burn:post"])
    assert burn.name == "burning_burn_post" and burn.input_schema.required == ["title"]
    server.add_tool(burn)
    server.session.act_for(Principal(user=alice))
    assert error_text(call(client, "burning_burn_post", title="Kept?")) == "invalid input: title: burnt"
    assert Ticket.objects.filter(title="Kept?").exists() is not atomic
    with pytest.raises(ValueError, match="answers GET, POST: name one"):
        viewset_tools(BurningTickets, prefix="burning", actions=["burn"])


# Over HTTP, with the official Python SDK ------------------------------------------------------------

@pytest.fixture(scope="module")
def daphne(django_db_setup, django_db_blocker):
    settings = {"AUTHENTICATION_CLASSES": ["rest_framework.authentication.TokenAuthentication"]}
    with running(django_db_blocker, mcp_settings=settings) as server:
        yield server


def tokens() -> dict[str, str]:
    from django.db import connection
    from rest_framework.authtoken.models import Token

    try:
        users = get_user_model().objects
        return {name: Token.objects.create(user=users.create_user(f"http-{name}")).key
                for name in ("alice", "bob")}
    finally:
        connection.close()


async def test_the_official_python_client_uses_the_ticket_tools_in_either_era(daphne, transactional_db):
    keys = await sync_to_async(tokens)()
    tap = WireTap(daphne.url)

    def connect(who: str, mode: str) -> Client:
        http = httpx2.AsyncClient(headers={"Authorization": f"Token {keys[who]}"}, timeout=PATIENCE)
        return Client(streamable_http_client(tap.url, http_client=http), mode=mode)

    try:
        with anyio.fail_after(60):
            async with connect("alice", "2026-07-28") as modern:
                assert modern.protocol_version == "2026-07-28"
                listed = {tool.name: tool for tool in (await modern.list_tools()).tools}
                assert listed["ticket_list"].annotations.read_only_hint is True
                assert "cursor" in listed["ticket_list"].input_schema["properties"]
                created = await modern.call_tool("ticket_create", {"title": "Over HTTP", "priority": 2})
                assert created.is_error is False
                ticket = created.structured_content
                assert ticket["owner"] == "http-alice" and ticket["priority"] == 2
                page = await modern.call_tool("ticket_list", {"priority__lte": 2})
                assert [t["id"] for t in page.structured_content["results"]] == [ticket["id"]]
                assert page.structured_content["next_cursor"] is None
                invalid = await modern.call_tool("ticket_create", {"title": " "})
                assert invalid.is_error is True
                assert invalid.content[0].text == "invalid input: title: This field may not be blank."
            async with connect("bob", "legacy") as legacy:
                assert legacy.protocol_version == "2025-11-25"
                read = await legacy.call_tool("ticket_retrieve", {"pk": ticket["id"]})
                assert read.is_error is False and read.structured_content["title"] == "Over HTTP"
                refused = await legacy.call_tool("ticket_partial_update",
                                                 {"pk": ticket["id"], "title": "Mine"})
                assert refused.is_error is True
                assert refused.content[0].text == "permission denied: only the ticket's owner may change it"
    finally:
        tap.close()
    assert tap.violations == []
    # The modern client sent its calls without a handshake; the legacy one began with it.
    assert tap.seen["client"][:5] == ["tools/list", "tools/call", "tools/call", "tools/call", "initialize"]
