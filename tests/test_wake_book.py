"""The waking decisions without a server (the same book drives threads and asyncio): whom a
message wakes, which keys are (un)subscribed, what a lost connection or a refusal changes.
The end-to-end behaviour against a real server is in test_waking.py."""

from __future__ import annotations

from turbolock._flows.wake_book import Ticket, WakeBook
from turbolock._wire.fair_scripts import UNKNOWN_PLACE


def _ticket(key: bytes, woken: list[Ticket]) -> Ticket:
    ticket = Ticket(key, lambda: woken.append(ticket))
    return ticket


def test_a_message_wakes_the_longest_waiting_ticket_not_yet_woken() -> None:
    book, woken = WakeBook(), []
    first, second, other = _ticket(b"k", woken), _ticket(b"k", woken), _ticket(b"o", woken)
    assert book.join(first) == ([b"k"], [])
    assert book.join(second) == ([], [])  # one subscription per key
    assert book.join(other) == ([b"o"], [])
    book.on_reply([b"smessage", b"k", b""])
    book.on_reply([b"smessage", b"k", b""])
    assert woken == [first, second]
    assert book.consume(first) and not book.consume(first)


def test_fair_waiters_are_woken_by_their_place_in_the_servers_queue() -> None:
    # Joined in another order than the server queued them (two threads racing): a release wakes
    # the first in the server's queue; one whose place is not known yet comes after the others.
    book, woken = WakeBook(), []
    third, unknown, first, second = (_ticket(b"k", woken) for _ in range(4))
    for ticket, rank in ((third, 3), (unknown, UNKNOWN_PLACE), (first, 1), (second, 2)):
        book.join(ticket)
        ticket.rank = rank
    for _ in range(4):
        book.on_reply([b"smessage", b"k", b""])
    assert woken == [first, second, third, unknown]


def test_a_wake_up_left_unused_goes_to_the_next_waiter() -> None:
    book, woken = WakeBook(), []
    first, second = _ticket(b"k", woken), _ticket(b"k", woken)
    book.join(first)
    book.join(second)
    book.on_reply([b"smessage", b"k", b""])
    book.leave(first)  # woken, but gave up before trying
    assert woken == [first, second]


def test_a_confirmed_subscription_wakes_its_waiters_and_a_lost_connection_wakes_all() -> None:
    book, woken = WakeBook(), []
    ticket = _ticket(b"k", woken)
    book.join(ticket)
    assert not book.subscribed(b"k")
    book.on_reply([b"ssubscribe", b"k", 1])
    assert book.subscribed(b"k") and woken == [ticket]  # a message before it may be lost
    book.consume(ticket)
    book.disconnected()
    assert not book.subscribed(b"k") and woken == [ticket, ticket]
    assert book.resubscribe() == [b"k"]


def test_idle_keys_stay_subscribed_up_to_the_limit() -> None:
    book, woken = WakeBook(idle_limit=1), []
    tickets = [_ticket(key, woken) for key in (b"a", b"b", b"c")]
    for ticket in tickets:
        book.join(ticket)
        book.on_reply([b"ssubscribe", ticket.key, 1])
    assert book.leave(tickets[0]) == []
    assert book.leave(tickets[1]) == [b"a"]  # the least recently used idle key goes
    book.on_reply([b"sunsubscribe", b"a", 2])
    assert b"a" not in book.state
    again = _ticket(b"b", woken)
    assert book.join(again) == ([], [])  # still subscribed: no round trip to be heard
    assert book.subscribed(b"b")


def test_a_key_subscribed_again_before_its_unsubscription_is_confirmed_stays_subscribed() -> None:
    book, woken = WakeBook(idle_limit=0), []
    ticket = _ticket(b"k", woken)
    book.join(ticket)
    assert book.leave(ticket) == [b"k"]  # left before its subscription was even confirmed
    again = _ticket(b"k", woken)
    assert book.join(again) == ([b"k"], [])
    # Nothing was confirmed yet: the first SSUBSCRIBE's confirmation comes, then the
    # SUNSUBSCRIBE's (the server was unsubscribed), then the second SSUBSCRIBE's.
    book.on_reply([b"ssubscribe", b"k", 1])
    assert not book.subscribed(b"k")
    book.on_reply([b"sunsubscribe", b"k", 0])
    assert not book.subscribed(b"k")
    book.on_reply([b"ssubscribe", b"k", 1])
    assert book.subscribed(b"k")


def test_a_refused_subscription_stops_every_wait_for_one() -> None:
    book, woken = WakeBook(), []
    ticket = _ticket(b"k", woken)
    book.join(ticket)
    book.on_reply(Exception("NOPERM this user has no permissions to access one of the channels"))
    assert book.refusal is not None and not book.subscribed(b"k")
    assert book.join(_ticket(b"other", woken)) == ([], [])  # never asked again


def test_a_passing_refusal_leaves_later_waiters_subscribing() -> None:
    # A slow script (BUSY), a restart loading its data (LOADING): those waiters poll, the next
    # ones subscribe again. BUSY was taken for a refusal for good (found in review); the NOPERM
    # case above is the control.
    for error in ("BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.",
                  "LOADING Redis is loading the dataset in memory", "MASTERDOWN Link with MASTER is down"):
        book, woken = WakeBook(), []
        book.join(_ticket(b"k", woken))
        book.on_reply(Exception(error))
        assert book.refusal is None and not book.subscribed(b"k")
        assert book.join(_ticket(b"k", woken)) == ([b"k"], [])
        assert book.join(_ticket(b"other", woken)) == ([b"other"], [])


def test_a_new_connection_forgets_a_key_left_before_it_was_made() -> None:
    # A waiter joins while no connection is up (its SSUBSCRIBE waits for the connection) and is
    # cancelled before the connection is made: the new connection subscribes only the keys still
    # waited for, and the left key must not stay "subscribing" for its next waiter.
    book, woken = WakeBook(), []
    left, stays = _ticket(b"left", woken), _ticket(b"stays", woken)
    assert book.join(left) == ([b"left"], [])
    assert book.join(stays) == ([b"stays"], [])
    book.leave(left)
    assert book.resubscribe() == [b"stays"]
    assert not book.pending(b"left") and not book.listening(b"left")
    assert book.join(_ticket(b"left", woken)) == ([b"left"], [])  # asked for again, on this connection
    assert book.pending(b"left")


def test_a_confirmation_after_an_error_for_another_key_is_not_left_subscribed() -> None:
    # X and Y asked in one write; the server answers MOVED for X (its slot moved) and confirms Y.
    # The error, which RESP2 does not tie to a key, made the book forget Y's ask, so Y's
    # confirmation was ignored and nothing ever unsubscribed Y (found in review): its waiter
    # present, Y is subscribed and woken; gone, Y is unsubscribed.
    for waiter_stays in (True, False):
        book, woken = WakeBook(), []
        x, y = _ticket(b"x", woken), _ticket(b"y", woken)
        book.join(x)
        book.join(y)
        assert book.on_reply(Exception("MOVED 1234 127.0.0.1:7001")) == []
        if not waiter_stays:
            assert book.leave(y) == []
        stray = book.on_reply([b"ssubscribe", b"y", 1])
        if waiter_stays:
            assert stray == [] and book.subscribed(b"y") and y in woken
        else:
            assert stray == [b"y"] and not book.subscribed(b"y")
            book.on_reply([b"sunsubscribe", b"y", 0])
            assert not book.listening(b"y") and book.join(_ticket(b"y", woken)) == ([b"y"], [])
