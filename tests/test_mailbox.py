"""The lean queue an open stream's events (and, under daphne, a request's messages) wait in: items
in order, a reader woken by the next one, a timeout that says so, and no item lost to a reader
cancelled as it was woken."""

from __future__ import annotations

import asyncio

import pytest

from mcp_server.http.mailbox import TIMED_OUT, Mailbox


async def test_items_come_out_in_the_order_they_went_in():
    mailbox = Mailbox()
    assert mailbox.empty() and mailbox.qsize() == 0
    for item in ("a", "b", None):
        mailbox.put_nowait(item)
    assert mailbox.qsize() == 3
    assert [await mailbox.get(), mailbox.get_nowait(), await mailbox.get()] == ["a", "b", None]
    with pytest.raises(asyncio.QueueEmpty):
        mailbox.get_nowait()


async def test_a_waiting_reader_is_woken_by_the_next_item():
    mailbox = Mailbox()
    reader = asyncio.ensure_future(mailbox.get())
    await asyncio.sleep(0)
    assert not reader.done()
    mailbox.put_nowait("event")
    assert await reader == "event"
    assert mailbox.empty()


async def test_a_timeout_that_passes_first_is_said_and_an_item_that_comes_first_is_returned():
    mailbox = Mailbox()
    assert await mailbox.get(0.01) is TIMED_OUT
    reader = asyncio.ensure_future(mailbox.get(60))
    await asyncio.sleep(0)
    mailbox.put_nowait("event")
    assert await reader == "event"
    mailbox.put_nowait("waiting")
    assert await mailbox.get(0) == "waiting"  # an item already there, whatever the timeout


async def test_readers_are_woken_first_come_first_served():
    mailbox = Mailbox()
    first = asyncio.ensure_future(mailbox.get())
    second = asyncio.ensure_future(mailbox.get())
    await asyncio.sleep(0)
    mailbox.put_nowait(1)
    mailbox.put_nowait(2)
    assert (await first, await second) == (1, 2)


async def test_a_reader_cancelled_as_it_was_woken_leaves_its_item_to_the_next():
    mailbox = Mailbox()
    first = asyncio.ensure_future(mailbox.get())
    second = asyncio.ensure_future(mailbox.get())
    await asyncio.sleep(0)
    mailbox.put_nowait("only")  # wakes the first...
    first.cancel()  # ...which is cancelled before it runs
    assert await second == "only"
    assert first.cancelled()


async def test_a_cancelled_reader_takes_nothing():
    mailbox = Mailbox()
    reader = asyncio.ensure_future(mailbox.get())
    await asyncio.sleep(0)
    reader.cancel()
    with pytest.raises(asyncio.CancelledError):
        await reader
    mailbox.put_nowait("kept")
    assert mailbox.get_nowait() == "kept"


def test_it_is_always_true_as_daphne_tests_its_queue():
    assert Mailbox()

