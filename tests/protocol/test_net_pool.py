"""The wire's promises (net/pool.py, net/dial.py) against real HTTP servers on loopback.

A request that may have been read is never sent twice; interim answers are never taken for
the answer; connections per origin are capped; a black-holed address costs a quarter of a
second, not the caller's deadline; every address tried passes the egress policy.
"""

from __future__ import annotations

import asyncio
import socket
import time

import pytest

from mcp_operator.net.egress import EgressPolicy
from mcp_operator.net.headers import header_refusal
from mcp_operator.net.http1 import (
    MAX_INTERIM_ANSWERS,
    BrokenHTTP,
    ConnectFailed,
    ConnectionLost,
    NotSent,
)
from mcp_operator.net.pool import Http1Pool
from tests.support.http_peer import Behaviour, black_hole, http_peer

LOOPBACK = EgressPolicy(allow_loopback=True)
EARLY_HINTS = b"HTTP/1.1 103 Early Hints\r\nlink: </style.css>; rel=preload\r\n\r\n"
CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"


async def test_a_post_the_server_read_before_dropping_the_connection_reaches_it_once() -> None:
    """A Pod killed mid-call: the server read the request to its end and hung up without a
    byte of answer, on a kept-alive connection. The pool cannot know the call did not run,
    so it does not send it again; the caller learns that it may have been delivered."""
    async with http_peer() as peer:
        pool = Http1Pool(egress=LOOPBACK)
        answer = await pool.request("POST", peer.url, {}, b'{"id":1}')
        assert await answer.aread() == b'{"id":1}'
        peer.behaviour.drops = 1
        with pytest.raises(ConnectionLost) as caught:
            await pool.request("POST", peer.url, {}, b'{"id":2}')
        assert caught.value.may_have_been_delivered
        assert caught.value.kind == "lost"
        assert "may have been delivered" in str(caught.value)
        assert [request.body for request in peer.requests] == [b'{"id":1}', b'{"id":2}']
        await pool.aclose()


async def test_a_post_on_a_new_connection_that_drops_is_not_sent_again_either() -> None:
    async with http_peer(Behaviour(drops=1)) as peer:
        pool = Http1Pool(egress=LOOPBACK)
        with pytest.raises(ConnectionLost) as caught:
            await pool.request("POST", peer.url, {}, b'{"id":1}')
        assert caught.value.may_have_been_delivered
        assert len(peer.requests) == 1
        await pool.aclose()


async def test_an_idempotent_request_on_a_dropped_kept_alive_connection_goes_again() -> None:
    """GET (and HEAD, OPTIONS, DELETE) done twice is done once: it is sent again on a new
    connection, and the caller gets the answer."""
    async with http_peer() as peer:
        pool = Http1Pool(egress=LOOPBACK)
        await (await pool.request("GET", peer.url, {})).aread()
        peer.behaviour.drops = 1  # the second attempt is answered
        answer = await pool.request("GET", peer.url, {})
        assert answer.status_code == 200
        await answer.aread()
        assert [request.method for request in peer.requests] == ["GET", "GET", "GET"]
        assert [request.connection for request in peer.requests] == [1, 1, 2]
        await pool.aclose()


async def test_a_request_that_never_left_says_so() -> None:
    with black_hole() as port:
        pass  # closed: nothing listens on the port any more
    pool = Http1Pool(egress=LOOPBACK)
    with pytest.raises(ConnectFailed) as caught:
        await pool.request("POST", f"http://127.0.0.2:{port}/mcp", {}, b"{}")
    assert not caught.value.may_have_been_delivered
    assert caught.value.kind == "connect"
    await pool.aclose()


async def test_after_a_dropped_post_the_next_one_goes_on_a_new_connection() -> None:
    async with http_peer() as peer:
        pool = Http1Pool(egress=LOOPBACK)
        await (await pool.request("POST", peer.url, {}, b"1")).aread()
        peer.behaviour.drops = 1
        with pytest.raises(ConnectionLost):  # the server reads the next request and hangs up
            await pool.request("POST", peer.url, {}, b"2")
        assert await (await pool.request("POST", peer.url, {}, b"3")).aread() == b"3"
        assert [(r.body, r.connection) for r in peer.requests] == [(b"1", 1), (b"2", 1), (b"3", 2)]
        await pool.aclose()


