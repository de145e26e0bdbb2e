"""Which role (policy mesh, inference engine, driver) a process and a GPU have.

The table is data (``rules/process_roles.yaml``); the same table is used by the Kubernetes and the
Slurm probes. Pure functions over parsed ``ps`` rows (``{"pid", "args"}``) and nvidia-smi rows.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from rlhealth.packaged import packaged_yaml


@dataclass
class RoleTable:
    """Process -> role mapping, loaded from ``rules/process_roles.yaml``."""
    rules: list[tuple[str, re.Pattern, bool]] = field(default_factory=list)  # (role, pattern, gpu_role)
    stack_roles: frozenset[str] = frozenset()
    max_stacks_per_pod: int = 8

    @classmethod
    def from_data(cls, data: dict[str, Any]) -> "RoleTable":
        rules = []
        for entry in data.get("roles") or []:
            for pat in entry.get("patterns") or []:
                rules.append((entry["role"], re.compile(pat), bool(entry.get("gpu_role", True))))
        return cls(rules=rules, stack_roles=frozenset(data.get("stack_roles") or []),
                   max_stacks_per_pod=int(data.get("max_stacks_per_pod", 8)))

    def role_of(self, text: str) -> str | None:
        for role, pat, _ in self.rules:
            if pat.search(text or ""):
                return role
        return None

    def gpu_roles(self) -> set[str]:
        return {role for role, _, gpu in self.rules if gpu}


def process_roles(ps_rows: list[dict], table: RoleTable) -> dict[int, str]:
    """pid -> role for every process whose args match the table."""
    out = {}
    for row in ps_rows:
        role = table.role_of(row["args"])
        if role:
            out[row["pid"]] = role
    return out


def gpu_roles(inventory: list[dict], apps: list[dict], ps_rows: list[dict],
              table: RoleTable) -> dict[int, tuple[str, list[str]]]:
    """GPU index -> (role, process descriptions) from compute apps joined with ``ps``.

    A GPU whose processes all map to one GPU role (``policy`` / ``inference``) gets it;
    none, or a mix of roles (colocated), gives ``unknown``. The process list is kept either way.
    """
    by_uuid = {row["uuid"]: row["gpu"] for row in inventory}
    args_by_pid = {row["pid"]: row["args"] for row in ps_rows}
    allowed = table.gpu_roles()
    procs: dict[int, list[str]] = {}
    roles: dict[int, set[str]] = {}
    for app in apps:
        gpu = by_uuid.get(app["gpu_uuid"])
        if gpu is None:
            continue
        args = args_by_pid.get(app["pid"]) or app.get("process_name") or ""
        role = table.role_of(args) or table.role_of(app.get("process_name") or "")
        procs.setdefault(gpu, []).append(f"{app['pid']} {args}".strip())
        roles.setdefault(gpu, set())
        if role in allowed:
            roles[gpu].add(role)
        else:
            roles[gpu].add("unknown")
    out = {}
    for row in inventory:
        gpu = row["gpu"]
        rs = roles.get(gpu, set())
        role = next(iter(rs)) if len(rs) == 1 and "unknown" not in rs else "unknown"
        out[gpu] = (role, procs.get(gpu, []))
    return out




@lru_cache(maxsize=1)
def load_role_table() -> RoleTable:
    """The packaged role table (``rules/process_roles.yaml``)."""
    return RoleTable.from_data(packaged_yaml("process_roles.yaml"))
