"""The first-causal-error judgement's precedence data: ``explains`` (a consequence cannot be named
first unless timestamped strictly earlier), the explanation-cycle fallback, and the same-line rule
(a signature matching the line itself beats a traceback that quotes that line)."""
from __future__ import annotations

from rlhealth.catalog import Signature, load_catalog
from rlhealth.facts import Occurrence
from rlhealth.first_error import first_errors_by_attempt
from rlhealth.probes.bundle import SignatureAgg

CATALOG = load_catalog()


def agg(sig: Signature, *occs: Occurrence) -> SignatureAgg:
    a = SignatureAgg(sig)
    for o in occs:
        a.add(o)
    return a


def occ(line: int, ts: float | None = None, source: str = "driver.log") -> Occurrence:
    return Occurrence(source=source, line=line, text=f"line {line}", ts=ts, attempt=1)


def first(signatures: dict) -> str:
    return first_errors_by_attempt(signatures)[1][1]


def test_consequence_without_time_is_explained_even_when_earlier_by_line():
    sigs = {"ray_actor_died": agg(CATALOG.signatures["ray_actor_died"], occ(1)),
            "ray_node_died": agg(CATALOG.signatures["ray_node_died"], occ(7))}
    assert "ray_actor_died" in CATALOG.signatures["ray_node_died"].explains
    assert first(sigs) == "ray_node_died"


def test_consequence_strictly_earlier_by_time_stays_first():
    sigs = {"ray_actor_died": agg(CATALOG.signatures["ray_actor_died"], occ(1, ts=100.0)),
            "ray_node_died": agg(CATALOG.signatures["ray_node_died"], occ(7, ts=200.0))}
    assert first(sigs) == "ray_actor_died"


def test_same_time_consequence_is_explained():
    sigs = {"unclassified_fatal_error": agg(CATALOG.signatures["unclassified_fatal_error"], occ(1, ts=100.0)),
            "nccl_collective_timeout": agg(CATALOG.signatures["nccl_collective_timeout"], occ(2, ts=100.0))}
    assert first(sigs) == "nccl_collective_timeout"


def test_explanation_cycle_keeps_a_first_error():
    a = CATALOG.signatures["fatal_signal"].model_copy(update={"id": "sig_a", "explains": ["sig_b"]})
    b = CATALOG.signatures["fatal_signal"].model_copy(update={"id": "sig_b", "explains": ["sig_a"]})
    sigs = {"sig_a": agg(a, occ(3)), "sig_b": agg(b, occ(5))}
    assert first(sigs) == "sig_a"


def test_a_lines_own_signature_beats_a_traceback_quoting_that_line():
    line = occ(9, ts=100.0)
    sigs = {"python_traceback": agg(CATALOG.signatures["python_traceback"], line),
            "vllm_engine_dead": agg(CATALOG.signatures["vllm_engine_dead"], line)}
    assert CATALOG.signatures["python_traceback"].detail_after is not None
    assert first(sigs) == "vllm_engine_dead"


def test_every_specific_fatal_signature_outranks_the_catch_all():
    """The catch-all has the lowest precedence: every fatal/hang signature explains it."""
    for sig in CATALOG.signatures.values():
        if sig.severity in ("fatal", "hang") and sig.id != "unclassified_fatal_error":
            assert "unclassified_fatal_error" in sig.explains or "unclassified_fatal_error" in sig.suppresses, sig.id
