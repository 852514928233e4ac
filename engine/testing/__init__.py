"""For other projects' tests: the ``kafka_broker`` pytest fixture (:mod:`~seglog.testing.pytest_plugin`)."""
