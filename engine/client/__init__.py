"""Clients of one store: the producer, the consumer and the default partitioner.

Built on :mod:`seglog.storage`.
"""
