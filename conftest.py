"""Makes the shared fixtures (tests/shared_fixtures.py) available to the tests of every server folder."""

pytest_plugins = ["tests.shared_fixtures"]
