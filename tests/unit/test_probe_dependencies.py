"""One-way dependencies of the probes: they never import the command line (``rlhealth.cli``), they
take a typed ``ProbeOptions``, and usage errors / durations come from the leaf ``rlhealth.usage``."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

import rlhealth.probes
from rlhealth import usage
from rlhealth.probes.options import ProbeOptions


def _imports(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
        elif isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
    return names


def test_probes_never_import_the_command_line():
    files = sorted(Path(rlhealth.probes.__file__).parent.rglob("*.py"))
    assert len(files) > 10
    offenders = {str(f): sorted(m for m in _imports(f) if m == "rlhealth.cli" or m.startswith("rlhealth.cli."))
                 for f in files}
    assert {f: m for f, m in offenders.items() if m} == {}


def test_usage_is_a_leaf():
    assert not [m for m in _imports(Path(usage.__file__)) if m.startswith("rlhealth")]


def test_probe_options_from_flags():
    o = ProbeOptions.from_flags(backend="slurm", job="12", bundle_root=Path("/b"), deadline="2m", polls=0,
                                poll_interval="1.5s", host="login")
    assert (o.deadline_s, o.deadline_text, o.polls, o.poll_interval_s, o.command_timeout_s) == (120.0, "2m", 1, 1.5, 60.0)
    with pytest.raises(usage.UsageError):
        ProbeOptions.from_flags(backend="slurm", job="12", bundle_root=Path("/b"), deadline="soon")
    with pytest.raises(usage.UsageError):
        ProbeOptions.from_flags(backend="slurm", job="12", bundle_root=Path("/b"), poll_interval="-1s")


def test_cli_builds_the_options():
    from rlhealth.cli import build_parser, probe_options
    args = build_parser().parse_args(["probe", "--backend", "slurm", "--job", "7", "--host", "login", "--polls", "4",
                                      "--poll-interval", "30s", "--deadline", "10m"])
    o = probe_options(args)
    assert isinstance(o, ProbeOptions) and (o.polls, o.poll_interval_s, o.deadline_s) == (4, 30.0, 600.0)


def test_the_bundle_reader_never_loads_the_rule_base_nor_chooses_the_first_error():
    """probes/bundle.py is handed the catalog (type-only import) and holds no first-causal-error choice
    (that judgement is rlhealth.first_error, in the observation layer)."""
    path = Path(rlhealth.probes.__file__).parent / "bundle.py"
    tree = ast.parse(path.read_text())
    runtime = set()
    for node in tree.body:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            continue
        for sub in ast.walk(node):
            if isinstance(sub, ast.ImportFrom) and sub.module:
                runtime.add(sub.module)
    assert "rlhealth.catalog" not in runtime, sorted(runtime)
    defined = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
    assert not defined & {"first_errors_by_attempt", "first_causal_error", "first_causal_signature"}
