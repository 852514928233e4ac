"""Randomised runs against the real cluster (three node processes, ZooKeeper, a proxy on every
link): the workload of §9.4 under a nemesis profile of §9.3, then heal, full ISR, final read and
the §9.5 checker. Two short runs (about 75 s each, whatever the machine: the fault phase is
timed), which ``.ci/run`` runs in its long stage beside the long property and fuzz tests; the §9.7
profiles × seeds are ``slow`` too (or use ``python -m tests.cluster.soak``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cluster.run import PROFILES, RunConfig, run

pytestmark = pytest.mark.cluster


def _assert_run(rep: dict, tmp_path: Path) -> None:
    where = f"report in {tmp_path / 'run' / 'report.txt'}"
    assert rep["valid"], f"safety violations {rep['safety']}; {where}"
    assert rep["faults"]["total"] > 0, where
    assert rep["operations"]["send"]["ok"] > 1000, where
    assert rep["reported"]["unseen"] == 0, f"acked records never read: {rep['reported']['unseen']}; {where}"
    # The HW property ran on real observations (consumers' polls naming the leader epoch).
    assert rep["counts"]["hw_observations"].get("polls", 0) > 0, where


@pytest.mark.slow
@pytest.mark.parametrize("profile,seed", [("mixed", 1), ("power", 2)])
def test_short_randomised_run(tmp_path: Path, profile: str, seed: int) -> None:
    cfg = RunConfig(profile=profile, seed=seed, warmup_s=5, fault_s=60, mean_gap_s=4, final_read_s=60)
    rep = run(str(tmp_path / "run"), cfg)
    _assert_run(rep, tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("profile", sorted(PROFILES))
def test_long_randomised_run(tmp_path: Path, profile: str, seed: int) -> None:
    if profile == "disk-full":
        from tests.cluster.disk import tmpfs_available

        if (reason := tmpfs_available()) is not None:
            pytest.skip(reason)
    rep = run(str(tmp_path / "run"), RunConfig(profile=profile, seed=seed))
    _assert_run(rep, tmp_path)
