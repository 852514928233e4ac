"""Configuration with Apache Kafka's property names, defaults and validation rules.

One table, :data:`CONFIG_KEYS`, defines every key seglog understands: its dotted Kafka name,
type, default, validator, scope (``topic``, ``broker``, ``producer`` or ``consumer``) and
description. The frozen dataclasses :class:`LogConfig` (topic level), :class:`BrokerConfig`,
:class:`ProducerConfig` and :class:`ConsumerConfig` take their defaults and validation from
it, and :func:`configuration_markdown` renders it as ``docs/configuration.md``.

Names, defaults and validators are those of Apache Kafka 3.9 (the last release with
ZooKeeper mode), so a Kafka ``server.properties`` or a topic's config overrides mean the same
thing here. Attribute names are the keys with dots replaced by underscores::

    >>> cfg = LogConfig.from_dict({"segment.bytes": "1048576", "cleanup.policy": "compact,delete"})
    >>> cfg.segment_bytes, cfg.cleanup_policy, cfg.retention_ms
    (1048576, ('compact', 'delete'), 604800000)
    >>> cfg.with_overrides({"retention.ms": -1}).to_dict(changed_only=True)
    {'segment.bytes': 1048576, 'retention.ms': -1, 'cleanup.policy': ('compact', 'delete')}

Values may be typed (``int``, ``bool``, ``float``, ``str``, a sequence of ``str`` for lists)
or strings as they appear in a ``.properties`` file (``"true"``, ``"1073741824"``,
``"a,b"``). Unknown keys are rejected with the nearest valid key; a value of the wrong type
or outside its range is rejected with the key, the value and the valid range.

Broker keys that Kafka uses as defaults for topic keys (``log.segment.bytes`` for
``segment.bytes``, ``log.retention.hours`` / ``minutes`` / ``ms`` for ``retention.ms``, ...)
are resolved the way Kafka resolves them by :meth:`BrokerConfig.topic_config`.

The package, one concept a module: :mod:`~seglog.config.definition` (a key and its validators),
:mod:`~seglog.config.keys` (the table), :mod:`~seglog.config.base` (what the config classes share)
and a module per class (:mod:`~seglog.config.topic`, :mod:`~seglog.config.broker`,
:mod:`~seglog.config.producer`, :mod:`~seglog.config.consumer`), :mod:`~seglog.config.properties`
(Java ``.properties`` text) and :mod:`~seglog.config.docs` (the reference's renderer). Import
from ``seglog.config``.
"""

from __future__ import annotations

from seglog.config import broker, consumer, definition, docs, keys, producer, properties, topic
from seglog.config.broker import *  # noqa: F403
from seglog.config.consumer import *  # noqa: F403
from seglog.config.definition import *  # noqa: F403
from seglog.config.docs import *  # noqa: F403
from seglog.config.keys import *  # noqa: F403
from seglog.config.producer import *  # noqa: F403
from seglog.config.properties import *  # noqa: F403
from seglog.config.topic import *  # noqa: F403

# Each name is listed once, in the ``__all__`` of the module that owns it.
__all__: list[str] = []
__all__ += definition.__all__
__all__ += keys.__all__
__all__ += topic.__all__
__all__ += broker.__all__
__all__ += producer.__all__
__all__ += consumer.__all__
__all__ += properties.__all__
__all__ += docs.__all__
