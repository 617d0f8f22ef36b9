"""pytest plugin: fixtures for fakerabbit (being written)."""
