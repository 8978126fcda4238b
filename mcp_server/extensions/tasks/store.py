"""The writes only tasks make to their call record: the questions a task asks its client, the
answers ``tasks/update`` brings, and expiry. Each is one transaction, so a worker and any number
of web processes answering ``tasks/update`` at once cannot lose an answer or ask a key twice."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.db import transaction
from django.utils import timezone

from ...invoke import run_in_thread
from ...models import ToolCall

State = ToolCall.State


def _ask(call_id: str, requests: dict[str, dict]) -> dict[str, str]:
    """running -> input_required with ``requests``; the wire key of each handler key (a key asked
    before in this task gets a suffix, as a key names one request for a task's whole life)."""
    with transaction.atomic():
        call = ToolCall.objects.select_for_update().get(id=call_id)
        asked = set(call.asked_keys or [])
        wire_keys: dict[str, str] = {}
        for key in requests:
            wire, number = key, 1
            while wire in asked:
                number += 1
                wire = f"{key}#{number}"
            asked.add(wire)
            wire_keys[wire] = key
        if call.state != State.RUNNING:
            return {}  # cancelled or ended meanwhile: nothing to ask
        call.input_requests = {wire: requests[key] for wire, key in wire_keys.items()}
        call.input_responses = {}
        call.asked_keys = sorted(asked)
        call.state = State.INPUT_REQUIRED
        call.save(update_fields=["input_requests", "input_responses", "asked_keys", "state", "updated_at"])
        return wire_keys


def _answer(call_id: str, responses: dict[str, dict]) -> bool:
    """Keep the answers to keys still outstanding (others are ignored, as the spec says); once
    none is left the task is working again. True when the record changed."""
    with transaction.atomic():
        call = ToolCall.objects.select_for_update().filter(id=call_id).first()
        if call is None or call.state != State.INPUT_REQUIRED or not call.input_requests:
            return False
        outstanding = dict(call.input_requests)
        answered = {key: value for key, value in responses.items() if key in outstanding}
        if not answered:
            return False
        for key in answered:
            del outstanding[key]
        call.input_responses = {**(call.input_responses or {}), **answered}
        call.input_requests = outstanding or None
        if not outstanding:
            call.state = State.RUNNING
        call.save(update_fields=["input_requests", "input_responses", "state", "updated_at"])
        return True


def _take_answers(call_id: str) -> dict[str, Any] | None:
    """Every answer, once the client answered all that was asked (None until then)."""
    with transaction.atomic():
        call = ToolCall.objects.select_for_update().filter(id=call_id).first()
        if call is None or call.state != State.RUNNING or call.input_requests \
                or call.input_responses is None:
            return None
        answers = call.input_responses
        call.input_responses = None
        call.save(update_fields=["input_responses", "updated_at"])
        return answers


def _delete_expired(ttl_ms: int) -> int:
    """Delete finished tasks created more than ``ttl_ms`` ago; how many were deleted."""
    cutoff = timezone.now() - timedelta(milliseconds=ttl_ms)
    finished = (State.COMPLETED, State.FAILED, State.CANCELLED)
    deleted, _ = ToolCall.objects.filter(task=True, state__in=finished, created_at__lt=cutoff).delete()
    return deleted


async def ask(call_id: str, requests: dict[str, dict]) -> dict[str, str]:
    return await run_in_thread(_ask, call_id, requests)


async def answer(call_id: str, responses: dict[str, dict]) -> bool:
    return await run_in_thread(_answer, call_id, responses)


async def take_answers(call_id: str) -> dict[str, Any] | None:
    return await run_in_thread(_take_answers, call_id)


def delete_expired(ttl_ms: int) -> int:
    return _delete_expired(ttl_ms)
