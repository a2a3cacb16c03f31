"""The process start: the listening socket for ``::`` (IPv6 and IPv4 on one socket,
IPv4 alone without IPv6), and the startup heap frozen out of the collector's walks."""

from __future__ import annotations

import errno
import socket
import subprocess
import sys
import textwrap

import pytest

from mcp_operator.serve import process


def test_the_all_addresses_socket_takes_ipv4_and_ipv6_connections() -> None:
    with process.dual_stack_socket(0) as listener:
        assert listener.family == socket.AF_INET6
        assert listener.getsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY) == 0
        listener.listen()
        port = listener.getsockname()[1]
        for address in ("127.0.0.1", "::1"):
            with socket.create_connection((address, port), timeout=5):
                accepted, peer = listener.accept()
                accepted.close()
            assert address in peer[0]  # IPv4 shows as ::ffff:127.0.0.1


def test_without_ipv6_in_the_kernel_the_socket_is_ipv4_on_every_address(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real_socket = socket.socket

    def no_ipv6(family: int = socket.AF_INET, *args: object) -> socket.socket:
        if family == socket.AF_INET6:
            raise OSError(errno.EAFNOSUPPORT, "Address family not supported by protocol")
        return real_socket(family, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(process.socket, "socket", no_ipv6)
    with process.dual_stack_socket(0) as listener:
        assert listener.family == socket.AF_INET
        assert listener.getsockname()[0] == "0.0.0.0"


def test_a_served_process_freezes_its_startup_heap_and_still_frees_later_cycles() -> None:
    # In a child process: freezing the test runner's own heap would change every test after.
    program = textwrap.dedent(
        """
        import gc, weakref
        from mcp_operator.serve import process

        class Node:
            pass

        async def main() -> int:
            frozen = gc.get_freeze_count()
            node = Node()
            node.self = node  # a cycle made while serving
            freed = []
            weakref.finalize(node, freed.append, True)
            del node
            gc.collect()
            print(frozen, freed)
            return 0

        raise SystemExit(process.run(main(), "warning"))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=60, check=True
    )
    frozen, freed = done.stdout.split(" ", 1)
    assert int(frozen) > 10_000, done.stdout  # the imported modules' objects
    assert freed.strip() == "[True]", done.stdout
