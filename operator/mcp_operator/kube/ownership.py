"""Own what we create, nothing else: whether an existing object of a child's name is ours.

Every child the operator applies (Deployment, Service, ConfigMap, Pod, and any kind added
later) carries a controller ownerReference naming its owner by UID. Before
:meth:`mcp_operator.kube.client.KubeClient.apply` writes a child it reads the object of that name
and asks :func:`decide`:

- ``ABSENT``: nothing by that name; the child is created, and creation only (a name taken
  in between is a conflict, never a merge).
- ``OWNED``: the object's controller ownerReference carries this very owner's UID: it is
  ours to update.
- :class:`Foreign`: anything else (no controller, another controller, an object whose
  controller is another object of the same kind and name but another UID): nothing is
  written and the caller gets :class:`~mcp_operator.kube.errors.NameConflict`, whose
  message (:func:`conflict_message`) names the object and who controls it.

Because a foreign object is never written, our ownerReference is never added to it, so
deleting the owner lets the garbage collector remove exactly what the owner created.

Pure: no I/O; the client reads and writes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

ABSENT: Final = "absent"
OWNED: Final = "owned"

NO_OBJECT_VERSION: Final = "1"
"""The ``resourceVersion`` a create-only apply carries. Resource versions are etcd
revisions; revision 1 is the empty store's, so no stored object has it: an object that
exists makes the apply fail with 409 (optimistic concurrency), while a create ignores it."""

MAX_MANAGERS = 5
"""Field managers named in a conflict message (the message stays short)."""


@dataclass(frozen=True)
class Foreign:
    """An existing object that is not controlled by the owner that wants to apply it."""

    controller: str
    """Its controller, ``Kind/name``, or ``no controller``."""
    managers: tuple[str, ...]
    """The field managers that wrote it (``managedFields``), in the order the API lists them."""


Verdict = Literal["absent", "owned"] | Foreign


def controller_reference(body: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    """The ownerReference with ``controller: true`` (at most one exists), or ``None``."""
    references = ((body or {}).get("metadata") or {}).get("ownerReferences") or ()
    return next((ref for ref in references if ref.get("controller") is True), None)


def decide(existing: Mapping[str, Any] | None, owner_uid: str) -> Verdict:
    """Whether the object ``existing`` (``None``: not found) may be written for the owner
    whose UID is ``owner_uid``."""
    if existing is None:
        return ABSENT
    controller = controller_reference(existing)
    if controller is not None and owner_uid and controller.get("uid") == owner_uid:
        return OWNED
    holder = (
        f"{controller.get('kind')}/{controller.get('name')}"
        if controller is not None
        else "no controller"
    )
    managers: list[str] = []
    for entry in (existing.get("metadata") or {}).get("managedFields") or ():
        manager = str(entry.get("manager") or "")
        if manager and manager not in managers:
            managers.append(manager)
    return Foreign(holder, tuple(managers))


def conflict_message(
    kind: str, namespace: str | None, name: str, owner: str, found: Foreign
) -> str:
    """What a refused apply says: the object, who controls it, who wrote it, what to do."""
    where = f"{namespace}/{name}" if namespace else name
    managers = ", ".join(found.managers[:MAX_MANAGERS]) or "none"
    if len(found.managers) > MAX_MANAGERS:
        managers += f" and {len(found.managers) - MAX_MANAGERS} more"
    return (
        f"{kind} {where} already exists and is not controlled by {owner} "
        f"(its controller: {found.controller}; field managers: {managers}); the operator "
        f"leaves it untouched: remove or rename that {kind}, or give the "
        f"{owner.split('/')[0]} another name"
    )
