"""The backend registry (probes/backends.py) is where the command line, the MCP tool, the probe
options, the capture files and the bundle reader take backend names and layouts from."""
from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest
from pydantic import ValidationError

from rlhealth.cli import build_parser, probe_options
from rlhealth.probes import backends as B
from rlhealth.probes.capture import CaptureManifest, ControllerState
from rlhealth.probes.options import ProbeOptions
from rlhealth.usage import UsageError

ROOT = Path(__file__).resolve().parents[2]


def test_every_backend_names_a_module_with_a_capture_function():
    assert B.BACKEND_NAMES == ("iris", "slurm")
    for backend in B.BACKENDS.values():
        capture = backend.capture
        assert callable(capture) and capture.__module__ == backend.module
        params = list(inspect.signature(capture).parameters.values())
        assert len(params) == 2 and params[1].name == "now" and params[1].default is None


def test_the_command_line_takes_its_backends_from_the_registry(tmp_path):
    parser = build_parser()
    for name in B.BACKEND_NAMES:
        args = parser.parse_args(["probe", "--backend", name, "--job", "1", "--bundle-root", str(tmp_path)])
        assert probe_options(args).backend == name
    with pytest.raises(SystemExit):
        parser.parse_args(["probe", "--backend", "nomad", "--job", "1"])


def test_probe_options_and_capture_files_refuse_an_unregistered_backend(tmp_path):
    with pytest.raises(UsageError, match="unknown backend 'nomad'; known: iris, slurm"):
        ProbeOptions.from_flags(backend="nomad", job="1", bundle_root=tmp_path)
    assert CaptureManifest(captured_at="t", backend="slurm", cluster="c", job_id="1").backend == "slurm"
    with pytest.raises(ValidationError):
        CaptureManifest(captured_at="t", backend="nomad", cluster="c", job_id="1")
    with pytest.raises(ValidationError):
        ControllerState(source="nomad", state="running")


@pytest.mark.parametrize("tail, layout", [
    (("jsc-jupiter", "slurm", "48211"), "jupiter"),
    (("cw-us-east-02a", "alice", "grpo"), "iris"),
    (("cw-us-east-02a", "alice"), "unknown"),
])
def test_layout_from_the_bundle_path(tail, layout):
    assert B.layout_of_path(tail) == layout


@pytest.mark.parametrize("manifest, current, layout", [
    ({"cluster": "jsc-jupiter"}, "iris", "jupiter"),
    ({"job_id": "/slurm/48211", "cluster": "other"}, "unknown", "jupiter"),
    ({"cluster": "cw-us-east-02a"}, "unknown", "iris"),
    ({"cluster": "cw-us-east-02a"}, "jupiter", "jupiter"),
    ({}, "unknown", "unknown"),
])
def test_layout_from_the_manifest(manifest, current, layout):
    assert B.layout_of_manifest(manifest, current) == layout


def test_layouts_map_back_to_their_backends():
    assert B.backend_for_layout("jupiter").name == "slurm"
    assert B.backend_for_layout("iris").name == "iris"
    assert B.backend_for_layout("unknown").name == B.DEFAULT_BACKEND
    assert B.bundle_log_is_current_leg("jupiter") and not B.bundle_log_is_current_leg("iris")


def _branches_on(path: Path, names: set[str]) -> list[str]:
    """Comparisons with, and ``Literal[...]`` of, any of ``names`` in a source file."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
        elif isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id == "Literal":
            operands = [node.slice]
        else:
            continue
        for operand in operands:
            for c in ast.walk(operand):
                if isinstance(c, ast.Constant) and isinstance(c.value, str) and \
                        (c.value in names or any(c.value.startswith(n) for n in names if n.startswith("/"))):
                    found.append(f"{path.name}:{node.lineno}: {c.value!r}")
    return found


@pytest.mark.parametrize("rel", ["probes/options.py", "probes/capture.py", "probes/bundle.py", "rlhealth/cli.py",
                                 "rlhealth/next_action.py",
                                 "rlhealth/mcp_server.py", "rlhealth/observers/job.py", "rlhealth/observers/engines.py"])
def test_no_branch_on_a_backend_or_layout_name_outside_the_registry(rel):
    names = set(B.BACKEND_NAMES) | {b.layout for b in B.BACKENDS.values()} | {"jsc-jupiter", "/slurm/"}
    assert _branches_on(ROOT / rel, names) == []


def test_the_branch_finder_sees_a_branch(tmp_path):
    path = tmp_path / "x.py"
    path.write_text('if args.backend == "slurm":\n    pass\nx: Literal["iris", "slurm"]\n'
                    'if str(m.get("job_id")).startswith("/slurm/"):\n    pass\n')
    assert _branches_on(path, {"iris", "slurm"}) == ["x.py:1: 'slurm'", "x.py:3: 'iris'", "x.py:3: 'slurm'"]


def test_the_next_actions_probe_command_names_the_job_through_its_backend(tmp_path):
    calls = []

    def last_host():
        calls.append(1)
        return "login-2"
    assert B.BACKENDS["iris"].job_flags("/alice/job", "cw", {}, last_host) == ["--cluster", "cw", "--job", "/alice/job"]
    assert calls == []      # the verdict history is read only where a flag needs it
    assert B.BACKENDS["slurm"].job_flags("/slurm/4821", "jsc-jupiter", {"experiment_dir": "/e/x"}, last_host) == \
        ["--host", "login-2", "--cluster", "jsc-jupiter", "--job", "4821", "--experiment-dir", "/e/x"]
    assert B.BACKENDS["slurm"].job_flags("/slurm/4821", "jsc-jupiter", {"login_host": "jl"}, lambda: None)[:2] == \
        ["--host", "jl"]