async def test_every_request_gets_its_own_answer_after_early_hints() -> None:
    """A 103 before every answer (CDNs send them): never taken as the answer, so the real
    one is not left unread on the connection for the next request."""
    async with http_peer(Behaviour(interim=[EARLY_HINTS], interim_pause=0.05)) as peer:
        pool = Http1Pool(egress=LOOPBACK)
        for number in range(5):
            body = b'{"id":%d}' % number
            answer = await pool.request("POST", peer.url, {}, body)
            assert answer.status_code == 200
            assert "link" not in answer.headers
            assert await answer.aread() == body
        assert peer.connections == 1  # every one on the reused connection
        await pool.aclose()


async def test_several_interim_answers_arriving_apart_are_read_past() -> None:
    behaviour = Behaviour(interim=[CONTINUE, EARLY_HINTS, EARLY_HINTS], interim_pause=0.05)
    async with http_peer(behaviour) as peer:
        pool = Http1Pool(egress=LOOPBACK)
        for number in range(3):
            answer = await pool.request("POST", peer.url, {}, b"%d" % number)
            assert (answer.status_code, await answer.aread()) == (200, b"%d" % number)
        assert peer.connections == 1
        await pool.aclose()


async def test_endless_interim_answers_are_a_broken_answer() -> None:
    interim = [EARLY_HINTS] * (MAX_INTERIM_ANSWERS + 1)
    async with http_peer(Behaviour(interim=interim)) as peer:
        pool = Http1Pool(egress=LOOPBACK)
        with pytest.raises(BrokenHTTP, match="interim"):
            await pool.request("POST", peer.url, {}, b"{}")
        assert pool.connections == 0
        await pool.aclose()


async def test_an_expect_header_is_refused() -> None:
    assert header_refusal("Expect", "100-continue") is not None
    pool = Http1Pool(egress=LOOPBACK)
    with pytest.raises(ValueError, match="interim answer"):
        await pool.request("POST", "http://127.0.0.1:1/mcp", {"expect": "100-continue"}, b"{}")
    await pool.aclose()


async def test_open_connections_per_origin_are_capped_and_waiters_bounded_by_deadline() -> None:
    hold = asyncio.Event()
    async with http_peer(Behaviour(hold=hold)) as peer:
        pool = Http1Pool(egress=LOOPBACK, max_connections=2)

        async def call(number: int) -> bytes:
            answer = await pool.request("POST", peer.url, {}, b"%d" % number)
            return await answer.aread()

        calls = [asyncio.get_running_loop().create_task(call(n)) for n in range(6)]
        await asyncio.wait_for(peer.received(2), 5)
        with pytest.raises(TimeoutError):  # a caller whose deadline ends while it waits
            async with asyncio.timeout(0.2):
                await pool.request("POST", peer.url, {}, b"late")
        assert len(peer.requests) == 2
        assert pool.connections == 2
        hold.set()
        assert sorted(await asyncio.gather(*calls)) == [b"%d" % n for n in range(6)]
        assert peer.peak_connections == 2
        assert peer.connections == 2
        assert b"late" not in [request.body for request in peer.requests]
        await pool.aclose()


async def test_a_caller_waiting_for_a_connection_when_the_pool_closes_learns_it_was_not_sent() -> (
    None
):
    hold = asyncio.Event()
    async with http_peer(Behaviour(hold=hold)) as peer:
        pool = Http1Pool(egress=LOOPBACK, max_connections=1)
        busy = asyncio.get_running_loop().create_task(pool.request("POST", peer.url, {}, b"1"))
        await asyncio.wait_for(peer.received(1), 5)
        waiting = asyncio.get_running_loop().create_task(pool.request("POST", peer.url, {}, b"2"))
        await asyncio.sleep(0)  # it queues for the one connection
        await pool.aclose()
        with pytest.raises(NotSent) as caught:
            await waiting
        assert not caught.value.may_have_been_delivered
        assert [request.body for request in peer.requests] == [b"1"]
        busy.cancel()
        hold.set()


