"""User-facing errors: one line naming the file, the key path, the bad value and what is allowed.

Anything that can go wrong because of user input (scenario YAML, `--set`, records, trace files)
raises `ScenarioError`; the CLI prints `str(error)` on one line and exits with code 2.
"""

from __future__ import annotations

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
