"""The trial duty cycle: each harbor phase against the trial's own wall clock.

Mirrors MarinSkyRL ``infra/tests/test_parse_skyrl_metrics.py`` (facts, not code): every test names
the peer test it mirrors. Our fixtures are result.json files written here and read by the real
trial reader, then summarised by the trial observer.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from rlhealth.observers.trials import duty_cycle
from rlhealth.probes.parse import trials as T

T0 = "2027-03-04T05:00:00Z"


def _at(seconds: float, zone: str = "Z") -> str:
    m, s = divmod(int(seconds), 60)
    h, m = divmod(m, 60)
    return f"2027-03-04T{5 + h:02d}:{m:02d}:{s:02d}{zone}"


def _trial(root: Path, name: str, wall: float | None, phases: dict[str, tuple[float, float] | None],
           *, finished_at: str | None = None, started_at: str | None = None) -> None:
    doc: dict = {"trial_name": name, "started_at": started_at or _at(0),
                 "verifier_result": {"rewards": {"reward": 1.0}}}
    if finished_at is not None:
        doc["finished_at"] = finished_at
    elif wall is not None:
        doc["finished_at"] = _at(wall)
    for phase, span in phases.items():
        doc[phase] = None if span is None else {"started_at": _at(span[0]), "finished_at": _at(span[1])}
    (root / name).mkdir(parents=True)
    (root / name / "result.json").write_text(json.dumps(doc))


def _summary(root: Path):
    return T.summarize_trials(root, {}, 0, workers=1)


def _row(d: dict, name: str) -> dict:
    (row,) = [r for r in d["phases"] if r["name"] == name]
    return row


def test_shares_are_taken_against_the_trial_wall_clock(tmp_path):
    """Mirrors test_trial_phase_shares_are_taken_against_trial_wall_clock and the duty-cycle half
    of test_report_publishes_the_trial_phase_breakdown."""
    _trial(tmp_path, "t1", 200, {"environment_setup": (0, 100), "agent_setup": (100, 120),
                                 "agent_execution": (120, 180), "verifier": (180, 190)})
    d = duty_cycle(_summary(tmp_path))
    assert d["trials_with_wall_clock"] == 1
    assert _row(d, "environment_setup")["share_of_trial"] == pytest.approx(0.5)
    assert _row(d, "verifier")["share_of_trial"] == pytest.approx(0.05)
    assert _row(d, "unattributed")["share_of_trial"] == pytest.approx(0.05)
    assert _row(d, "unattributed")["total_s"] == pytest.approx(10.0)
    # The sum of phase medians (190 s) is not the denominator: that read setup as 52.6%.
    assert sum(r["share_of_trial"] for r in d["phases"]) == pytest.approx(1.0)


def test_unfinished_trials_are_excluded_from_shares_and_counted(tmp_path):
    """Mirrors test_shares_skip_trials_that_never_recorded_their_own_finish."""
    _trial(tmp_path, "t1", 200, {"environment_setup": (0, 100), "agent_setup": (100, 120),
                                 "agent_execution": (120, 180), "verifier": (180, 190)})
    _trial(tmp_path, "t2", None, {"environment_setup": (0, 100)})
    d = duty_cycle(_summary(tmp_path))
    assert (d["trials_with_wall_clock"], d["trials_unfinished"], d["trials_untimed"]) == (1, 1, 0)
    setup = _row(d, "environment_setup")
    assert setup["trials"] == 2 and setup["total_s"] == pytest.approx(200.0)
    assert setup["share_of_trial"] == pytest.approx(0.5)
    assert _row(d, "unattributed")["share_of_trial"] == pytest.approx(0.05)


def test_a_trial_recording_only_some_phases_keeps_them(tmp_path):
    """Mirrors test_multi_step_trial_still_reports_the_phases_it_records."""
    _trial(tmp_path, "t1", 300, {"environment_setup": (0, 90), "agent_setup": (90, 120)})
    d = duty_cycle(_summary(tmp_path))
    assert [r["name"] for r in d["phases"]] == ["environment_setup", "agent_setup", "unattributed"]
    assert _row(d, "unattributed")["share_of_trial"] == pytest.approx(0.6)


def test_no_shares_without_a_wall_clock(tmp_path):
    """Mirrors test_phases_are_still_reported_when_the_trial_wall_clock_is_missing."""
    _trial(tmp_path, "t1", None, {"environment_setup": (0, 90), "agent_setup": (90, 120)})
    d = duty_cycle(_summary(tmp_path))
    assert _row(d, "environment_setup")["total_s"] == pytest.approx(90.0)
    assert _row(d, "environment_setup")["share_of_trial"] is None
    assert [r["name"] for r in d["phases"]] == ["environment_setup", "agent_setup"]
    assert d["share"] == {}


def test_overlapping_phases_report_the_excess_without_a_share(tmp_path):
    """Mirrors test_phases_that_overlap_report_the_excess_instead_of_a_negative_share."""
    _trial(tmp_path, "t1", 100, {"environment_setup": (0, 80), "agent_setup": (0, 40),
                                 "agent_execution": (10, 40), "verifier": (40, 45)})
    d = duty_cycle(_summary(tmp_path))
    overlap = _row(d, "overlap")
    assert overlap["total_s"] == pytest.approx(55.0) and overlap["share_of_trial"] is None
    assert not any(r["name"] == "unattributed" for r in d["phases"])


@pytest.mark.parametrize("field", [
    pytest.param({}, id="phase-absent"),
    pytest.param({"environment_setup": None}, id="phase-null"),
])
def test_unusable_phase_leaves_only_that_phase_untimed(tmp_path, field):
    """Mirrors test_unusable_phase_timing_leaves_the_duration_empty (absent, null)."""
    _trial(tmp_path, "t1", 200, {"agent_execution": (99, 132), **field})
    s = _summary(tmp_path)
    assert not s.phases["environment_setup"]
    assert list(s.phases["agent_execution"]) == [33.0]


def test_phase_spelling_utc_both_ways_is_measured(tmp_path):
    """Mirrors test_a_phase_that_spells_utc_both_ways_is_still_measured."""
    doc = {"started_at": "2027-03-04T05:00:00Z", "finished_at": "2027-03-04T05:01:00+00:00",
           "environment_setup": {"started_at": "2027-03-04T05:00:00Z", "finished_at": "2027-03-04T05:01:00+00:00"}}
    (tmp_path / "t1").mkdir()
    (tmp_path / "t1" / "result.json").write_text(json.dumps(doc))
    s = _summary(tmp_path)
    assert list(s.phases["environment_setup"]) == [60.0]
    assert s.wall == (1, 0, 0) and s.wall_s == pytest.approx(60.0)


def test_naive_time_paired_with_an_aware_one_is_untimed(tmp_path):
    """Mirrors test_unusable_timing_block_has_no_duration[mixed-naive-aware]: the naive time is
    not read as UTC, for a phase and for the trial's own wall clock."""
    doc = {"started_at": "2027-03-04T05:00:00", "finished_at": "2027-03-04T05:01:00+00:00",
           "environment_setup": {"started_at": "2027-03-04T05:00:00", "finished_at": "2027-03-04T05:01:00+00:00"},
           "agent_setup": {"started_at": "2027-03-04T05:00:00", "finished_at": "2027-03-04T05:00:30"}}
    (tmp_path / "t1").mkdir()
    (tmp_path / "t1" / "result.json").write_text(json.dumps(doc))
    s = _summary(tmp_path)
    assert not s.phases["environment_setup"]
    assert list(s.phases["agent_setup"]) == [30.0]       # both naive: one clock, measured
    assert s.wall == (0, 0, 1)
    d = duty_cycle(s)
    assert d["trials_untimed"] == 1 and d["share"] == {}


def test_unparseable_trial_finish_is_untimed_not_unfinished(tmp_path):
    """Mirrors test_unusable_phase_timing_leaves_the_duration_empty[phase-unparseable-timestamp]
    for the trial's own wall clock."""
    _trial(tmp_path, "t1", None, {"environment_setup": (0, 50)}, finished_at="just after lunch")
    assert _summary(tmp_path).wall == (0, 0, 1)


def test_wall_clock_sums_are_order_free_across_readers(tmp_path):
    """Several readers (forked) give the same sums as one."""
    for i in range(40):
        _trial(tmp_path, f"t{i:02d}", 100 + i, {"environment_setup": (0, 10 + i % 7)})
    one = T.summarize_trials(tmp_path, {}, 0, workers=1)
    many = T.summarize_trials(tmp_path, {}, 0, workers=3)
    assert (one.wall, one.wall_s, one.phase_in_wall_s) == (many.wall, many.wall_s, many.phase_in_wall_s)
