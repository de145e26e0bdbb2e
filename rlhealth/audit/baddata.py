"""Training-metric data the audit refuses, each named by file, line and value.

The diagnosis keeps the numeric values of a metric record and counts a record that does not parse;
that is enough to judge a live run, but a completion record built on such data would select a
checkpoint from a reward series with holes in it. The audit reads the same lines again
(``logs.scan_logs``'s streaming pass) and reports:

* ``malformed_metric_line``: a ``WANDB_MIRROR kind=train`` line whose payload is not a JSON object,
  or a legacy python-dict block that does not parse;
* ``reward_not_numeric``: a reward (any alias of ``METRIC_ALIASES["reward"]``, and the declared
  policy's metric) whose value is not a number (MarinSkyRL's selector raises
  ``ValueError: ... reward='...'`` on the same record);
* ``reward_missing``: a reward written as null, or a record without any reward key in a run whose
  other records carry one.

Python only finds and names them; whether each blocks the audit is data
(``rules/audit.yaml`` ``bad_data``). Quoted values are redacted and cut short.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from rlhealth.audit.knowledge import audit_rules
from rlhealth.probes.parse import trainer as tp
from rlhealth.redact import redact

MAX_BLOCK_LINES = 4000
MAX_BLOCK_CHARS = 64 * 1024
VALUE_CHARS = 120


def _shown(value) -> str:
    text = redact(repr(value))
    return text if len(text) <= VALUE_CHARS else text[: VALUE_CHARS - 1] + "…"


def _is_number(value) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, (int, float)):
        return True
    if isinstance(value, str):
        try:
            float(value.strip())
        except ValueError:
            return False
        return True
    return False


@dataclass
class MetricDataCheck:
    """Fed every line of every log file in order (``feed``); ``findings()`` once all are read."""
    reward_keys: tuple[str, ...]
    found: list[dict] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)
    with_reward: int = 0
    without_reward: list[dict] = field(default_factory=list)
    without_reward_count: int = 0
    _block: list[str] | None = None
    _block_chars: int = 0

    def _add(self, kind: str, source: str, line: int, value: str, detail: str) -> None:
        self.counts[kind] = self.counts.get(kind, 0) + 1
        if self.counts[kind] <= audit_rules()["bad_data"]["listed_per_kind"]:
            self.found.append({"kind": kind, "source": source, "line": line, "value": value, "detail": detail})

    def _record(self, source: str, line: int, step, payload: dict) -> None:
        present = [k for k in self.reward_keys if k in payload]
        for k in present:
            v = payload[k]
            if v is None:
                self._add("reward_missing", source, line, f"{k}=null", f"step {step}: {k} is null")
            elif not _is_number(v):
                self._add("reward_not_numeric", source, line, f"{k}={_shown(v)}",
                          f"step {step}: {k}={_shown(v)} is not a number")
        if present:
            self.with_reward += 1
        else:
            self.without_reward_count += 1
            if len(self.without_reward) < audit_rules()["bad_data"]["listed_per_kind"]:
                self.without_reward.append({"source": source, "line": line, "step": step})

    def feed(self, source: str, n: int, line: str) -> None:
        if "WANDB_MIRROR" in line:
            found = tp.wandb_mirror_payload(line)
            if found is not None and found[0] == "train":
                kind, step, payload = found
                if payload is None:
                    shown = _shown(line.strip())
                    self._add("malformed_metric_line", source, n, shown,
                              f"WANDB_MIRROR kind=train step={step}: the metrics payload is not a JSON object: {shown}")
                else:
                    self._record(source, n, step, payload)
            return
        if "{'" in line:
            self._block, self._block_chars = [], 0
        if self._block is not None:
            self._block.append(line)
            self._block_chars += len(line)
            if len(self._block) > MAX_BLOCK_LINES or self._block_chars > MAX_BLOCK_CHARS:
                self._block = None
        if tp.DICT_END_RE.search(line):
            text = "\n".join(self._block) if self._block else line
            self._block = None
            payload = tp.dict_block_payload(text)
            if payload is None:
                shown = _shown(line.strip())
                self._add("malformed_metric_line", source, n, shown,
                          f"the python-dict metrics block ending here does not parse: {shown}")
            else:
                self._record(source, n, payload.get("trainer/global_step"), payload)

    def end_file(self) -> None:
        self._block = None

    def findings(self) -> list[dict]:
        """Every refusal, in file order per kind; a record without a reward counts only when
        another record of the run carries one."""
        out = list(self.found)
        if self.with_reward and self.without_reward_count:
            keys = " / ".join(self.reward_keys)
            for r in self.without_reward:
                out.append({"kind": "reward_missing", "source": r["source"], "line": r["line"], "value": "absent",
                            "detail": f"step {r['step']}: no {keys} in a run whose other records carry it"})
            self.counts["reward_missing"] = self.counts.get("reward_missing", 0) + self.without_reward_count
        return out


def reward_keys(policy_metric: str | None) -> tuple[str, ...]:
    keys = tuple(tp.METRIC_ALIASES["reward"])
    return keys + ((policy_metric,) if policy_metric and policy_metric not in keys else ())


def refusals(check: MetricDataCheck) -> dict:
    """``{"findings": [...], "counts": {...}}`` for the record, severities from the data."""
    found = check.findings()
    sev = audit_rules()["bad_data"]["severity"]
    return {"findings": [{**f, "severity": sev[f["kind"]]} for f in found],
            "counts": dict(sorted(check.counts.items()))}


def problems(refused: dict) -> list[tuple[str, str, str]]:
    """(severity, code, message) per kind, each message naming file:line and value of every listed case."""
    sev = audit_rules()["bad_data"]["severity"]
    codes = audit_rules()["bad_data"]["codes"]
    out = []
    for kind, total in refused["counts"].items():
        cases = [f for f in refused["findings"] if f["kind"] == kind]
        listed = "; ".join(f"{f['source']}:{f['line']}: {f['detail']}" for f in cases)
        more = f" (and {total - len(cases)} more)" if total > len(cases) else ""
        label = {"malformed_metric_line": "malformed training-metric line(s)",
                 "reward_not_numeric": "non-numeric reward(s)",
                 "reward_missing": "missing reward(s)"}[kind]
        out.append((sev[kind], codes[kind], f"{total} {label}: {listed}{more}"))
    return out
