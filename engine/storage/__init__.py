"""Storage: a partition's log on disk in Kafka's format, and the log dir that holds them.

Built on :mod:`seglog._native` (record batches, segments, indexes). Modules:

- :mod:`~seglog.storage.log` — :class:`~seglog.storage.log.Log`, one partition (Kafka's
  ``UnifiedLog``): appends, offsets, retention, leader epochs, producer state; over
  :mod:`~seglog.storage.local_log` (its segments, Kafka's ``LocalLog``) and
  :mod:`~seglog.storage.log_loader` (opening and recovery, Kafka's ``LogLoader``);
- :mod:`~seglog.storage.logdir` — the one owner of a log directory (lock, checkpoint files,
  clean-shutdown marker, discovery);
- :mod:`~seglog.storage.log_manager` — :class:`~seglog.storage.log_manager.LogManager` (Kafka's
  ``LogManager``), the topics and partitions of one log dir; :class:`seglog.Store` adds the
  embedded clients;
- :mod:`~seglog.storage.topic` — topic names and ids, the log manager's topic and partition
  entries; :mod:`~seglog.storage.store_metadata` — ``seglog-metadata.json`` and
  ``partition.metadata``; :mod:`~seglog.storage.descriptors` — the open-file limit check;
- :mod:`~seglog.storage.segment_files` — segment file names and suffixes, and the leftovers of
  interrupted operations settled before a log loads;
- :mod:`~seglog.storage.log_transactions` — a log's open transactions and its segments'
  ``.txnindex`` files;
- :mod:`~seglog.storage.cleaner` — log compaction;
- :mod:`~seglog.storage.txnindex`, :mod:`~seglog.storage.leader_epoch`,
  :mod:`~seglog.storage.producer_state`, :mod:`~seglog.storage.checkpoints` — the files beside a
  partition's segments;
- :mod:`~seglog.storage.group_offsets` — committed offsets in ``__consumer_offsets``;
- :mod:`~seglog.storage.records` — the record codec's Python entry points.
"""
