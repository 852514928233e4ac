"""The store against a plain model: per partition a list of (key, value) records and per
group a committed offset. Sends through every API, consumes, commits, restarts (clean and
unclean), and compacts; after every step what a consumer reads must equal the model."""

from __future__ import annotations

import shutil
import tempfile
from typing import Any

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from seglog import Store, TopicPartition
from seglog.client.partitioner import partition_for_key
from seglog.util.clock import ManualClock

PARTS = 3
CONFIG = {"log.cleaner.enable": False, "offsets.topic.num.partitions": 2}
keys = st.one_of(st.none(), st.sampled_from([b"a", b"b", b"c", b"d", b""]))
values = st.one_of(st.none(), st.binary(max_size=40))


class StoreModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.dir = tempfile.mkdtemp(prefix="seglog-model-")
        self.clock = ManualClock()
        self.store = Store.open(self.dir, clock=self.clock, config=CONFIG)
        self.store.create_topic("t", PARTS, {"segment.bytes": 600})
        self.model: list[list[tuple[bytes | None, bytes | None]]] = [[] for _ in range(PARTS)]
        self.committed: dict[int, int] = {}
        self.pending: list[tuple[Any, int, bytes | None, bytes | None]] = []
        self._clients()

    def _clients(self) -> None:
        self.producer = self.store.producer(linger_ms=50, batch_size=300)
        self.sync = self.store.producer(enable_idempotence=False)
        self.consumer = self.store.consumer(group_id="g", auto_offset_reset="earliest", enable_auto_commit=False)
        self.consumer.assign([TopicPartition("t", p) for p in range(PARTS)])

    def _settle(self) -> None:
        for fut, p, k, v in self.pending:
            md = fut.get()
            assert md.partition == p or p == -1
            self.model[md.partition].append((k, v))
            assert md.offset == len(self.model[md.partition]) - 1
        self.pending.clear()

    @rule(k=keys, v=values)
    def send_lingering(self, k: bytes | None, v: bytes | None) -> None:
        fut = self.producer.send("t", v, key=k)
        self.pending.append((fut, partition_for_key(k, PARTS) if k is not None else -1, k, v))
        # Records sent later must not overtake: settle in order when a future completes.
        if any(f.done() for f, *_ in self.pending):
            self._settle()

    @rule(k=keys, v=values, p=st.integers(0, PARTS - 1))
    def send_now(self, k: bytes | None, v: bytes | None, p: int) -> None:
        self.producer.flush()
        self._settle()
        md = self.sync.send("t", v, key=k, partition=p)
        self.model[p].append((k, v))
        assert md.offset == len(self.model[p]) - 1

    @rule(rows=st.lists(st.tuples(keys, values), min_size=1, max_size=30))
    def send_batch(self, rows: list[tuple[bytes | None, bytes | None]]) -> None:
        self.producer.flush()
        self._settle()
        ks = [k for k, _ in rows]
        keyed = all(k is not None for k in ks)
        results = self.producer.send_batch("t", [v for _, v in rows], keys=ks if keyed else None)
        if keyed:
            for k, v in rows:
                self.model[partition_for_key(k, PARTS)].append((k, v))  # type: ignore[arg-type]
        else:
            i = 0
            for r in results:
                self.model[r.partition].extend((None, v) for _, v in rows[i : i + r.record_count])
                i += r.record_count
        for r in results:
            assert r.last_offset <= len(self.model[r.partition]) - 1

    @rule(ms=st.integers(0, 100))
    def tick(self, ms: int) -> None:
        self.clock.advance(ms)
        if any(f.done() for f, *_ in self.pending):
            self._settle()

    @rule(p=st.integers(0, PARTS - 1), n=st.integers(1, 50))
    def consume_and_commit(self, p: int, n: int) -> None:
        tp = TopicPartition("t", p)
        start = self.committed.get(p, 0)
        self.consumer.seek(tp, start)
        got = []
        for _ in range(3):
            recs = self.consumer.poll(max_records=n)
            got.extend(recs.records(tp))
            if len(got) >= n:
                break
        got = got[:n]
        assert [(r.key, r.value) for r in got] == self.model[p][start : start + len(got)]
        assert [r.offset for r in got] == list(range(start, start + len(got)))
        self.consumer.commit({tp: start + len(got)})
        self.committed[p] = start + len(got)

    @rule()
    def restart_clean(self) -> None:
        self.producer.flush()
        self._settle()
        self.store.close()
        self.store = Store.open(self.dir, clock=self.clock, config=CONFIG)
        self._clients()

    @precondition(lambda self: not self.pending)
    @rule()
    def restart_after_crash(self) -> None:
        # The process dies without closing: no checkpoints, no clean-shutdown marker, open
        # files dropped. Page-cache data survives a process crash, so nothing is lost.
        crashed = self.dir + "-crash"
        shutil.copytree(self.dir, crashed)
        self.store.close()
        shutil.rmtree(self.dir)
        shutil.move(crashed, self.dir)
        import os

        marker = os.path.join(self.dir, ".kafka_cleanshutdown")
        if os.path.exists(marker):
            os.unlink(marker)
        self.store = Store.open(self.dir, clock=self.clock, config=CONFIG)
        self._clients()

    @invariant()
    def committed_offsets_match(self) -> None:
        for p, off in self.committed.items():
            om = self.store.group_offsets.committed("g", "t", p)
            assert om is not None and om.offset == off

    @invariant()
    def ends_match(self) -> None:
        for p in range(PARTS):
            assert self.store.log("t", p).log_end_offset == len(self.model[p])

    def teardown(self) -> None:
        try:
            self.store.close()
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)


TestStoreModel = StoreModel.TestCase
TestStoreModel.settings = settings(max_examples=8, stateful_step_count=20, deadline=None)


@pytest.mark.slow
class TestStoreModelLong(StoreModel.TestCase):  # type: ignore[misc,valid-type]  # Hypothesis types TestCase as a variable
    settings = settings(max_examples=40, stateful_step_count=30, deadline=None)
