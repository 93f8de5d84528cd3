"""User-facing errors: one line naming the file, the key path, the bad value and what is allowed.

Anything that can go wrong because of user input (scenario YAML, `--set`, records, trace files,
an output directory) raises `ScenarioError`; the CLI prints `str(error)` on one line and exits with
code 2. `check_output_dir` checks an `--out` directory before any work starts, so a long run never
ends in a traceback because its results cannot be written.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

_MISSING = object()


class ScenarioError(Exception):
    def __init__(
        self, message: str, path: str | None = None, value: object = _MISSING, file: str | None = None
    ) -> None:
        super().__init__(message)
        self.message = message
        self.path = path
        self.value = value
        self.file = file

    def with_file(self, file: str) -> ScenarioError:
        if self.file is None:
            self.file = file
        return self

    def __str__(self) -> str:
        parts = []
        if self.file:
            parts.append(str(self.file))
        if self.path:
            parts.append(self.path)
        head = ": ".join(parts)
        value = "" if self.value is _MISSING else f"{_short(self.value)}: "
        text = f"{head}: {value}{self.message}" if head else f"{value}{self.message}"
        return " ".join(text.split())  # always one line


def _short(value: object, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def check_output_dir(path: str | Path, flag: str = "--out") -> None:
    """Raise a one-line ScenarioError unless results can be written into directory `path`: it is a
    directory we can create files in, or it does not exist yet and its nearest existing parent is
    one (nothing is created; a probe file is made and removed at once)."""
    target = Path(path)
    if target.exists() and not target.is_dir():
        raise ScenarioError(
            "exists and is not a directory; give a directory for the results", path=flag, value=str(path)
        )
    existing = target
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        raise ScenarioError(f"cannot create it: {existing} is not a directory", path=flag, value=str(path))
    try:
        with tempfile.NamedTemporaryFile(dir=existing, prefix=".dcsim-write-probe-"):
            pass
    except OSError as exc:
        where = "it" if existing == target else f"{existing}"
        raise ScenarioError(f"cannot write into {where}: {exc.strerror or exc}", path=flag, value=str(path)) from None
