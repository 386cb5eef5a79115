"""Schedules: nightly reconcile and index maintenance."""
