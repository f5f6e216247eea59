"""Fixtures shared by the experiment tests of this directory."""

from tests.support.pairedscale import cal  # noqa: F401  (a calibration file: test_pairedscale)
