"""kopf's login answers: kopf takes the same credential back after it dropped it, and
repeated logins pause.

kopf's credential vault (its own code, not a stand-in: ``Vault`` is not exported, so it is
imported from where kopf keeps it) discards the credential a request was using when the
API server refused it or the HTTP session broke, then refuses a login answer equal to it.
"""

from __future__ import annotations

import asyncio

import kopf
import pytest
from kopf._cogs.structs.credentials import Vault

from mcp_operator.controller.login import MAX_PAUSE_SECONDS, QUIET_SECONDS, Logins
from mcp_operator.kube.credentials import Credential

TOKEN = Credential("https://10.0.0.1:6443", token="static-token", user="admin")


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def after_a_broken_session(first: kopf.ConnectionInfo, again: kopf.ConnectionInfo) -> int:
    """How many credentials kopf's vault holds after it dropped ``first`` (its session broke)
    and the login handler answered ``again``; a LoginError when it holds none."""
    vault = Vault()
    await vault.populate({"authenticate": first})
    key, info, _ = await anext(vault.extended(lambda info: info, "test"))

    async def login_again() -> None:
        await asyncio.sleep(0.01)  # kopf re-authenticates in its own task
        await vault.populate({"authenticate": again})

    relogin = asyncio.create_task(login_again())
    await vault.invalidate(key, info, exc=kopf.LoginError("SSL data stream is closed"))
    await relogin
    return len([item async for item in vault.extended(lambda info: info, "test")])


def test_kopf_refuses_a_login_answer_equal_to_the_one_it_dropped() -> None:
    """The premise: with the same answer twice kopf is out of credentials (every watch then
    fails and kopf stops); if kopf ever changes this, this test says so."""
    same = kopf.ConnectionInfo(server=TOKEN.server, token=TOKEN.token, scheme="Bearer")
    with pytest.raises(kopf.LoginError):
        asyncio.run(after_a_broken_session(same, same))


def test_the_same_credential_is_taken_back_after_a_broken_session() -> None:
    logins = Logins(Clock())
    first = logins.connection_info(TOKEN)
    again = logins.connection_info(TOKEN)
    assert (first.server, first.token, first.scheme) == (again.server, again.token, again.scheme)
    assert logins.count == 2
    assert asyncio.run(after_a_broken_session(first, again)) == 1


def test_connection_info_carries_the_credential() -> None:
    info = Logins().connection_info(TOKEN)
    assert (info.server, info.token, info.scheme, info.ca_data) == (
        TOKEN.server,
        "static-token",
        "Bearer",
        TOKEN.ca_pem,
    )
    assert info.certificate_data is None and info.expiration is None


def test_repeated_logins_pause_longer_and_a_quiet_minute_starts_over() -> None:
    clock = Clock()
    logins = Logins(clock)
    pauses = []
    for _ in range(9):
        pause = logins.pause()
        pauses.append(pause)
        clock.now += pause  # kopf asks again as soon as the answer is refused
    assert pauses == [0, 0, 1, 2, 4, 8, 16, MAX_PAUSE_SECONDS, MAX_PAUSE_SECONDS]
    clock.now += QUIET_SECONDS
    assert logins.pause() == 0
