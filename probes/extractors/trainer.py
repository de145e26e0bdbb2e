"""Trainer progress and its metric records: WANDB_MIRROR JSON and legacy python-dict metric
records (the first record of a step kept), eval records, malformed metric lines, "Training Step
Progress", phase starts and finishes with their costs, resumes; and from them, the newest line
that showed the trainer progressing."""
from __future__ import annotations

import sys

from rlhealth.probes.extract import Extractor, FileInfo, settled
from rlhealth.probes.parse import trainer as tp
from rlhealth.probes.parse.timestamps import line_timestamp

MAX_PHASE_COSTS = 500
"""Phase durations kept per phase (the newest ones)."""
PROGRESS_KEYS = frozenset({"x_wandb", "x_dict_end", "x_step_progress", "x_phase", "x_resumed"})


class Trainer(Extractor):
    keys = PROGRESS_KEYS

    def __init__(self, *, first_record_per_step: bool) -> None:
        self.seen_steps: set[int] | None = set() if first_record_per_step else None
        """Steps that already have a metric record: only the first record of a step is kept, the
        one ``observe`` uses ("first occurrence of a step wins across the chain"), so memory
        follows the number of steps, not of copies (None: every record kept)."""
        self.metric_records: list[tp.MetricRecord] = []
        self.malformed_metric_lines = 0
        self.malformed_example = None
        self.eval_records = 0
        self.step_progress: tuple[int, int] | None = None
        self.step_progress_occ = None
        self.last_trainer_line = None
        self.trainer_lines = 0
        self.phases_open: dict = {}
        self.phase_costs: dict[str, list[float]] = {}
        self.steps_finished = 0
        # what merging this part after others needs: its first step-progress value with whether
        # anything else on that line counted as progress, and the phases it finished
        self.first_step_progress: tuple[tuple[int, int], bool | None] | None = None
        self.phases_finished: set[str] = set()

    def begin(self, file: FileInfo) -> None:
        super().begin(file)
        self.first_step_progress = None
        self.phases_finished = set()

    def _record(self, step: int, metrics: dict[str, float], line: int, ts: float | None, serialization: str) -> None:
        if self.seen_steps is not None:
            if step in self.seen_steps:
                return
            self.seen_steps.add(step)
            metrics = {sys.intern(k): v for k, v in tp.diagnosis_metrics(metrics).items()}
        self.metric_records.append(tp.MetricRecord(step=step, metrics=metrics, source=self.file.source, line=line,
                                                   ts=ts, serialization=serialization))

    def _malformed(self, occ) -> None:
        self.malformed_metric_lines += 1
        if self.malformed_example is None:
            self.malformed_example = occ

    def feed(self, hit, keys, occ) -> None:
        text = hit.text
        progressed = False
        step_progress_changed = False
        if "x_wandb" in keys:
            parsed = tp.parse_wandb_mirror(text)
            if parsed is not None:
                kind, step, metrics = parsed
                if kind == "train":
                    if metrics is None:
                        self._malformed(occ)
                    else:
                        self._record(step, metrics, hit.lineno, occ.ts, "wandb-json")
                        progressed = True
                else:
                    self.eval_records += 1
        if "x_dict_end" in keys and "x_wandb" not in keys:
            metrics = tp.parse_dict_block(hit.preceding_bytes(64 * 1024).decode("utf-8", "replace"))
            if metrics is not None:
                step = int(metrics.get("trainer/global_step", 0))
                ts = occ.ts
                if ts is None:
                    block_head = hit.preceding_bytes(64 * 1024).decode("utf-8", "replace")
                    start = block_head.rfind("{'")
                    ts = line_timestamp(block_head[max(0, start - 400):start], self.file.reference) if start >= 0 else None
                self._record(step, metrics, hit.lineno, ts, "python-dict")
                progressed = True
            else:
                self._malformed(occ)
        if "x_step_progress" in keys:
            sp = tp.parse_step_progress(text)
            if sp is not None:
                if self.step_progress is None or sp != self.step_progress:
                    step_progress_changed = True
                if self.first_step_progress is None:
                    self.first_step_progress = (sp, None)
                self.step_progress = sp
                self.step_progress_occ = occ
        if "x_phase" in keys:
            ph = tp.parse_phase(text)
            if ph is not None:
                what, phase, cost = ph
                if what == "Started":
                    self.phases_open[phase] = occ
                else:
                    self.phases_open.pop(phase, None)
                    self.phases_finished.add(phase)
                    if cost is not None:
                        costs = self.phase_costs.setdefault(phase, [])
                        costs.append(cost)
                        if len(costs) > MAX_PHASE_COSTS:
                            del costs[0]
                    if phase == "step":
                        self.steps_finished += 1
                progressed = True
        if "x_resumed" in keys:
            progressed = True
        if self.first_step_progress is not None and self.first_step_progress[1] is None:
            self.first_step_progress = (self.first_step_progress[0], progressed)
        if progressed or step_progress_changed:
            self.trainer_lines += 1
            held = self.last_trainer_line
            if occ.ts is not None and (held is None or held.ts is None or occ.ts >= held.ts):
                self.last_trainer_line = occ
            elif held is None:
                self.last_trainer_line = occ

    def mergeable(self, later: Trainer) -> bool:
        # a part whose first step-progress line repeated the last one before it made no progress
        # in order, which the part alone counted as progress
        first = later.first_step_progress
        return not (first is not None and not first[1] and self.step_progress == first[0])

    def merge(self, later: Trainer) -> None:
        # metrics: the first record of a step across the parts (each part kept its own first)
        for record in later.metric_records:
            if self.seen_steps is None or record.step not in self.seen_steps:
                if self.seen_steps is not None:
                    self.seen_steps.add(record.step)
                self.metric_records.append(record)
        self.malformed_metric_lines += later.malformed_metric_lines
        if self.malformed_example is None:
            self.malformed_example = later.malformed_example
        self.eval_records += later.eval_records
        if later.step_progress is not None:
            self.step_progress, self.step_progress_occ = later.step_progress, later.step_progress_occ
        # the newest timestamped progress line (ties: the later), else the first one
        self.trainer_lines += later.trainer_lines
        newest = later.last_trainer_line
        if newest is not None:
            held = self.last_trainer_line
            if held is None or (newest.ts is not None and (held.ts is None or newest.ts >= held.ts)):
                self.last_trainer_line = newest
        # open phases: one finished in the part left the dict (a later start re-enters it at the
        # end); one only started keeps its place
        phases = {k: later.phases_open.get(k, occ) for k, occ in self.phases_open.items() if k not in later.phases_finished}
        for k, occ in later.phases_open.items():
            if k not in phases:
                phases[k] = occ
        self.phases_open = phases
        for phase, costs in later.phase_costs.items():
            into = self.phase_costs.setdefault(phase, [])
            into.extend(costs)
            if len(into) > MAX_PHASE_COSTS:
                del into[:len(into) - MAX_PHASE_COSTS]
        self.steps_finished += later.steps_finished
        self.phases_finished |= later.phases_finished
        if self.first_step_progress is None:
            self.first_step_progress = later.first_step_progress

    def result(self, read) -> None:
        read.metric_records = self.metric_records
        read.malformed_metric_lines = self.malformed_metric_lines
        read.malformed_example = settled(self.malformed_example)
        read.eval_records = self.eval_records
        read.step_progress = self.step_progress
        read.step_progress_occ = settled(self.step_progress_occ)
        read.last_trainer_line = settled(self.last_trainer_line)
        read.trainer_lines = self.trainer_lines
        read.phases_open = {k: settled(o) for k, o in self.phases_open.items()}
        read.phase_costs = self.phase_costs
        read.steps_finished = self.steps_finished
