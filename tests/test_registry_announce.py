"""A registry change is announced once per transaction (mcp_server.signals.announce):
a row saved with its groups is one save, and a rolled back transaction announces nothing."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group
from django.db import transaction

from mcp_server.models import PrimitiveSetting, StoredPrompt

pytestmark = [pytest.mark.django_db(transaction=True)]

MESSAGES = [{"role": "user", "text": "hi"}]


def test_a_row_saved_with_its_groups_in_one_transaction_is_announced_once(announced):
    group = Group.objects.create(name="staff")
    with transaction.atomic():
        setting = PrimitiveSetting.objects.create(server="s", kind="tool", name="echo", enabled=False)
        setting.groups.set([group])
        StoredPrompt.objects.create(server="s", name="p", messages=MESSAGES)
        assert announced == []  # not before the commit
    assert announced == [("s", {"tools", "prompts"})]
    announced.clear()
    setting.groups.clear()  # autocommit: at once
    assert announced == [("s", {"tools"})]


def test_a_rolled_back_transaction_announces_nothing_and_the_next_one_its_own(announced):
    with pytest.raises(RuntimeError), transaction.atomic():
        PrimitiveSetting.objects.create(server="s", kind="tool", name="echo")
        raise RuntimeError("rolled back")
    with transaction.atomic():
        StoredPrompt.objects.create(server="s", name="p", messages=MESSAGES)
    assert announced == [("s", {"prompts"})]
