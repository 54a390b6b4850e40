"""The stack fixture (tests/stack/harness.py) for every module here."""

from tests.stack.harness import stack  # noqa: F401
