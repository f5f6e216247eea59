"""Security tests (issue 28): attacks on a real local cluster by unprivileged users."""
