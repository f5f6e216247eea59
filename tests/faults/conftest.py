"""The integration suite's root fixtures (a real local cluster) for the fault suite."""

from tests.integration.conftest import root_cluster_env  # noqa: F401
