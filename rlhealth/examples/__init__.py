"""The example bundles shipped with the package (``rlhealth examples``).

Each example is a directory (a real incident bundle) with a ``<name>.yaml`` beside it saying what
it is, the time to judge it at (``now``: a diagnosis is judged at a time, and without it the wall
clock makes the evidence stale) and what its diagnosis shows. The command line and the MCP server
read them through ``load_examples``.
"""
from __future__ import annotations

import shlex
from importlib import resources
from pathlib import Path
from typing import Any


def example_names() -> list[str]:
    root = resources.files(__name__)
    return sorted(p.name for p in root.iterdir() if p.is_dir() and not p.name.startswith(("_", ".")))


def example_path(name: str) -> Path:
    """The bundle directory of one example (KeyError when there is none of that name)."""
    if name not in example_names():
        raise KeyError(name)
    return Path(str(resources.files(__name__).joinpath(name)))


def load_examples() -> list[dict[str, Any]]:
    """Every example: ``name``, ``path``, ``title``, ``now``, ``verdict``, ``exit_code``, ``shows``
    and ``argv`` (the exact command line that diagnoses it), in name order."""
    from rlhealth.packaged import parse_yaml
    from rlhealth.usage import VERDICT_EXIT

    out = []
    root = resources.files(__name__)
    for name in example_names():
        meta_file = root.joinpath(f"{name}.yaml")
        meta = parse_yaml(meta_file.read_text(encoding="utf-8")) if meta_file.is_file() else {}
        meta = meta if isinstance(meta, dict) else {}
        path = example_path(name)
        now = str(meta["now"]) if meta.get("now") else None
        argv = ["rlhealth", "diagnose", str(path)] + (["--now", now] if now else [])
        verdict = meta.get("verdict")
        out.append({"name": name, "path": str(path), "title": meta.get("title") or "", "now": now,
                    "verdict": verdict, "exit_code": VERDICT_EXIT.get(verdict), "shows": meta.get("shows") or "",
                    "argv": argv, "command": shlex.join(argv)})
    return out
