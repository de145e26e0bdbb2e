"""The step-time phase table as a containment tree.

Mirrors MarinSkyRL ``infra/tests/test_parse_skyrl_metrics.py`` (its ``summarize_timing_spans``
tests; facts, not code): each test names the peer test it mirrors. Fixtures are per-step
``timing/*`` metric dicts as a trainer's WANDB_MIRROR line carries them.
"""
from __future__ import annotations

import pytest

from rlhealth.observers.spans import span_table, stacked_parts, step_rows


def _table(*steps: dict) -> list[dict]:
    return span_table(step_rows([{f"timing/{k}": v for k, v in s.items() if v is not None} for s in steps]))


def _span(rows: list[dict], name: str) -> dict:
    (row,) = [r for r in rows if r["phase"] == name]
    return row


def test_nested_optimizer_span_is_measured_against_its_container():
    """Mirrors test_nested_optimizer_span_is_measured_against_its_container_not_the_step."""
    rows = _table(dict(step=100.0, generate=60.0, train_critic_and_policy=30.0, policy_train=28.0))
    assert _span(rows, "policy_train")["within"] == "train_critic_and_policy"
    assert _span(rows, "policy_train")["share_of_within"] == pytest.approx(28 / 30, abs=1e-3)
    assert _span(rows, "train_critic_and_policy")["share_of_within"] == pytest.approx(0.3)
    assert _span(rows, "unattributed")["mean_s"] == pytest.approx(10.0)


def test_synchronous_tree_attributes_optimizer_work_to_the_step():
    """Mirrors test_synchronous_tree_attributes_optimizer_work_straight_to_the_step."""
    rows = _table(dict(step=100.0, generate=60.0, fwd_logprobs_values_reward=10.0, train_critic_and_policy=30.0))
    assert _span(rows, "fwd_logprobs_values_reward")["within"] == "step"
    assert _span(rows, "train_critic_and_policy")["within"] == "step"


def test_asynchronous_tree_attributes_optimizer_work_to_run_training():
    """Mirrors test_asynchronous_tree_attributes_optimizer_work_to_the_training_span."""
    rows = _table(dict(step=100.0, wait_for_generation_buffer=55.0, run_training=40.0,
                       fwd_logprobs_values_reward=10.0, train_critic_and_policy=30.0))
    assert _span(rows, "fwd_logprobs_values_reward")["within"] == "run_training"
    assert _span(rows, "train_critic_and_policy")["within"] == "run_training"
    assert _span(rows, "run_training")["within"] == "step"
    assert _span(rows, "unattributed")["mean_s"] == pytest.approx(5.0)


def test_work_between_steps_has_no_share():
    """Mirrors test_work_between_steps_reports_no_share_of_the_step."""
    rows = _table(dict(step=100.0, generate=90.0, save_checkpoints=45.0, eval=20.0))
    for name in ("save_checkpoints", "eval"):
        assert _span(rows, name)["within"] is None and _span(rows, name)["share_of_within"] is None


def test_undeclared_span_is_listed_without_a_share():
    """Mirrors test_undeclared_span_is_reported_without_a_share."""
    row = _span(_table(dict(step=100.0, some_new_trainer_phase=25.0)), "some_new_trainer_phase")
    assert (row["within"], row["share_of_within"], row["declared"]) == (None, None, False)
    assert row["mean_s"] == pytest.approx(25.0)


def test_unattributed_covers_step_time_no_child_claims():
    """Mirrors test_unattributed_span_covers_the_step_time_no_child_claims."""
    rows = _table(dict(step=100.0, generate=60.0, sync_weights=10.0, save_checkpoints=45.0))
    u = _span(rows, "unattributed")
    assert u["within"] == "step" and u["mean_s"] == pytest.approx(30.0) and u["share_of_within"] == pytest.approx(0.3)


def test_a_span_that_skips_a_step_still_sums_to_the_step():
    """Mirrors test_a_span_that_skips_a_step_still_leaves_the_children_summing_to_the_step."""
    rows = _table(dict(step=100.0, generate=60.0, sync_weights=50.0), dict(step=100.0, generate=60.0))
    sync = _span(rows, "sync_weights")
    assert sync["share_of_within"] == pytest.approx(0.25)
    assert sync["mean_s"] == pytest.approx(50.0) and sync["n"] == 1
    assert sum(r["share_of_within"] for r in rows if r["within"] == "step") == pytest.approx(1.0)


def test_children_past_the_step_are_overlap():
    """Mirrors test_children_that_sum_past_the_step_are_reported_as_overlap."""
    rows = _table(dict(step=100.0, generate=145.0, train_critic_and_policy=20.0, sync_weights=10.0))
    o = _span(rows, "overlap")
    assert o["within"] == "step" and o["mean_s"] == pytest.approx(75.0) and o["share_of_within"] is None
    assert not any(r["phase"] == "unattributed" for r in rows)
    assert _span(rows, "generate")["share_of_within"] == pytest.approx(1.45)


def test_rows_run_depth_first_from_step():
    """Mirrors the row order of test_report_publishes_the_trial_phase_breakdown."""
    rows = _table(dict(step=100.0, generate=60.0, train_critic_and_policy=30.0, policy_train=28.0,
                       save_checkpoints=45.0, eval=20.0))
    assert [r["phase"] for r in rows] == ["step", "generate", "train_critic_and_policy", "policy_train",
                                          "unattributed", "save_checkpoints", "eval"]


def test_without_a_step_span_the_table_is_flat():
    rows = _table(dict(generate=60.0, policy_train=28.0))
    assert [(r["phase"], r["within"], r["share_of_within"]) for r in rows] == [
        ("generate", None, None), ("policy_train", None, None)]


def test_the_plot_stacks_only_spans_directly_within_the_step():
    """The stacked plot never counts a nested span twice: direct children plus the remainder."""
    parts = stacked_parts(step_rows([{"timing/step": 100.0, "timing/generate": 60.0,
                                      "timing/train_critic_and_policy": 30.0, "timing/policy_train": 28.0}]))
    assert parts == {"generate": [60.0], "train_critic_and_policy": [30.0], "unattributed": [10.0]}
