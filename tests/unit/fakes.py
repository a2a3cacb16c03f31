"""Fakes for unit tests only: an in-memory API server behind ``Kube``'s verbs, and a clock.

:class:`FakeKube` is a :class:`~mcp_operator.kube.Kube` (the protocol the controllers are
written against; mypy checks it here, see :func:`_is_a_kube`): it keeps objects in a dict and
answers the verbs the controllers use (get, list, apply, create, replace, delete,
patch_status, read_secret_key, post_event) the way the real client does, errors included (an
apply over an object the owner does not control is refused with the real client's own
ownership rule). A test that needs one verb to answer otherwise subclasses it.

:class:`FakeClock` is the worker's :class:`~mcp_operator.controller.worker.Clock` on virtual
time: tests move it forward instead of sleeping.
"""

from __future__ import annotations

import asyncio
import base64
import copy
import datetime
import ssl
from collections.abc import Callable, Mapping
from typing import Any

from mcp_operator import OPT_IN_LABEL, OPT_IN_VALUE
from mcp_operator.kube import (
    Kube,
    KubeError,
    NameConflict,
    NotFound,
    Resource,
    SecretReferenceError,
    opted_in,
    ownership,
)
from mcp_operator.kube.resources import SECRETS
from mcp_operator.kube.secrets import not_opted_in

Key = tuple[str, str | None, str]


class FakeKube:
    """Objects by (plural, namespace, name); server-side apply replaces what we render."""

    in_cluster = True
    server = "https://fake-apiserver"

    def __init__(self) -> None:
        self.objects: dict[Key, dict[str, Any]] = {}
        self.events: list[dict[str, Any]] = []
        self.applied: list[tuple[str, str]] = []
        self.deleted: list[tuple[str, str]] = []

    def put(self, resource: Resource, body: Mapping[str, Any]) -> dict[str, Any]:
        """Store an object as if some other client had created it."""
        stored = copy.deepcopy(dict(body))
        metadata = stored.setdefault("metadata", {})
        metadata.setdefault("generation", 1)
        metadata.setdefault("uid", f"uid-{metadata['name']}")
        self.objects[(resource.plural, metadata.get("namespace"), metadata["name"])] = stored
        return stored

    def put_secret(
        self, namespace: str, name: str, data: Mapping[str, str], *, opted_in: bool = True
    ) -> None:
        """A Secret, labelled for MCP servers unless ``opted_in`` is false."""
        encoded = {key: base64.b64encode(value.encode()).decode() for key, value in data.items()}
        labels = {OPT_IN_LABEL: OPT_IN_VALUE} if opted_in else {}
        metadata = {"name": name, "namespace": namespace, "labels": labels}
        self.put(SECRETS, {"metadata": metadata, "data": encoded})

    def proxy_credentials(self) -> tuple[dict[str, str], ssl.SSLContext | bool]:
        return {"Authorization": "Bearer fake"}, True

    async def api_server_endpoints(self) -> frozenset[tuple[str, int | None]]:
        return frozenset({("10.96.0.1", 443)})

    async def request(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        content_type: str = "application/json",
        params: Mapping[str, str] | None = None,
    ) -> Any:
        """The fake serves the verbs, not paths: a test that needs a path subclasses it."""
        raise NotFound(404, f"{method} {path}: the fake API server serves no paths")

    async def close(self) -> None:
        return None

    async def get(self, resource: Resource, namespace: str | None, name: str) -> Any | None:
        found = self.objects.get((resource.plural, namespace, name))
        return copy.deepcopy(found) if found is not None else None

    async def list(
        self, resource: Resource, namespace: str | None, *, label_selector: str | None = None
    ) -> list[Any]:
        wanted = dict(pair.split("=", 1) for pair in (label_selector or "").split(",") if pair)
        return [
            copy.deepcopy(body)
            for (plural, ns, _), body in self.objects.items()
            if plural == resource.plural
            and ns == namespace
            and wanted.items() <= (body["metadata"].get("labels") or {}).items()
        ]

    async def apply(self, resource: Resource, manifest: Mapping[str, Any]) -> Any:
        """As the real client: an object of the name that the owner does not control is
        refused with :class:`NameConflict` and left as it is (:mod:`.ownership`)."""
        metadata = manifest["metadata"]
        key = (resource.plural, metadata.get("namespace"), metadata["name"])
        old = self.objects.get(key)
        owner = ownership.controller_reference(manifest)
        assert owner is not None, "only children with a controller ownerReference are applied"
        found = ownership.decide(old, str(owner.get("uid") or ""))
        if isinstance(found, ownership.Foreign):
            holder = f"{owner.get('kind')}/{owner.get('name')}"
            kind = str(manifest.get("kind"))
            message = ownership.conflict_message(
                kind, metadata.get("namespace"), metadata["name"], holder, found
            )
            raise NameConflict(message)
        self.applied.append((resource.plural, metadata["name"]))
        stored = copy.deepcopy(dict(manifest))
        generation = 1
        if old is not None:
            same = old.get("spec") == stored.get("spec")
            generation = old["metadata"]["generation"] + (0 if same else 1)
            stored["status"] = old.get("status")
        stored["metadata"].update(generation=generation, uid=f"uid-{metadata['name']}")
        self.objects[key] = stored
        return copy.deepcopy(stored)

    async def create(self, resource: Resource, manifest: Mapping[str, Any]) -> Any:
        """As the API server: 409 when an object of the name exists."""
        metadata = manifest["metadata"]
        if (resource.plural, metadata.get("namespace"), metadata["name"]) in self.objects:
            raise KubeError(409, f'{resource.plural} "{metadata["name"]}" already exists')
        return copy.deepcopy(self.put(resource, manifest))

    async def replace(self, resource: Resource, manifest: Mapping[str, Any]) -> Any:
        """As the API server: 404 when absent, 409 when ``resourceVersion`` is not the
        stored one (optimistic concurrency)."""
        metadata = manifest["metadata"]
        key = (resource.plural, metadata.get("namespace"), metadata["name"])
        old = self.objects.get(key)
        if old is None:
            raise NotFound(404, f'{resource.plural} "{metadata["name"]}" not found')
        version = metadata.get("resourceVersion")
        if version is not None and version != old["metadata"].get("resourceVersion"):
            raise KubeError(409, "the object has been modified")
        stored = self.put(resource, manifest)
        stored["metadata"]["resourceVersion"] = str(int(version or 0) + 1)
        return copy.deepcopy(stored)

    async def delete(self, resource: Resource, namespace: str | None, name: str) -> bool:
        self.deleted.append((resource.plural, name))
        return self.objects.pop((resource.plural, namespace, name), None) is not None

    async def delete_owned(
        self, resource: Resource, namespace: str | None, name: str, owner_uid: str
    ) -> bool:
        """As the real client: only an object whose controller is ``owner_uid`` goes."""
        found = self.objects.get((resource.plural, namespace, name))
        if ownership.decide(found, owner_uid) != ownership.OWNED:
            return False
        return await self.delete(resource, namespace, name)

    async def patch_status(
        self, resource: Resource, namespace: str, name: str, status: Mapping[str, Any]
    ) -> Any:
        stored = self.objects.get((resource.plural, namespace, name))
        if stored is None:
            raise NotFound(404, f'{resource.plural} "{name}" not found')
        merged = dict(stored.get("status") or {})
        for field, value in status.items():
            if value is None:
                merged.pop(field, None)
            else:
                merged[field] = copy.deepcopy(value)
        stored["status"] = merged
        return copy.deepcopy(stored)

    async def read_secret_key(self, namespace: str, name: str, key: str) -> str:
        secret = self.objects.get((SECRETS.plural, namespace, name))
        if secret is None:
            raise SecretReferenceError(
                "SecretNotFound", f"Secret {namespace}/{name} (key {key!r}) was not found"
            )
        if not opted_in(secret):
            raise not_opted_in(namespace, name)
        data = secret.get("data") or {}
        if key not in data:
            raise SecretReferenceError(
                "SecretKeyNotFound", f"Secret {namespace}/{name} has no key {key!r}"
            )
        return base64.b64decode(data[key]).decode()

    async def post_event(
        self, involved: Mapping[str, Any], *, type_: str, reason: str, message: str
    ) -> None:
        self.events.append(
            {"involved": dict(involved), "type": type_, "reason": reason, "message": message}
        )


