"""What the admin tests share: a spy on the registry's announcements, and the forms' errors."""

from __future__ import annotations

from typing import Any

import pytest

from mcp_server import signals


@pytest.fixture
def announced(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, set[str]]]:
    """Every ``signals.publish(server, lists)`` (one per list_changed round), in order; the real
    one still runs."""
    calls: list[tuple[str, set[str]]] = []
    real = signals.publish

    def spy(server_name: str, lists: set[str]) -> None:
        calls.append((server_name, set(lists)))
        real(server_name, lists)

    monkeypatch.setattr(signals, "publish", spy)
    return calls


def form_errors(response: Any) -> dict[str, list[str]]:
    """The admin form's errors by field (``__all__`` for the form's own)."""
    assert response.status_code == 200, f"expected the form back, got {response.status_code}"
    form = response.context["adminform"].form
    return {field: list(errors) for field, errors in form.errors.items()}


def action(client: Any, url: str, name: str, pks: list[Any]) -> Any:
    """Run a changelist action on the rows ``pks``."""
    return client.post(url, {"action": name, "_selected_action": [str(pk) for pk in pks], "index": 0},
                       follow=True)
