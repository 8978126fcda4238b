"""The typed public API of ``mcp_client``: the blocking ``Client`` writes out every method of
``AsyncClient`` with the same parameters (no ``setattr`` generation, so type checkers and IDEs see
them), and the package ships ``py.typed``."""

from __future__ import annotations

import inspect
import tomllib

import pytest

from mcp_client import AsyncClient, Client

from .harness import REPO

# What only the blocking client has: it owns a thread to stop.
BLOCKING_ONLY = {"shutdown"}


def public(cls: type) -> dict[str, object]:
    return {name: member for name, member in inspect.getmembers(cls)
            if not name.startswith("_")}


def methods(cls: type) -> dict[str, inspect.Signature]:
    return {name: inspect.signature(member) for name, member in public(cls).items()
            if inspect.isfunction(member)}


@pytest.mark.feature("CLI-01")
def test_client_and_async_client_expose_the_same_methods_with_the_same_parameters():
    blocking, asynchronous = methods(Client), methods(AsyncClient)
    assert set(blocking) - BLOCKING_ONLY == set(asynchronous)
    for name, signature in asynchronous.items():
        # Same names, kinds, defaults and annotations, return annotation included (an async
        # method's annotation is what awaiting it gives, which the blocking one returns).
        assert blocking[name] == signature, f"Client.{name}{blocking[name]} != AsyncClient.{name}{signature}"
        assert not inspect.iscoroutinefunction(getattr(Client, name))
        assert getattr(Client, name).__qualname__ == f"Client.{name}"  # written out, not generated
    assert inspect.signature(Client.__init__) == inspect.signature(AsyncClient.__init__)


def test_every_reader_of_the_async_client_is_a_property_of_the_blocking_one():
    properties = {name for name, member in public(AsyncClient).items() if isinstance(member, property)}
    assert properties and all(isinstance(getattr(Client, name), property) for name in properties)
    # The attributes an AsyncClient sets for its user to read are there too.
    transport = type("RequestResponse", (), {"send_request": lambda self, request: None})()
    attributes = {name for name in vars(AsyncClient(transport)) if not name.startswith("_")}
    assert "transport" in attributes
    assert {name for name in attributes if not isinstance(getattr(Client, name, None), property)} == set()


def test_the_package_ships_py_typed():
    assert (REPO / "mcp_client" / "py.typed").is_file()
    with open(REPO / "pyproject.toml", "rb") as pyproject:
        package_data = tomllib.load(pyproject)["tool"]["setuptools"]["package-data"]
    assert "py.typed" in package_data["mcp_client"]
