"""Helpers for tests and benchmarks that need outside services (a ZooKeeper server)."""
