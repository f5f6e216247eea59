"""The one error base class of cosched.

Every failure a user can act on is a :class:`CoschedError`: the console-script
entry (``testbed.cli.main``) catches it once and prints one line — what went
wrong, why, and how to fix it — then exits non-zero. Anything else that
escapes is a bug and keeps its traceback.
"""

from __future__ import annotations


class CoschedError(Exception):
    """A known failure with a message meant for the user.

    ``fix`` (optional) says what to change; it is appended after ``" — "`` so
    the printed line reads "what: why — fix". ``exit_code`` is what the
    command exits with (2 for usage errors, 1 otherwise).
    """

    exit_code: int = 1

    def __init__(self, message: str, *, fix: str | None = None, exit_code: int | None = None):
        super().__init__(message)
        self.message = message
        self.fix = fix
        if exit_code is not None:
            self.exit_code = exit_code

    def __str__(self) -> str:
        return f"{self.message} — {self.fix}" if self.fix else self.message


class UsageError(CoschedError):
    """Bad command-line input (exit status 2, as argparse uses)."""

    exit_code = 2
