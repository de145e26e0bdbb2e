"""Garbled evidence for the robustness tests: numbers replaced by what broken writers and hostile
files hold, JSON members replaced by a value of another type (tests/test_garbled_evidence.py,
tests/audit/test_garbled_audit.py, tests/unit/test_parser_fuzz.py)."""
from __future__ import annotations

import json
import random
import re
from pathlib import Path
from typing import Iterable

GARBLED = ["1.2.3", ".", "..", "-", "1e999", "-1e999", "nan", "inf", "-0", "9" * 40, "0x1f", "١٢", "1,5", "", "+", "1.",
           ".5", "N/A", "\x00", "\udcff"]
"""What a number can become (``\\udcff`` is written as the lone byte 0xff)."""
LONG_RUNS = ["9" * 5_000, "1" * 100_000]
"""Numbers of more digits than ``int()`` converts (Python 3.11+ refuses past 4300 digits)."""
ODD = [None, 0, -1, 1.5, 1e308, -1e308, "", "x", "NaN", "2026-13-45T99:99:99Z", [], {}, [1, "a"], {"a": None}, True]
"""What a JSON member can become."""
NUMBER = re.compile(rb"(?<![A-Za-z])[0-9]+(?:\.[0-9]+)?")
MAX_FILE_BYTES = 2_000_000


def garble_numbers(data: bytes, rng: random.Random, share: float, choices: list[str] = GARBLED) -> bytes:
    """``data`` with a share of its numbers replaced by an entry of ``choices``."""
    return NUMBER.sub(lambda m: rng.choice(choices).encode("utf-8", "surrogateescape") if rng.random() < share
                      else m.group(0), data)


def retyped(value, rng: random.Random, share: float, choices: list = ODD):
    """``value`` with a share of its members (at any depth) replaced by an entry of ``choices``."""
    if rng.random() < share:
        return rng.choice(choices)
    if isinstance(value, dict):
        return {k: retyped(v, rng, share, choices) for k, v in value.items()}
    if isinstance(value, list):
        return [retyped(v, rng, share, choices) for v in value]
    return value


def files(*roots: Path, skip_suffixes: tuple[str, ...] = ()) -> Iterable[Path]:
    """The regular files (no symlinks) under ``roots`` up to MAX_FILE_BYTES, in name order."""
    for root in roots:
        for path in sorted(Path(root).rglob("*")):
            if (path.is_file() and not path.is_symlink() and path.suffix not in skip_suffixes
                    and path.stat().st_size <= MAX_FILE_BYTES):
                yield path


def retype_json_file(path: Path, rng: random.Random, share: float, choices: list = ODD) -> None:
    """A JSON or JSON-lines file rewritten with ``retyped`` members (lines that do not parse kept)."""
    lines = path.read_bytes().splitlines() if path.suffix == ".jsonl" else [path.read_bytes()]
    out = []
    for line in lines:
        try:
            out.append(json.dumps(retyped(json.loads(line), rng, share, choices)).encode())
        except ValueError:
            out.append(line)
    path.write_bytes(b"\n".join(out) + b"\n")
