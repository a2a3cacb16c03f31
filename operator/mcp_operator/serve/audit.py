"""Where audit lines go: stdout and, when configured, a file appended to — for the bridge's
records (``bridge.audit``) and the adapter's (``adapter.audit``) alike.

Owns the writing only: a record is anything with ``to_json_line()`` (one newline-terminated
line of JSON that names no value); what a record holds is its writer's business. A file that
cannot be opened is logged and left out (stdout still gets the lines); every line is flushed
at once, so a crash loses none that were written.
"""

from __future__ import annotations

import logging
from typing import IO, Protocol

logger = logging.getLogger(__name__)


class AuditLine(Protocol):
    def to_json_line(self) -> str: ...


class AuditWriter:
    """Writes audit lines to stdout and, when configured, appends them to a file."""

    def __init__(self, stdout: IO[str] | None, file_path: str | None) -> None:
        self.stdout = stdout
        self.file: IO[str] | None = None
        if file_path is not None:
            try:
                self.file = open(file_path, "a", encoding="utf-8")  # noqa: SIM115 - kept open
            except OSError as error:
                logger.error("Could not open the audit file %s: %s", file_path, error.strerror)

    def write(self, record: AuditLine) -> None:
        line = record.to_json_line()
        for sink in (self.stdout, self.file):
            if sink is not None:
                sink.write(line)
                sink.flush()

    def close(self) -> None:
        if self.file is not None:
            self.file.close()
            self.file = None
