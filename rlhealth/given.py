"""What the dispatcher already knows about the job, passed as ``--gpu``, ``--model`` and ``--focus``.

Given evidence is marked as such in every report (``"source": "given"``): it was told to
rlhealth, not observed in the bundle. The rule base decides how it is used; this module only
types it.
"""
from pydantic import BaseModel, ConfigDict, Field, model_validator


class GivenModel(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)   # built when a command is given one
    name: str
    total_params_b: float | None = Field(default=None, gt=0)
    active_params_b: float | None = Field(default=None, gt=0)
    """Parameters active per token (MoE); equal to the total for a dense model."""

    @model_validator(mode="after")
    def _active_within_total(self):
        if self.total_params_b is not None and self.active_params_b is not None and self.active_params_b > self.total_params_b:
            raise ValueError(f"active parameters ({self.active_params_b}B) exceed total parameters ({self.total_params_b}B)")
        return self


class Given(BaseModel):
    """Dispatcher inputs: evidence that was given, not observed."""
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)
    source: str = "given"
    gpu: str | None = None
    model: GivenModel | None = None
    focus: tuple[str, ...] = ()
    """What is new or untested in this run, one item per ``--focus``, in the order given."""

    def is_empty(self) -> bool:
        return self.gpu is None and self.model is None and not self.focus


def given_from_args(args) -> Given | None:
    """The ``Given`` of a parsed command line, or None when no dispatcher input was passed.

    Raises ``ValueError`` with a readable message for inconsistent inputs.
    """
    from pydantic import ValidationError

    gpu = getattr(args, "gpu", None)
    name = getattr(args, "model", None)
    total = getattr(args, "total_params_b", None)
    active = getattr(args, "active_params_b", None)
    focus = tuple(f.strip() for f in (getattr(args, "focus", None) or []) if f.strip())
    if name is None and (total is not None or active is not None):
        raise ValueError("--total-params-b / --active-params-b need --model")
    if not gpu and name is None and not focus:
        return None         # nothing given (what ``Given.is_empty`` says of the model it would build)
    try:
        model = GivenModel(name=name, total_params_b=total, active_params_b=active if active is not None else total) \
            if name is not None else None
        given = Given(gpu=gpu.strip() if gpu else None, model=model, focus=focus)
    except ValidationError as exc:
        raise ValueError("; ".join(e["msg"] for e in exc.errors())) from exc
    return None if given.is_empty() else given
