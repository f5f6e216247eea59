"""The Dask settings for a sweep cluster (testbed/sweep/daskconf.py) and their variables."""

from __future__ import annotations

import pytest

from testbed.sweep.daskconf import SETTINGS, environment

dask = pytest.importorskip("dask")
pytest.importorskip("distributed")  # its defaults enter dask.config on import


def test_the_environment_variables_give_dask_the_same_settings() -> None:
    env = environment()
    assert all(name.startswith("DASK_DISTRIBUTED__") for name in env)
    got = dask.config.collect_env(env)  # what a scheduler or worker started with them reads
    with dask.config.set(got):
        for key, value in SETTINGS.items():
            assert dask.config.get(key) == value, key


def test_every_setting_is_one_dask_knows_and_changes_its_default() -> None:
    for key, value in SETTINGS.items():
        default = dask.config.get(key)  # raises KeyError for a misspelt key
        assert default != value, key
