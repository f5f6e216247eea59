"""The one typed reader of study specs (TOML): every study reads its tables through it.

A spec is a TOML file whose first key, ``kind``, names the study
(testbed/experiment/registry.py); the rest are tables the study reads with
:class:`Table`. Every mistake is one :class:`SpecError` line naming the file,
the table and the key, what is wrong and how to fix it, e.g.::

    experiments/x.toml: [experiment].duration: expected a number, got 'long' — e.g. 15.0

``bool`` is never taken for a number (TOML's ``true`` is not 1), an integer is
accepted where a number is asked (``2`` for ``2.0``), and unknown keys are
refused with the list of the valid ones (:meth:`Table.only`), so a misspelt key
never silently falls back to a default.
"""

from __future__ import annotations

import tomllib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from common.errors import UsageError


class SpecError(UsageError):
    """A spec (or a command-line override of one) that cannot be used: one line."""


class _Required:
    def __repr__(self) -> str:
        return "REQUIRED"


REQUIRED: Final = _Required()
_NUMBER = (int, float)


def read_toml(path: str | Path) -> dict[str, Any]:
    """The parsed document, or one line saying why the file cannot be read."""
    p = Path(path)
    try:
        return tomllib.loads(p.read_text())
    except FileNotFoundError:
        raise SpecError(
            f"{p}: no such file", fix="give the path of a spec in experiments/"
        ) from None
    except (OSError, UnicodeDecodeError) as e:
        raise SpecError(f"{p}: cannot read it ({e})", fix="give a readable TOML file") from None
    except tomllib.TOMLDecodeError as e:
        raise SpecError(f"{p}: not valid TOML ({e})", fix="fix the TOML syntax") from None


def _type_names(kinds: tuple[type, ...]) -> str:
    names = {int: "a whole number", float: "a number", str: "a string", bool: "true or false",
             list: "a list", dict: "a table"}  # fmt: skip
    if set(kinds) == {int, float}:
        return "a number"
    return " or ".join(names.get(k, k.__name__) for k in kinds)


def _is(value: Any, kinds: tuple[type, ...]) -> bool:
    if isinstance(value, bool):
        return bool in kinds
    return isinstance(value, kinds)


