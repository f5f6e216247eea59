"""Declared policy parameters, so the CLI and experiment specs can list and check them.

Each policy class carries ``PARAMS: tuple[ParamSpec, ...]``; the registry
(``controller/policies/registry.py``) reads them to print ``cosched policies``
and to turn ``key=value`` strings into typed keyword arguments.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ParamSpec:
    """One keyword argument of a policy constructor."""

    name: str
    kind: type  # int, float, bool or str
    default: int | float | bool | str | None
    help: str
    choices: tuple[str, ...] = ()
    nullable: bool = False  # takes none/off for None although its default is a value

    def parse(self, text: str) -> int | float | bool | str | None:
        """Convert a command-line string; ValueError with a reason if it does not fit.

        A parameter whose default is None (e.g. ``max_slots``: unlimited) takes
        ``none`` or ``unlimited`` to mean None; a ``nullable`` one (e.g. paired gang's
        ``sharp_change``) ``none`` or ``off``.
        """
        low = text.strip().lower()
        if self.default is None and low in ("none", "unlimited"):
            return None
        if self.nullable and low in ("none", "off"):
            return None
        if self.kind is bool:
            low = text.strip().lower()
            if low in ("1", "true", "yes", "on"):
                return True
            if low in ("0", "false", "no", "off"):
                return False
            raise ValueError(f"{self.name}: expected true/false, got {text!r}")
        if self.kind is int:
            try:
                return int(text)
            except ValueError:
                raise ValueError(f"{self.name}: expected an integer, got {text!r}") from None
        if self.kind is float:
            try:
                return float(text)
            except ValueError:
                raise ValueError(f"{self.name}: expected a number, got {text!r}") from None
        if self.choices and text not in self.choices:
            raise ValueError(
                f"{self.name}: expected one of {', '.join(self.choices)}, got {text!r}"
            )
        return text
