"""Root conftest: pytester for the plugin's own tests."""

pytest_plugins = ["pytester"]
