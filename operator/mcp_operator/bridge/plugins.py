"""Loading the bridge's plugins from their entry point groups (hooks, PII detectors).

Owns what every plugin group shares: an entry point names an object or a zero-argument
factory of one, loading or calling it may fail, and what it yields must have the group's
interface; each failure is reported with the entry point's name and value. What the
interface is, and which error names the group, is the caller's.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from importlib.metadata import EntryPoint, entry_points
from typing import TypeGuard, TypeVar

T = TypeVar("T")


def load_plugins(
    group: str,
    points: Iterable[EntryPoint] | None,
    *,
    interface: type,
    accepts: Callable[[object], TypeGuard[T]],
    what: str,
    needs: str,
    error: type[Exception],
) -> list[T]:
    """The plugins of the entry point ``group`` (or of ``points``), in order.

    An entry point that loads an instance of ``interface`` is taken as it is, anything else
    is called as a factory; what results must pass ``accepts``. ``what`` names a plugin in
    the messages ("Bridge hook plugin"), ``needs`` says what a plugin lacks when it is not
    one; failures raise ``error``.
    """
    plugins: list[T] = []
    for point in entry_points(group=group) if points is None else points:
        try:
            loaded = point.load()
            is_instance = isinstance(loaded, interface) and not isinstance(loaded, type)
            plugin = loaded if is_instance else loaded()
        except Exception as failure:
            raise error(f"{what} {point.name} ({point.value}) failed to load: {failure}") from (
                failure
            )
        if not accepts(plugin):
            raise error(f"{what} {point.name} ({point.value}) is not {needs}")
        plugins.append(plugin)
    return plugins
