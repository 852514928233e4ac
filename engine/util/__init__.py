"""Helpers below every layer: clocks and schedulers, the event-loop thread, argument checks,
ending a child process group, the ``with`` protocol over ``close()``."""
