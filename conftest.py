"""Repository-wide pytest configuration.

pytester (pytest's own fixture for running pytest inside a test) drives the plugin's tests in tests/plugin;
pytest accepts `pytest_plugins` only in the top-level conftest.
"""

pytest_plugins = ["pytester"]
