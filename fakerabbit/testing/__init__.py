"""Helpers for tests that use fakerabbit: snapshots, x-death views and assertions."""
