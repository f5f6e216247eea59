"""The synthetic program's configuration from argv and environment, as a rank reads it."""

from __future__ import annotations

from apps.synthetic import (
    Config,
    build_parser,
    config_from,
)


def synthetic_cfg(argv: list[str], env: dict[str, str]) -> Config:
    return config_from(build_parser().parse_args(argv), env)
