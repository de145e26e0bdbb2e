"""The incident corpus: where it is and how to read an incident's expectations."""
from __future__ import annotations

from pathlib import Path

import yaml

INCIDENTS_DIR = Path(__file__).parent / "incidents"
REPO = Path(__file__).parent.parent


def incident_dirs() -> list[Path]:
    return sorted(p for p in INCIDENTS_DIR.iterdir() if p.is_dir() and not p.name.startswith(("_", ".")))


def load_expected(d: Path) -> dict:
    return yaml.safe_load((d / "expected.yaml").read_text())




def rlhealth_argv(*args: str) -> list[str]:
    """The installed console script (not `python -m`, which would import the source tree from cwd)."""
    import sys
    return [str(Path(sys.executable).parent / "rlhealth"), *args]
