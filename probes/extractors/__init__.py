"""The extractors of the log scan, one measurement a module (``rlhealth.probes.extract`` defines
their interface). ``extraction`` lists them in the order a line's extractors are fed."""
from __future__ import annotations

import re
from typing import TYPE_CHECKING

from rlhealth.probes.extract import Extraction
from rlhealth.probes.extractors.boundaries import Boundaries
from rlhealth.probes.extractors.engine_config import EngineConfig
from rlhealth.probes.extractors.failures import Events
from rlhealth.probes.extractors.genbuf import GenerationBuffer
from rlhealth.probes.extractors.markers import Markers
from rlhealth.probes.extractors.rollouts import Rollouts
from rlhealth.probes.extractors.signatures import Signatures
from rlhealth.probes.extractors.stats import Stats
from rlhealth.probes.extractors.trainer import Trainer
from rlhealth.probes.extractors.weights import Weights

if TYPE_CHECKING:
    from rlhealth.catalog import Catalog


def extraction(catalog: Catalog, skip: dict[str, re.Pattern], reference: float | None, *,
               first_record_per_step: bool = True, part: bool = False) -> Extraction:
    """Every extractor of one read. ``first_record_per_step``: keep only the first metric record of
    a step (with the fast routing); ``part``: a part scanned apart, to be merged after others."""
    from rlhealth.probes import extract

    events = Events()
    return Extraction([
        Boundaries(),
        events,
        Signatures(catalog, skip, events, chained=part),
        Trainer(first_record_per_step=first_record_per_step and extract.FAST_ROUTING),
        Stats(reference, settle_each_file=part),
        EngineConfig(),
        GenerationBuffer(),
        Rollouts(),
        Weights(),
        Markers(),
    ], events)


__all__ = ["extraction"]
