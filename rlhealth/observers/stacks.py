"""stacks: py-spy stacks captured while the job existed, and how many wait in a collective."""
from __future__ import annotations

import re

from rlhealth.facts import Evidence, StacksMeasured
from rlhealth.observers.base import Observation
from rlhealth.probes.textio import quote

NCCL_STACK_RE = re.compile(r"ncclKernel|all_reduce|allreduce|all_gather|reduce_scatter|broadcast|barrier|"
                           r"ProcessGroupNCCL|wait_tensor|_wait_for_work|c10d", re.I)


def observe(obs: Observation) -> None:
    read = obs.read
    if not read.stacks:
        return
    in_collective = [rel for rel, text in read.stacks if NCCL_STACK_RE.search(text)]
    first = in_collective[0] if in_collective else read.stacks[0][0]
    line_text = next((ln.strip() for rel, text in read.stacks if rel == first for ln in text.splitlines()
                      if NCCL_STACK_RE.search(ln)), read.stacks[0][1].splitlines()[0] if read.stacks[0][1] else "")
    obs.add(StacksMeasured(fact_id="stacks", evidence=(Evidence(source=first, text=quote(line_text)),),
                           count=len(read.stacks), in_collective=len(in_collective)))
