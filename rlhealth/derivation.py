"""The derivation of a diagnosis: every derived fact back to the measurements and quoted lines.

Built from the engine's derived facts (each records the facts its rule matched) and the
measurement facts. ``nodes()`` is the JSON ``derivation`` (contract: kinds verdict, gate,
conclusion, measurement, missing); ``quoted()`` gives the evidence lines under one fact;
``why()`` the short chain the Markdown report prints (verdict <- gate <- conclusions <- lines),
stepping over bookkeeping rules (``explain: false``).
"""
from __future__ import annotations

from typing import Any

from rlhealth.catalog import Catalog
from rlhealth.engine import EngineResult
from rlhealth.facts import Derived, Evidence, Fact

_WHY_LINES = 60


def _summary(fact: Fact) -> str:
    return fact.summary()


class Derivation:
    def __init__(self, facts: list[Fact], result: EngineResult, catalog: Catalog):
        self.measured = {f.fact_id: f for f in facts}
        self.derived = {d.fact_id: d for d in result.derived}
        self.explain = {r.id: r.explain for r in catalog.rules}
        self.also = result.also

    # ------------------------------------------------------------------ evidence
    def quoted(self, fact_id: Any) -> list[Evidence]:
        """Evidence lines under a fact, in the order its rules matched them (job facts last)."""
        out: list[Evidence] = []
        last: list[Evidence] = []
        seen: set[str] = set()

        def walk(fid: str) -> None:
            if fid in seen:
                return
            seen.add(fid)
            if fid in self.measured:
                fact = self.measured[fid]
                target = last if fact.kind == "job" else out
                target.extend(e for e in fact.evidence if e not in target)
            elif fid in self.derived:
                for child in self.derived[fid].derived_from:
                    walk(child)
        walk(str(fact_id))
        return out + [e for e in last if e not in out]

    # ------------------------------------------------------------------ JSON nodes
    def _roots(self) -> list[str]:
        return sorted(d.fact_id for d in self.derived.values() if d.kind in ("verdict", "gate", "confidence"))

    def nodes(self) -> list[dict[str, Any]]:
        reach: list[str] = []
        seen: set[str] = set()
        stack = list(reversed(self._roots()))
        while stack:
            fid = stack.pop()
            if fid in seen:
                continue
            seen.add(fid)
            reach.append(fid)
            if fid in self.derived:
                stack.extend(reversed(self.derived[fid].derived_from))
                for alt in self.also.get(fid, []):
                    stack.extend(reversed(alt["from"]))
        return [self._node(fid) for fid in sorted(reach, key=self._sort_key)]

    def _sort_key(self, fid: str) -> tuple:
        order = {"verdict": 0, "confidence": 1, "gate": 2, "verdict_candidate": 3, "conclusion": 4, "finding": 5}
        if fid in self.derived:
            return (order.get(self.derived[fid].kind, 6), fid)
        return (7, fid)

    def _node(self, fid: str) -> dict[str, Any]:
        if fid in self.derived:
            d = self.derived[fid]
            kind = d.kind if d.kind in ("verdict", "gate") else "conclusion"
            node = {"id": fid, "kind": kind, "rule": d.rule, "statement": d.statement, "from": list(d.derived_from),
                    "evidence": []}
            if fid in self.also:
                node["also"] = sorted(self.also[fid], key=lambda a: (a["rule"], a["from"]))
            return node
        fact = self.measured.get(fid)
        if fact is None:
            return {"id": fid, "kind": "missing", "statement": f"{fid}: not measured", "from": [], "evidence": []}
        if fact.kind == "gate_slot":
            return {"id": fid, "kind": "missing", "from": [], "evidence": [], "statement": self._gate_inputs(fact.gate)}
        evidence = [{"source": e.source, "line": e.line} for e in fact.evidence]
        if not evidence:
            return {"id": fid, "kind": "missing", "from": [], "evidence": [],
                    "statement": f"nothing quoted for {_summary(fact)}"}
        return {"id": fid, "kind": "measurement", "from": [], "evidence": evidence, "statement": _summary(fact)}

    def _gate_inputs(self, gate: str) -> str:
        slot = self.measured.get(f"gate_slot:{gate}")
        present = getattr(slot, "present", "none")
        absent = getattr(slot, "absent", "none")
        return f"no rule concluded on gate {gate}; evidence present: {present}; absent: {absent}"

    # ------------------------------------------------------------------ Markdown WHY
    def why(self, verdict_id: str) -> list[str]:
        """Indented lines: the verdict, the facts it rests on, down to the quoted lines."""
        lines: list[str] = []
        shown: set[str] = set()

        def visit(fid: str, depth: int) -> None:
            if len(lines) >= _WHY_LINES:
                return
            pad = "  " * depth
            if fid in self.measured:
                if fid in shown:
                    return
                shown.add(fid)
                fact = self.measured[fid]
                if fact.kind == "gate_slot":
                    lines.append(f"{pad}<- missing: {self._gate_inputs(fact.gate)}")
                    return
                if not fact.evidence:
                    lines.append(f"{pad}<- missing: nothing quoted for {_summary(fact)}")
                for e in fact.evidence[:2]:
                    where = f"{e.source}:{e.line}" if e.line else e.source
                    lines.append(f"{pad}= {where}: {e.text} (summary)" if e.summary else f"{pad}> {where}: {e.text}")
                return
            d = self.derived.get(fid)
            if d is None:
                return
            if not self.explain.get(d.rule, True):
                for child in d.derived_from:
                    visit(child, depth)
                return
            if fid in shown:
                return
            shown.add(fid)
            lines.append(f"{pad}<- [{d.rule}] {d.statement}")
            for alt in sorted(self.also.get(fid, []), key=lambda a: a["rule"]):
                lines.append(f"{pad}   and [{alt['rule']}] {alt['statement']}")
            children = sorted(d.derived_from, key=lambda c: 0 if getattr(self.derived.get(c), "kind", "") == "gate" else 1)
            for child in children:   # a verdict's gate first: verdict <- gate <- finding <- lines
                if child in self.measured and self.measured[child].kind == "job" and d.kind != "conclusion":
                    continue   # the job's identity lines add nothing under a finding or verdict
                visit(child, depth + 1)
        visit(verdict_id, 0)
        if lines and lines[0].startswith("<- "):
            lines[0] = lines[0][3:]
        return lines