@dataclass(frozen=True)
class Table:
    """One table of a spec: typed values with defaults, and errors that say where."""

    path: Path
    name: str  # "experiment", "jobs.compute", "sim #2"; "" for the document itself
    data: Mapping[str, Any]

    @classmethod
    def document(cls, doc: Mapping[str, Any], path: str | Path) -> Table:
        return cls(Path(path), "", doc)

    @property
    def where(self) -> str:
        return f"{self.path}: [{self.name}]" if self.name else str(self.path)

    def error(self, key: str | None, what: str, fix: str | None = None) -> SpecError:
        """A SpecError about ``key`` of this table (or the table itself)."""
        if key is None:
            return SpecError(f"{self.where}: {what}", fix=fix)
        at = f"{self.where}.{key}" if self.name else f"{self.path}: {key}"
        return SpecError(f"{at}: {what}", fix=fix)

    # ---- structure --------------------------------------------------------------------

    def only(self, known: Iterable[str]) -> None:
        """Refuse keys this table does not define."""
        allowed = set(known)
        for key in self.data:
            if key not in allowed:
                raise self.error(
                    key, "unknown key", fix="valid keys: " + ", ".join(sorted(allowed))
                )

    def has(self, key: str) -> bool:
        return key in self.data

    def table(self, name: str, *, required: bool = False) -> Table:
        """A sub-table (``[name]`` of the document, ``[a.name]`` of table ``a``)."""
        full = f"{self.name}.{name}" if self.name else name
        value = self.data.get(name)
        if value is None:
            if required:
                raise self.error(
                    None, f"the [{full}] table is missing", fix="see the specs in experiments/"
                )
            return Table(self.path, full, {})
        if not isinstance(value, dict):
            raise SpecError(f"{self.path}: [{full}] must be a table", fix=f"write [{full}] ...")
        return Table(self.path, full, value)

    def tables(self, name: str, *, default: Sequence[Mapping[str, Any]] = ()) -> list[Table]:
        """An array of tables (``[[name]]``), each named ``name #k``."""
        value = self.data.get(name, list(default))
        if not isinstance(value, list) or not all(isinstance(t, dict) for t in value):
            raise self.error(name, "must be an array of tables", fix=f"write [[{name}]] ...")
        return [Table(self.path, f"{name} #{k + 1}", t) for k, t in enumerate(value)]

    # ---- values -------------------------------------------------------------------------

    def get(self, key: str, kinds: type | tuple[type, ...], default: Any = REQUIRED) -> Any:
        """The value of ``key`` if it has one of ``kinds``; ``default`` when absent."""
        kinds_t = kinds if isinstance(kinds, tuple) else (kinds,)
        if key not in self.data:
            if default is REQUIRED:
                raise self.error(key, "missing", fix=f"add `{key} = ...`")
            return default
        value = self.data[key]
        if not _is(value, kinds_t):
            raise self.error(key, f"expected {_type_names(kinds_t)}, got {value!r}")
        return value

    def text(
        self, key: str, default: Any = REQUIRED, *, choices: Sequence[str] | None = None
    ) -> str:
        value = self.get(key, str, default)
        if choices is not None and value not in choices and key in self.data:
            raise self.error(key, f"one of {', '.join(choices)}, got {value!r}")
        return value  # type: ignore[no-any-return]

    def flag(self, key: str, default: Any = REQUIRED) -> bool:
        return bool(self.get(key, bool, default))

    def integer(
        self, key: str, default: Any = REQUIRED, *, minimum: int | None = None,
        maximum: int | None = None,
    ) -> int:  # fmt: skip
        value = self.get(key, int, default)
        if key in self.data:
            self._bounds(key, value, minimum, maximum, None, None)
        return value  # type: ignore[no-any-return]

    def number(
        self, key: str, default: Any = REQUIRED, *, minimum: float | None = None,
        maximum: float | None = None, above: float | None = None, below: float | None = None,
    ) -> float:  # fmt: skip
        value = self.get(key, _NUMBER, default)
        if key in self.data:
            self._bounds(key, value, minimum, maximum, above, below)
        return value if value is None else float(value)  # type: ignore[return-value]

    def _bounds(
        self, key: str, v: float, lo: float | None, hi: float | None, gt: float | None,
        lt: float | None,
    ) -> None:  # fmt: skip
        ok = (
            (lo is None or v >= lo)
            and (hi is None or v <= hi)
            and (gt is None or v > gt)
            and (lt is None or v < lt)
        )
        if not ok:
            raise self.error(key, f"{_range(lo, hi, gt, lt)}, got {v!r}")

    def items(
        self, key: str, kinds: type | tuple[type, ...], default: Any = REQUIRED, *,
        nonempty: bool = True, unique: bool = False, choices: Sequence[Any] | None = None,
        minimum: float | None = None, maximum: float | None = None, above: float | None = None,
        below: float | None = None, example: str = "",
    ) -> list[Any]:  # fmt: skip
        """A list whose every item has one of ``kinds`` (and the bounds or choices given)."""
        kinds_t = kinds if isinstance(kinds, tuple) else (kinds,)
        if key not in self.data:
            if default is REQUIRED:
                raise self.error(key, "missing", fix=f"add `{key} = [...]`")
            return list(default)
        value = self.data[key]
        hint = f"e.g. {key} = {example}" if example else None
        what = f"a list of {_plural(kinds_t)}"
        if not isinstance(value, list) or not all(_is(x, kinds_t) for x in value):
            raise self.error(key, f"expected {what}, got {value!r}", fix=hint)
        if nonempty and not value:
            raise self.error(key, f"expected a non-empty list of {_plural(kinds_t)}", fix=hint)
        if unique and len(set(value)) != len(value):
            raise self.error(key, "a value appears twice", fix=hint)
        for x in value:
            if choices is not None and x not in choices:
                raise self.error(
                    key, f"unknown {x!r}", fix="valid: " + ", ".join(map(str, choices))
                )
            if isinstance(x, int | float) and not isinstance(x, bool):
                ok = (
                    (minimum is None or x >= minimum)
                    and (maximum is None or x <= maximum)
                    and (above is None or x > above)
                    and (below is None or x < below)
                )
                if not ok:
                    rng = _range(minimum, maximum, above, below)
                    raise self.error(key, f"every value {rng}, got {x!r}", fix=hint)
        return list(value)


def _plural(kinds: tuple[type, ...]) -> str:
    if set(kinds) == {int, float}:
        return "numbers"
    names = {int: "whole numbers", float: "numbers", str: "strings", dict: "tables"}
    return " or ".join(names.get(k, k.__name__) for k in kinds)


def _range(lo: float | None, hi: float | None, gt: float | None, lt: float | None) -> str:
    parts = []
    if lo is not None:
        parts.append(f">= {lo:g}")
    if gt is not None:
        parts.append(f"> {gt:g}")
    if hi is not None:
        parts.append(f"<= {hi:g}")
    if lt is not None:
        parts.append(f"< {lt:g}")
    return "must be " + " and ".join(parts)
