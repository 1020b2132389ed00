"""Helpers shared by several test packages (real servers the tests start and stop)."""