def _is_a_kube(fake: FakeKube) -> Kube:
    """Never called: mypy (``make lint``) checks that the fake has every verb of the protocol,
    with the client's signatures."""
    return fake


class FakeClock:
    """Virtual time: waits end when :meth:`advance` moves the time past their deadline."""

    START = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)

    def __init__(self) -> None:
        self.time = 0.0
        self._deadlines: list[tuple[float, asyncio.Event]] = []

    def now(self) -> datetime.datetime:
        return self.START + datetime.timedelta(seconds=self.time)

    async def wait(self, wake: asyncio.Event, delay: float | None) -> None:
        if delay is None:
            await wake.wait()
            return
        due = asyncio.Event()
        entry = (self.time + delay, due)
        self._deadlines.append(entry)
        woken = asyncio.ensure_future(wake.wait())
        timed_out = asyncio.ensure_future(due.wait())
        try:
            await asyncio.wait({woken, timed_out}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            woken.cancel()
            timed_out.cancel()
            if entry in self._deadlines:
                self._deadlines.remove(entry)

    async def advance(self, seconds: float) -> None:
        """Move the time forward by ``seconds``, letting every wait due on the way end."""
        end = self.time + seconds
        while True:
            await settle()
            due = [deadline for deadline, _ in self._deadlines if deadline <= end]
            if not due:
                break
            self._fire(min(due))
        self.time = end
        await settle()

    async def run_until(self, predicate: Callable[[], bool], *, within: float = 3600.0) -> None:
        """Move the time from deadline to deadline until ``predicate`` holds."""
        limit = self.time + within
        while True:
            await settle()
            if predicate():
                return
            pending = [deadline for deadline, _ in self._deadlines]
            assert pending, "condition not reached, and nothing is waiting for the time"
            assert min(pending) <= limit, f"condition not reached within {within} s"
            self._fire(min(pending))

    def _fire(self, deadline: float) -> None:
        self.time = max(self.time, deadline)
        for when, due in list(self._deadlines):
            if when <= deadline:
                due.set()


async def settle() -> None:
    """Let every task that can run, run (no real time passes)."""
    for _ in range(50):
        await asyncio.sleep(0)