async def test_close_waits_until_every_connection_is_closed() -> None:
    """In use or idle, every connection's socket is closed when ``aclose`` returns (not just
    scheduled to be), and the server sees the end."""
    hold = asyncio.Event()
    async with http_peer() as peer:
        pool = Http1Pool(egress=LOOPBACK)
        peer.behaviour.hold = hold
        first = [asyncio.get_running_loop().create_task(pool.request("POST", peer.url, {}, b"0"))
                 for _ in range(2)]  # fmt: skip
        await asyncio.wait_for(peer.received(2), 5)
        peer.behaviour.hold = None
        hold.set()
        for answer in await asyncio.gather(*first):
            await answer.aread()  # two idle connections
        hold.clear()
        peer.behaviour.hold = hold
        pending = asyncio.get_running_loop().create_task(pool.request("POST", peer.url, {}, b"1"))
        await asyncio.wait_for(peer.received(3), 5)  # one in use, one idle
        sockets = [connection.writer.get_extra_info("socket") for connection in pool._open]
        assert len(sockets) == 2
        await pool.aclose()
        assert [sock.fileno() for sock in sockets] == [-1, -1]
        assert pool.connections == 0
        await asyncio.wait_for(peer.closed_by_client.wait(), 2)
        pending.cancel()
        hold.set()


async def test_a_black_holed_first_address_does_not_eat_the_deadline() -> None:
    """The name resolves to an address that never answers SYN (a full backlog on 127.0.0.2)
    and then to one that works (127.0.0.1, same port): Happy Eyeballs starts the second after
    a quarter of a second, so the request ends well within its deadline."""
    async with http_peer() as peer:
        with black_hole("127.0.0.2", peer.port):

            async def resolve(host: str, port: int) -> list[str]:
                return ["127.0.0.2", "127.0.0.1"]

            pool = Http1Pool(egress=LOOPBACK, resolver=resolve)
            started = time.monotonic()
            async with asyncio.timeout(5):
                answer = await pool.request("POST", f"http://upstream.test:{peer.port}/", {}, b"1")
                assert await answer.aread() == b"1"
            assert time.monotonic() - started < 2.0
            await pool.aclose()


async def test_every_address_tried_passes_the_egress_policy() -> None:
    """The first address of the name is one the policy refuses (here 127.0.0.2 on this port):
    it is never contacted, and the request goes to the allowed one."""
    refused = socket.socket()
    refused.bind(("127.0.0.2", 0))
    refused.listen(8)
    refused.setblocking(False)
    port = refused.getsockname()[1]
    try:
        async with http_peer(port=port) as peer:

            async def resolve(host: str, port: int) -> list[str]:
                return ["127.0.0.2", "127.0.0.1"]

            policy = LOOPBACK.with_refused([("127.0.0.2", port)])
            pool = Http1Pool(egress=policy, resolver=resolve)
            answer = await pool.request("POST", f"http://upstream.test:{peer.port}/", {}, b"1")
            assert await answer.aread() == b"1"
            with pytest.raises(BlockingIOError):
                refused.accept()
            await pool.aclose()
    finally:
        refused.close()


async def test_a_name_whose_every_address_is_refused_is_never_contacted() -> None:
    async def resolve(host: str, port: int) -> list[str]:
        return ["169.254.169.254", "127.0.0.1"]

    pool = Http1Pool(egress=EgressPolicy(), resolver=resolve)
    with pytest.raises(ConnectFailed, match="cloud metadata address") as caught:
        await pool.request("POST", "http://upstream.test:8080/", {}, b"{}")
    assert not caught.value.may_have_been_delivered
    await pool.aclose()


@pytest.mark.parametrize(
    ("name", "value", "sent"),
    [
        ("x-api-key", "s3cr3t value\twith tab", True),
        ("X-Caf\u00e9", "Tops3cret", False),  # not a token
        ("x key", "Tops3cret", False),
        ("x:key", "Tops3cret", False),
        ("", "Tops3cret", False),
        ("x-key", "a\r\nx-forged: 1", False),  # a second header smuggled in
        ("x-key", "caf\u00e9", True),  # Latin-1 is sent as it is
        ("x-key", "no\u00a0break", False),
        ("x-key", "\u20ac", False),  # beyond Latin-1
        ("Transfer-Encoding", "chunked", False),
        ("Host", "upstream.internal", True),
    ],
)
def test_which_headers_may_be_sent(name: str, value: str, sent: bool) -> None:
    why = header_refusal(name, value)
    assert (why is None) == sent
    if why is not None:
        assert value not in why  # a value is never shown: it may be a credential
