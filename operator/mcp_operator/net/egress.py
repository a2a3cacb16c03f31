"""Where the operator's HTTP clients may connect: :class:`EgressPolicy`, pure and reusable.

An MCPServer names any URL, and the operator connects to it with its own
network position (inside the cluster, next to the API server, the nodes and
the cloud's metadata endpoint). The policy says which addresses that may be:

- always refused: unspecified (``0.0.0.0``, ``::``), link-local
  (``169.254.0.0/16``, ``fe80::/10``, where clouds serve instance metadata and
  credentials), multicast and reserved ranges, the metadata addresses
  (``169.254.169.254``, ``fd00:ec2::254``) and names (``metadata.google.internal``,
  ...), and the addresses given in ``refused_addresses`` (the API server's);
- refused unless allowed: loopback (``allow_loopback``) and private ranges
  (``allow_private``: RFC 1918, shared address space ``100.64.0.0/10``, unique
  local ``fc00::/7``), which is where cluster Services and nodes live;
- allowed: every other (public) address.

IPv4-mapped, 6to4 and NAT64 IPv6 addresses are judged by the IPv4 address inside.
This module decides only; :mod:`~mcp_operator.net.dial`, under every connection of
:mod:`~mcp_operator.net.pool`, applies the decision to the address each connection
actually goes to (after name resolution, and on every redirect hop a caller follows), so
a name that resolves differently later (DNS rebinding) gains nothing. Who may allow what
is the caller's business (the operator: a setting and a Namespace label; the ``probe``
command: flags).
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field

import anyio

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network

METADATA_ADDRESSES: frozenset[Address] = frozenset(
    {
        ipaddress.ip_address("169.254.169.254"),  # AWS, GCP, Azure, OpenStack, ...
        ipaddress.ip_address("169.254.170.2"),  # AWS ECS task credentials
        ipaddress.ip_address("100.100.100.200"),  # Alibaba Cloud
        ipaddress.ip_address("fd00:ec2::254"),  # AWS over IPv6
    }
)
"""Cloud instance-metadata endpoints: refused whatever else is allowed."""

METADATA_NAMES = frozenset(
    {"metadata.google.internal", "metadata.goog", "metadata", "instance-data.ec2.internal"}
)
"""Host names of metadata endpoints, refused before any name resolution."""

PRIVATE_NETWORKS: tuple[Network, ...] = tuple(
    ipaddress.ip_network(net)
    for net in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10", "fc00::/7")
)
"""Where in-cluster Services, Pods and nodes usually live."""

_NAT64 = ipaddress.ip_network("64:ff9b::/96")


@dataclass(frozen=True)
class EgressPolicy:
    """Which destinations a client may connect to. The default refuses all but public ones."""

    allow_private: bool = False
    """Private ranges (RFC 1918, ``100.64.0.0/10``, ``fc00::/7``): in-cluster Services, nodes."""
    allow_loopback: bool = False
    """Loopback (``127.0.0.0/8``, ``::1``): the operator's own Pod or machine."""
    refused_endpoints: frozenset[tuple[Address, int | None]] = field(default_factory=frozenset)
    """Refused whatever is allowed: the API server's address and port (``None``: any port),
    as the operator knows them."""

    def refusal(self, address: str, port: int | None = None) -> str | None:
        """Why a connection to ``address`` (an IP address) and ``port`` is refused, or ``None``."""
        try:
            ip: Address = ipaddress.ip_address(address.split("%", 1)[0])
        except ValueError:
            return "it is not an IP address"
        ip = _embedded_ipv4(ip)
        if ip in METADATA_ADDRESSES:
            return "it is a cloud metadata address"
        if (ip, None) in self.refused_endpoints or (ip, port) in self.refused_endpoints:
            return "it is the Kubernetes API server"
        if ip.is_unspecified:
            return "it is the unspecified address"
        if ip.is_loopback:
            return None if self.allow_loopback else "it is a loopback address"
        if ip.is_link_local:
            return "it is a link-local address"
        if ip.is_multicast or ip.is_reserved:
            return "it is a multicast or reserved address"
        if any(ip in net for net in PRIVATE_NETWORKS):
            return None if self.allow_private else "it is a private address"
        if not ip.is_global:
            return "it is not a public address"
        return None

    def host_refusal(self, host: str, port: int | None = None) -> str | None:
        """Why a URL's host is refused before name resolution (metadata names), or ``None``;
        an IP address literal is judged as :meth:`refusal` judges it."""
        name = host.strip("[]").rstrip(".").lower()
        if name in METADATA_NAMES:
            return "it is a cloud metadata host name"
        try:
            ipaddress.ip_address(name.split("%", 1)[0])
        except ValueError:
            return None
        return self.refusal(name, port)

    def with_refused(self, endpoints: Iterable[tuple[str, int | None]]) -> EgressPolicy:
        """This policy, also refusing ``endpoints`` (address, port or ``None`` for any);
        entries that are not IP addresses are skipped."""
        refused = set(self.refused_endpoints)
        for address, port in endpoints:
            try:
                ip = _embedded_ipv4(ipaddress.ip_address(address.split("%", 1)[0]))
            except ValueError:
                continue
            refused.add((ip, port))
        return EgressPolicy(self.allow_private, self.allow_loopback, frozenset(refused))


UNRESTRICTED_PRIVATE = EgressPolicy(allow_private=True)
"""Private ranges allowed (in-cluster destinations the operator itself chose)."""


def _embedded_ipv4(ip: Address) -> Address:
    """The IPv4 address inside an IPv4-mapped, 6to4 or NAT64 IPv6 address, else ``ip``."""
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return ip.ipv4_mapped
        if ip.sixtofour is not None:
            return ip.sixtofour
        if ip in _NAT64:
            return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return ip


class Refused(Exception):
    """A destination the policy refuses: ``host`` (with the address, when resolved) and why."""

    def __init__(self, host: str, why: str) -> None:
        super().__init__(f"{host} {why.removeprefix('it ')}")
        self.host = host
        self.why = why


async def allowed_addresses(
    policy: EgressPolicy,
    host: str,
    port: int,
    resolver: Callable[[str, int], Awaitable[list[str]]] | None = None,
) -> list[str]:
    """Resolve ``host`` (with ``resolver``, else the system's) and return the addresses
    ``policy`` allows for ``port`` (in the resolver's order; at least one).

    Raises:
        Refused: the host name, or every address it resolves to, is refused.
        OSError: the name does not resolve.
    """
    why = policy.host_refusal(host, port)
    if why is not None:
        raise Refused(host, why)
    addresses = _literal(host)
    if not addresses and resolver is not None:
        addresses = await resolver(host, port)
    elif not addresses:
        found = await anyio.getaddrinfo(host.strip("[]"), port, type=socket.SOCK_STREAM)
        addresses = list(dict.fromkeys(str(info[4][0]) for info in found))
    allowed = [address for address in addresses if policy.refusal(address, port) is None]
    if allowed:
        return allowed
    first = addresses[0] if addresses else host
    shown = host if first == host.strip("[]") else f"{host} ({first})"
    raise Refused(shown, policy.refusal(first, port) or "it has no address")


def _literal(host: str) -> list[str]:
    """``[host]`` when the host is an IP address (nothing to resolve), else ``[]``."""
    try:
        return [str(ipaddress.ip_address(host.strip("[]")))]
    except ValueError:
        return []
