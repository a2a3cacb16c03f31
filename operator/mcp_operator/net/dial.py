"""Opening a TCP connection to a host: every address judged, the allowed ones raced.

One job: from a host, a port and an :class:`~mcp_operator.net.egress.EgressPolicy` to a
connected socket. The name is resolved here (:func:`~mcp_operator.net.egress.allowed_addresses`
drops every address the policy refuses, so each address tried was judged at the moment of
connecting) and the allowed addresses are tried with Happy Eyeballs (RFC 8305, through
``aiohappyeyeballs``, made for addresses resolved by the caller): families interleaved, and
the next address started after :data:`NEXT_ADDRESS_DELAY` while the previous one still
tries. So an address that never answers (a black-holed IPv6 route, a dead node) costs a
quarter of a second, not the caller's whole deadline. The deadline itself is the caller's.

The pool (:mod:`~mcp_operator.net.pool`) connects through :func:`dial`.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Awaitable, Callable

import aiohappyeyeballs

from mcp_operator.net.egress import EgressPolicy, allowed_addresses

NEXT_ADDRESS_DELAY = 0.25
"""Seconds an address has to itself before the next one is tried alongside (RFC 8305's
recommended 250 ms)."""

Resolver = Callable[[str, int], Awaitable[list[str]]]
"""A host and port to its addresses, in the order to try them."""


async def resolve(host: str, port: int) -> list[str]:
    """The addresses ``host`` resolves to, in the resolver's order, without repeats."""
    found = await asyncio.get_running_loop().getaddrinfo(
        host.strip("[]"), port, type=socket.SOCK_STREAM
    )
    return list(dict.fromkeys(str(info[4][0]) for info in found))


async def dial(
    host: str, port: int, *, egress: EgressPolicy | None, resolver: Resolver | None = None
) -> socket.socket:
    """A connected, non-blocking TCP socket to ``host``; ``egress`` ``None`` only for a
    destination the operator's own configuration names (the API server).

    Raises:
        Refused: the policy refuses the host or every address it has.
        OSError: the name does not resolve, or no address could be connected.
    """
    if egress is not None:
        addresses = await allowed_addresses(egress, host, port, resolver)
    else:
        addresses = await (resolver or resolve)(host, port)
    return await aiohappyeyeballs.start_connection(
        [_address_info(address, port) for address in addresses],
        happy_eyeballs_delay=NEXT_ADDRESS_DELAY,
    )


def _address_info(address: str, port: int) -> aiohappyeyeballs.AddrInfoType:
    """``address`` is an IP address (the resolver's or the URL's literal)."""
    if ":" in address:
        return (socket.AF_INET6, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", (address, port, 0, 0))
    return (socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", (address, port))
