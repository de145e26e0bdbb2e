"""The read-only guarantee for remote commands (contract §6).

Every command a live probe sends (over SSH or through ``pods/exec``) is an argv
list checked here against ``rules/remote_commands.yaml`` *before* it is sent.
Anything not on the list raises ``CommandRefused``; nothing is ever sent through
a shell without ``shlex.quote`` of each (already validated) argument.
"""
from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

import yaml


class CommandRefused(Exception):
    """A command that is not on the read-only allow-list; it was not sent."""


@dataclass(frozen=True)
class _Program:
    name: str
    subcommand: tuple[str, ...]
    args: tuple[re.Pattern, ...]
    wraps: tuple[str, ...]
    # options whose value is the next argument, e.g. srun ``-w <node>``: the value must match the
    # option's pattern and is never taken for the wrapped program's name
    option_values: dict[str, re.Pattern]
    # when set, the arguments after the subcommand must match these patterns one to one, in order
    # (e.g. ``scontrol write batch_script <id> -``: the ``-`` that sends the script to stdout is
    # mandatory, without it scontrol would write a file)
    exact_args: tuple[re.Pattern, ...] | None = None


@dataclass(frozen=True)
class AllowList:
    forbidden_chars: frozenset[str]
    programs: dict[str, tuple[_Program, ...]]   # a program may allow several subcommands (variants)

    def check(self, argv: list[str] | tuple[str, ...]) -> list[str]:
        """Return ``argv`` as a list if allowed, else raise ``CommandRefused``."""
        argv = list(argv)
        if not argv:
            raise CommandRefused("empty command")
        for arg in argv:
            if not isinstance(arg, str):
                raise CommandRefused(f"non-string argument {arg!r}")
            bad = sorted(set(arg) & self.forbidden_chars)
            if bad or "\x00" in arg:
                raise CommandRefused(f"argument {arg!r} contains forbidden characters {''.join(bad)!r}")
        self._check(argv, depth=0)
        return argv

    def _check(self, argv: list[str], depth: int) -> None:
        name = argv[0]
        variants = self.programs.get(name)
        if variants is None:
            raise CommandRefused(f"program {name!r} is not on the read-only allow-list")
        rest = argv[1:]
        matching = [v for v in variants if tuple(rest[:len(v.subcommand)]) == v.subcommand]
        if not matching:
            allowed = " | ".join(repr(" ".join(v.subcommand)) for v in variants)
            raise CommandRefused(f"{name}: only {allowed} is allowed, got {' '.join(rest[:2])!r}")
        program = max(matching, key=lambda v: len(v.subcommand))
        rest = rest[len(program.subcommand):]
        if program.exact_args is not None:
            if len(rest) != len(program.exact_args) or not all(p.fullmatch(a) for p, a in zip(program.exact_args, rest)):
                raise CommandRefused(f"{name} {' '.join(program.subcommand)}: arguments {rest!r} are not exactly "
                                     f"{[p.pattern for p in program.exact_args]}")
            return
        i = 0
        while i < len(rest):
            arg = rest[i]
            if arg in program.option_values:
                if i + 1 >= len(rest) or not program.option_values[arg].fullmatch(rest[i + 1]):
                    value = rest[i + 1] if i + 1 < len(rest) else None
                    raise CommandRefused(f"{name}: value {value!r} of {arg} is not allowed")
                i += 2
                continue
            if program.wraps and arg in program.wraps and depth == 0:
                self._check(rest[i:], depth=1)
                return
            if not any(p.fullmatch(arg) for p in program.args):
                raise CommandRefused(f"{name}: argument {arg!r} is not allowed")
            i += 1
        if program.wraps:
            raise CommandRefused(f"{name}: must wrap one of {', '.join(program.wraps)}")

    def shell_line(self, argv: list[str]) -> str:
        """The checked argv as one quoted command line for SSH exec."""
        return " ".join(shlex.quote(a) for a in self.check(argv))


@lru_cache(maxsize=1)
def load_allowlist() -> AllowList:
    text = resources.files("rlhealth.rules").joinpath("remote_commands.yaml").read_text()
    data = yaml.safe_load(text)
    programs = {}
    for name, spec in data["programs"].items():
        programs[name] = tuple(
            _Program(
                name=name,
                subcommand=tuple(v.get("subcommand") or ()),
                args=tuple(re.compile(p) for p in v.get("args") or ()),
                wraps=tuple(v.get("wraps") or ()),
                option_values={k: re.compile(p) for k, p in (v.get("option_values") or {}).items()},
                exact_args=tuple(re.compile(p) for p in v["exact_args"]) if "exact_args" in v else None,
            )
            for v in (spec.get("variants") or [spec]))
    return AllowList(forbidden_chars=frozenset(data["forbidden_chars"]), programs=programs)


def check_command(argv: list[str] | tuple[str, ...]) -> list[str]:
    """Module-level shortcut: validate ``argv`` against the packaged allow-list."""
    return load_allowlist().check(argv)
