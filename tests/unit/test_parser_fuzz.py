"""Every text parser of probes/parse takes garbled input without raising: each string constant of
the unit tests (real command outputs and log lines, as the tests hold them) with a share of its
numbers replaced by garbage ("1e999", "nan", 40 nines, "N/A", other scripts' digits...) and, in
some variants, separators inserted at random. (Found this way: an nvidia-smi reading of 1e999 and
an exception count of 1e999 raised OverflowError.) A number of thousands of digits, which ``int()``
refuses past 4300, is not parsed: its line or value counts as garbled."""
from __future__ import annotations

import ast
import inspect
import random
import re
from pathlib import Path

import pytest

import garble
from rlhealth.probes.kubernetes import _exec_status
from rlhealth.probes.parse import flight_recorder, iris, kubernetes, launch, nvidia_smi, slurm, trainer, vllm

GARBLED = [g for g in garble.GARBLED if g != "\udcff"] + ["[Not Supported]", "-1"]    # text: no lone surrogate
_NUMBER = re.compile(r"[0-9]+(?:\.[0-9]+)?")


def _fixtures() -> list[str]:
    found = set()
    for path in sorted(Path(__file__).parent.glob("test_*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and len(node.value) > 20:
                found.add(node.value)
    return sorted(found)


def _parsers() -> list[tuple[str, object]]:
    out = []
    for module in (iris, kubernetes, nvidia_smi, slurm, trainer):
        for name, fn in sorted(vars(module).items()):
            if name.startswith("parse") and inspect.isfunction(fn) and fn.__module__ == module.__name__:
                required = [p for p in inspect.signature(fn).parameters.values() if p.default is p.empty]
                if len(required) == 1:
                    out.append((f"{module.__name__}.{name}", fn))
    out.append(("launch.parse_config yaml", lambda text: launch.parse_config(text, "resolved_config.yaml")))
    out.append(("launch.parse_config json", lambda text: launch.parse_config(text, "resolved_config.json")))
    out.append(("vllm.parse_stats", lambda text: vllm.parse_stats(text, "x.log", 1, None)))
    out.append(("slurm.expand_hostlist", slurm.expand_hostlist))
    out.append(("slurm.job_id_key", slurm.job_id_key))
    out.append(("launch.gres_gpus", launch.gres_gpus))
    out.append(("launch.max_retries_from", lambda text: launch.max_retries_from(
        [(token, line, "launch.sh") for line, token in launch.script_args(text)])))
    out.append(("kubernetes.parse_pod_name", lambda text: kubernetes.parse_pod_name(text, "rl-run-2")))
    out.append(("flight_recorder.rank_of", lambda text: flight_recorder.rank_of(text, "nccl_trace_rank_")))
    out.append(("kubernetes._exec_status", lambda text: _exec_status(text, "v5.channel.k8s.io")))
    return out


@pytest.mark.parametrize("seed", range(2))
def test_parsers_take_garbled_text(seed):
    rng = random.Random(seed)
    fixtures, parsers = _fixtures(), _parsers()
    assert len(fixtures) > 200 and len(parsers) > 20
    failed = {}
    for text in fixtures:
        for variant in range(4):
            garbled = _NUMBER.sub(lambda m: rng.choice(GARBLED) if rng.random() < 0.3 else m.group(0), text)
            if variant >= 2:
                garbled = "".join(c if rng.random() > 0.02 else rng.choice(",|:= \n\t\"'{}[]") for c in garbled)
            for name, parse in parsers:
                try:
                    parse(garbled)
                except Exception as exc:  # noqa: BLE001 - collected: every failing parser is named
                    failed.setdefault(name, f"{type(exc).__name__}: {exc} on {garbled[:200]!r}")
    assert failed == {}


_TOKENIZERS = {"launch.max_retries_from", "launch.parse_config yaml"}
"""Parsers whose pure-Python tokenizers (shlex, PyYAML) take about 0.1 s per 100,000 characters."""


@pytest.mark.parametrize("run,positions", [(garble.LONG_RUNS[0], 8), (garble.LONG_RUNS[1], 1)],
                         ids=lambda value: f"{len(value)}-digits" if isinstance(value, str) else f"{value}-positions")
def test_parsers_take_numbers_of_thousands_of_digits(run, positions):
    """Every fixture with each of its first ``positions`` numbers in turn replaced by ``run`` (more
    digits than ``int()`` converts), and with half of them (the shorter run): a line that does not
    parse, never an exception. The longer run skips the slow tokenizers (the shorter one reaches
    their conversions) and would show a regex that backtracks over the whole run as minutes."""
    rng = random.Random(len(run))
    fixtures = [t for t in _fixtures() if _NUMBER.search(t)]
    parsers = [(name, parse) for name, parse in _parsers() if positions > 1 or name not in _TOKENIZERS]
    failed = {}
    for text in fixtures:
        variants = [text[:m.start()] + run + text[m.end():] for m in list(_NUMBER.finditer(text))[:positions]]
        if positions > 1:
            variants.append(_NUMBER.sub(lambda m: run if rng.random() < 0.5 else m.group(0), text))
        for garbled in variants:
            for name, parse in parsers:
                try:
                    parse(garbled)
                except Exception as exc:  # noqa: BLE001 - collected: every failing parser is named
                    failed.setdefault(name, f"{type(exc).__name__}: {str(exc)[:100]} on {garbled[:200]!r}")
    assert failed == {}
