"""How the inference engines are set up, as their logs state it: the served model (the first
vLLM engine init line), enforce_eager / CUDA-graph lines, and GPU product names in nvidia-smi
output."""
from __future__ import annotations

from rlhealth.probes.extract import Extractor, settled
from rlhealth.probes.parse import vllm as vp
from rlhealth.probes.parse.nvidia_smi import gpu_name_from_line

MAX_EAGER_LINES = 50
"""enforce_eager evidence lines kept (the first ones)."""
MAX_GPU_NAME_SIGHTINGS = 20


def add_gpu_name(names: list, kind: str, name: str, occ) -> None:
    """``(kind, name, occ)`` into ``names`` unless full or that name of that kind was seen in that file."""
    if len(names) < MAX_GPU_NAME_SIGHTINGS and not any(
            k == kind and n == name and o.source == occ.source for k, n, o in names):
        names.append((kind, name, occ))


class EngineConfig(Extractor):
    keys = frozenset({"x_engine_model", "x_gpu_name", "x_eager"})

    def __init__(self) -> None:
        self.engine_model: tuple | None = None
        self.eager_lines: list = []
        self.gpu_names: list = []

    def feed(self, hit, keys, occ) -> None:
        text = hit.text
        if "x_engine_model" in keys and self.engine_model is None:
            model = vp.model_from_init_line(text)
            if model:
                self.engine_model = (model, occ)
        if "x_gpu_name" in keys:
            name = gpu_name_from_line(text)
            if name:
                add_gpu_name(self.gpu_names, "nvidia_smi", name, occ)
        if "x_eager" in keys:
            value = vp.eager_from_line(text)
            if value is not None and len(self.eager_lines) < MAX_EAGER_LINES:
                self.eager_lines.append((value, occ))

    def merge(self, later: EngineConfig) -> None:
        if self.engine_model is None:
            self.engine_model = later.engine_model
        room = MAX_EAGER_LINES - len(self.eager_lines)
        if room > 0:
            self.eager_lines.extend(later.eager_lines[:room])
        for kind, name, occ in later.gpu_names:
            add_gpu_name(self.gpu_names, kind, name, occ)

    def result(self, read) -> None:
        """Written after what the capture says (``read.gpu_names`` may hold its sightings)."""
        read.engine_model = None if self.engine_model is None else (self.engine_model[0], settled(self.engine_model[1]))
        read.eager_lines = [(value, settled(o)) for value, o in self.eager_lines]
        names = list(read.gpu_names)
        for kind, name, occ in self.gpu_names:
            add_gpu_name(names, kind, name, settled(occ))
        read.gpu_names = names
