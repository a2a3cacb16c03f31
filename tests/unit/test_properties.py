"""Property-based tests of the pure rules: globs, exposed names, the plan, the egress check.

Each property is checked against an oracle written here, independently of the code under
test, over inputs hypothesis generates (a bounded number per run: tests/conftest.py).
"""

from __future__ import annotations

import ipaddress
import random
from dataclasses import dataclass

from hypothesis import example, given
from hypothesis import strategies as st

from mcp_operator.mcp.naming import (
    MAX_EXPOSED_NAME_CHARS,
    default_prefix,
    exposed_name,
    is_valid_prefix,
    is_valid_tool_name,
    matches,
    plan,
)
from mcp_operator.net.egress import METADATA_ADDRESSES, PRIVATE_NETWORKS, EgressPolicy

NAME_CHARS = "abcXYZ019_.-"
TOOL_NAMES = st.text(alphabet=NAME_CHARS, min_size=1, max_size=140)
GLOBS = st.text(alphabet="ab.*?", min_size=1, max_size=8)
PREFIXES = st.from_regex(r"[a-z][a-z0-9_-]{0,31}", fullmatch=True)


@dataclass(frozen=True)
class Tool:
    name: str


def glob_oracle(pattern: str, name: str) -> bool:
    """Glob matching by recursion: ``*`` any run, ``?`` one character, the rest literally."""
    if not pattern:
        return not name
    head, rest = pattern[0], pattern[1:]
    if head == "*":
        return any(glob_oracle(rest, name[i:]) for i in range(len(name) + 1))
    if not name:
        return False
    return (head == "?" or head == name[0]) and glob_oracle(rest, name[1:])


@given(GLOBS, st.text(alphabet="ab.", max_size=10))
def test_a_glob_matches_exactly_what_the_recursive_oracle_matches(pattern: str, name: str) -> None:
    assert matches([pattern], name) == glob_oracle(pattern, name)


@given(PREFIXES, TOOL_NAMES)
def test_an_exposed_name_is_short_plain_and_deterministic(prefix: str, original: str) -> None:
    name = exposed_name(prefix, original)
    assert 1 <= len(name) <= MAX_EXPOSED_NAME_CHARS
    assert all(c.isascii() and (c.isalnum() or c in "_-") for c in name)
    assert name.startswith(prefix)
    assert name == exposed_name(prefix, original)


@given(st.text(max_size=300))
def test_the_default_prefix_of_any_name_is_a_valid_prefix(metadata_name: str) -> None:
    assert is_valid_prefix(default_prefix(metadata_name))


@given(PREFIXES, st.lists(TOOL_NAMES, max_size=30), st.randoms(use_true_random=False))
@example("a", [".", "_"], random.Random(0))  # both become a__: one exposed, one refused
def test_the_plan_exposes_every_valid_name_once_or_refuses_its_collision_in_any_order(
    prefix: str, names: list[str], shuffle: random.Random
) -> None:
    tools = [Tool(n) for n in names]
    result = plan(tools, prefix=prefix)
    valid = {n for n in names if is_valid_tool_name(n)}
    exposed = [t.name for t in result.exposed.values()]
    refused = [r.original_name for r in result.refused]
    # A collision refuses the later tool (never renames it): every valid name is exposed once
    # or refused, never both, and a refused one names the exposed tool that holds its name.
    assert sorted(exposed + refused) == sorted(valid)
    assert all(
        r.holder in exposed and result.exposed[r.wanted].name == r.holder for r in result.refused
    )
    assert len(set(result.exposed)) == len(result.exposed)
    shuffle.shuffle(tools)
    again = plan(tools, prefix=prefix)
    assert {n: t.name for n, t in again.exposed.items()} == {
        n: t.name for n, t in result.exposed.items()
    }


@given(st.ip_addresses(), st.booleans(), st.booleans())
def test_the_egress_check_agrees_with_an_oracle(
    ip: ipaddress.IPv4Address | ipaddress.IPv6Address, private: bool, loopback: bool
) -> None:
    policy = EgressPolicy(allow_private=private, allow_loopback=loopback)
    inner: ipaddress.IPv4Address | ipaddress.IPv6Address = ip
    if isinstance(ip, ipaddress.IPv6Address):
        inner = ip.ipv4_mapped or ip.sixtofour or ip
        if ip in ipaddress.ip_network("64:ff9b::/96"):
            inner = ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    refused = policy.refusal(str(ip)) is not None
    if inner in METADATA_ADDRESSES or inner.is_link_local or inner.is_unspecified:
        assert refused
    elif inner.is_loopback:
        assert refused != loopback
    elif inner.is_multicast or inner.is_reserved:
        assert refused
    elif any(inner in net for net in PRIVATE_NETWORKS):
        assert refused != private
    elif inner.is_global:
        assert not refused
    else:
        assert refused  # documentation, benchmarking, reserved: never a real server


@given(st.ip_addresses(v=4))
def test_an_ipv4_address_is_judged_the_same_in_any_ipv6_wrapping(ip: ipaddress.IPv4Address) -> None:
    policy = EgressPolicy()
    mapped = ipaddress.IPv6Address(f"::ffff:{ip}")
    nat64 = ipaddress.IPv6Address(int(ipaddress.IPv6Address("64:ff9b::")) | int(ip))
    assert policy.refusal(str(mapped)) == policy.refusal(str(ip))
    assert policy.refusal(str(nat64)) == policy.refusal(str(ip))
