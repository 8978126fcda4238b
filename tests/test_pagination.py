"""Cursor pagination of the four list methods on the server, handshake era (PAG)."""

from __future__ import annotations

from typing import Any

import pytest

from mcp_protocol.errors import INVALID_PARAMS
from mcp_server import Prompt, Resource, ResourceTemplate, Server, Tool

REVISIONS = ["2025-11-25", "2024-11-05"]
# method -> the key of its items, and how an item is named
LISTS = {
    "tools/list": ("tools", "name"),
    "prompts/list": ("prompts", "name"),
    "resources/list": ("resources", "uri"),
    "resources/templates/list": ("resourceTemplates", "uriTemplate"),
}


def server_with(count: int, **options: Any) -> Server:
    """``count`` tools, prompts, resources and templates, named in registration order."""
    return Server(
        "paged",
        tools=[Tool.define(lambda args: "x", name=f"tool_{i}") for i in range(count)],
        prompts=[Prompt.define(lambda args: "x", name=f"prompt_{i}") for i in range(count)],
        resources=[Resource(uri=f"mem://r/{i}", name=f"r{i}") for i in range(count)],
        resource_templates=[ResourceTemplate(uri_template=f"mem://t/{i}/{{x}}", name=f"t{i}")
                            for i in range(count)],
        **options,
    )


def names(result: dict, method: str) -> list[str]:
    key, field = LISTS[method]
    return [item[field] for item in result[key]]


def expected_names(method: str, indexes: range) -> list[str]:
    return {
        "tools/list": [f"tool_{i}" for i in indexes],
        "prompts/list": [f"prompt_{i}" for i in indexes],
        "resources/list": [f"mem://r/{i}" for i in indexes],
        "resources/templates/list": [f"mem://t/{i}/{{x}}" for i in indexes],
    }[method]


@pytest.mark.feature("PAG-01", "PAG-04")
@pytest.mark.parametrize("revision", REVISIONS)
@pytest.mark.parametrize("method", LISTS)
def test_no_page_size_returns_everything_in_one_page(make_client, revision, method):
    server = server_with(250)
    assert server.page_size is None
    result = make_client(server, revision=revision).result(method)
    assert names(result, method) == expected_names(method, range(250))
    assert "nextCursor" not in result


@pytest.mark.feature("PAG-01", "PAG-02", "PAG-04")
@pytest.mark.parametrize("revision", REVISIONS)
@pytest.mark.parametrize("method", LISTS)
def test_pages_follow_offset_cursors(make_client, revision, method):
    client = make_client(server_with(7, page_size=3), revision=revision)
    first = client.result(method)
    assert names(first, method) == expected_names(method, range(0, 3))
    assert first["nextCursor"] == "3"
    second = client.result(method, {"cursor": "3"})
    assert names(second, method) == expected_names(method, range(3, 6))
    assert second["nextCursor"] == "6"
    last = client.result(method, {"cursor": "6"})
    assert names(last, method) == expected_names(method, range(6, 7))
    assert "nextCursor" not in last
    # Any offset in range is a valid cursor, and pages start there.
    assert names(client.result(method, {"cursor": "5"}), method) == expected_names(method, range(5, 7))


@pytest.mark.feature("PAG-02", "PAG-04")
@pytest.mark.parametrize("method", LISTS)
@pytest.mark.parametrize(("count", "page_size", "cursors"), [
    (6, 3, ["3"]),  # exactly divisible: the second page is the last, with no cursor
    (2, 50, []),  # one short page
    (0, 5, []),  # nothing at all
    (3, 1, ["1", "2"]),
])
def test_next_cursor_only_when_more_items_remain(make_client, method, count, page_size, cursors):
    client = make_client(server_with(count, page_size=page_size))
    seen: list[str] = []
    offered: list[str] = []
    result = client.result(method)
    for _ in range(count + 1):  # bounded
        seen += names(result, method)
        if "nextCursor" not in result:
            break
        offered.append(result["nextCursor"])
        result = client.result(method, {"cursor": result["nextCursor"]})
    assert offered == cursors
    assert seen == expected_names(method, range(count))


@pytest.mark.feature("PAG-02")
def test_cursor_with_meta_and_without_page_size(make_client):
    client = make_client(server_with(4))
    result = client.result("tools/list", {"cursor": "1", "_meta": {"com.example/x": 1}})
    assert names(result, "tools/list") == expected_names("tools/list", range(1, 4))
    assert "nextCursor" not in result


@pytest.mark.feature("PAG-01")
@pytest.mark.parametrize("page_size", [0, -1, 1.5, "10", True, False, [10]])
def test_invalid_page_size_raises_at_construction(page_size):
    with pytest.raises(ValueError, match="page_size"):
        Server("paged", page_size=page_size)


@pytest.mark.feature("PAG-01")
def test_page_size_of_one_is_valid():
    assert Server("paged", page_size=1).page_size == 1


@pytest.mark.feature("PAG-03", "PAG-04")
@pytest.mark.parametrize("revision", REVISIONS)
@pytest.mark.parametrize("method", LISTS)
@pytest.mark.parametrize("cursor", [3, ["3"], {"offset": 3}, "abc", "", "-1", "1.5", "0x2", " 3",
                                    "7", "8", "100000000000000000000"])
def test_invalid_cursor(make_client, revision, method, cursor):
    client = make_client(server_with(7, page_size=3), revision=revision)
    error = client.request(method, {"cursor": cursor}, check=False)["error"]
    assert error["code"] == INVALID_PARAMS
    assert error["message"].startswith("Invalid cursor")


@pytest.mark.feature("PAG-03")
@pytest.mark.parametrize("method", LISTS)
def test_null_cursor_is_the_first_page(make_client, method):
    """As in the Ruby SDK, ``"cursor": null`` reads as no cursor (the schema forbids it anyway)."""
    client = make_client(server_with(7, page_size=3))
    response = client.request(method, {"cursor": None}, check=False)
    assert names(response["result"], method) == expected_names(method, range(3))


@pytest.mark.feature("PAG-03")
@pytest.mark.parametrize("method", LISTS)
def test_any_cursor_into_an_empty_collection_is_invalid(make_client, method):
    client = make_client(server_with(0))
    assert client.request(method, {"cursor": "0"})["error"]["code"] == INVALID_PARAMS


@pytest.mark.feature("PAG-05")
@pytest.mark.parametrize("revision", REVISIONS)
@pytest.mark.parametrize("method", LISTS)
@pytest.mark.parametrize("params", [[], ["3"], [{"cursor": "3"}], "cursor=3", 3, True])
def test_list_params_must_be_an_object(make_client, revision, method, params):
    client = make_client(server_with(7, page_size=3), revision=revision)
    error = client.request(method, params, check=False)["error"]
    assert error["code"] == INVALID_PARAMS


@pytest.mark.feature("PAG-05")
@pytest.mark.parametrize("method", LISTS)
def test_absent_or_empty_params_are_the_first_page(make_client, method):
    client = make_client(server_with(7, page_size=3))
    for params in (None, {}):
        assert names(client.result(method, params), method) == expected_names(method, range(3))
