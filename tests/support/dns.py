"""A minimal DNS client for tests on the host: one A query over UDP, the answer decoded.

The tests ask the local cluster's CoreDNS (on the node's bridge address) directly, to
see its own answer — a Pod resolves through its own resolver. Only what those checks
need: A records, the response code, the query id matched.
"""

from __future__ import annotations

import os
import socket

RCODES = {1: "FORMERR", 2: "SERVFAIL", 3: "NXDOMAIN", 4: "NOTIMP", 5: "REFUSED"}


class DnsError(LookupError):
    """The server answered with an error code; ``rcode`` is its name (``REFUSED``, ...)."""

    def __init__(self, rcode: str) -> None:
        super().__init__(rcode)
        self.rcode = rcode


def _encode(name: str) -> bytes:
    labels = name.rstrip(".").split(".")
    return b"".join(len(label).to_bytes(1, "big") + label.encode() for label in labels) + b"\0"


def _skip_name(packet: bytes, offset: int) -> int:
    """The offset after the (possibly compressed) name at ``offset``."""
    while True:
        length = packet[offset]
        if length == 0:
            return offset + 1
        if length & 0xC0 == 0xC0:
            return offset + 2
        offset += length + 1


def query_a(name: str, server: str, port: int = 53, timeout: float = 3.0) -> list[str]:
    """The A records of ``name`` from ``server`` (``[]`` for none); :class:`DnsError` when
    the server answers with an error, :class:`TimeoutError` when it does not answer."""
    query_id = int.from_bytes(os.urandom(2), "big")
    question = _encode(name) + b"\x00\x01\x00\x01"  # type A, class IN
    # Flags: recursion desired; one question.
    packet = query_id.to_bytes(2, "big") + b"\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00" + question
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.settimeout(timeout)
        sock.sendto(packet, (server, port))
        while True:
            answer, _ = sock.recvfrom(4096)
            if len(answer) >= 12 and int.from_bytes(answer[:2], "big") == query_id:
                break
    rcode = answer[3] & 0x0F
    if rcode != 0:
        raise DnsError(RCODES.get(rcode, f"rcode {rcode}"))
    count = int.from_bytes(answer[6:8], "big")
    offset = 12
    for _ in range(int.from_bytes(answer[4:6], "big")):
        offset = _skip_name(answer, offset) + 4
    addresses = []
    for _ in range(count):
        offset = _skip_name(answer, offset)
        kind = int.from_bytes(answer[offset : offset + 2], "big")
        length = int.from_bytes(answer[offset + 8 : offset + 10], "big")
        data = answer[offset + 10 : offset + 10 + length]
        if kind == 1 and length == 4:
            addresses.append(".".join(str(byte) for byte in data))
        offset += 10 + length
    return addresses
