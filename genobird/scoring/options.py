"""How a model is run when it scores, declared once for every scorer (`Predictor`,
`LikelihoodScorer`, `Embedder`, ISM, tracks and variant effects): the device, the
precision, the batch size (each role's default below), the tokenising workers and the
strands read (a command's window is its own: a region's context, a variant's, the bases
ISM mutates). The command line builds one from its options
(`from_args`); Python callers give the same names as keywords (`load_predictor(DIR,
device="cpu", batch_size=64)`) or an options object. No torch here: the parser reads the
defaults."""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

from genobird.errors import ConfigError

# the bases a variant's two windows span where the command is not told (`likelihood --vcf`
# and `embed --vcf`; a predictor's windows are its input length)
VARIANT_WINDOW_BP = 1000

# windows per batch of each role, by default: a predictor's and an embedder's forward
# pass keeps every layer's states of a batch; the language model's scores pieces only
BATCH_SIZES = {"predict": 16, "embed": 16, "likelihood": 32, "variant_effects": 32}
# the strands each role reads by default: the language model both (bits are a property
# of the DNA, not of a strand), an embedder the one given; a predictor as its model was
# evaluated (recorded at fine-tuning), so it has no entry here
STRANDS = {"likelihood": True, "variant_effects": True, "embed": False}
# an option's command-line name where it differs from the field's
CLI_NAMES = {"num_workers": "workers"}


@dataclass(frozen=True)
class ScoringOptions:
    """How a scorer runs its model. None: the role's default (`BATCH_SIZES`, `STRANDS`),
    the device's (`num_workers`: up to 8 on CUDA, none on CPU) or the model's (a
    predictor's strands)."""

    device: str = "auto"  # auto: the GPU if there is one (genobird.device)
    # auto: bf16 autocast on CUDA, fp32 on CPU (model.precision checks the choice)
    precision: str = "auto"
    batch_size: int | None = None
    num_workers: int | None = None  # processes that tokenise the next windows
    rc_average: bool | None = None  # average both strands' scores

    def __post_init__(self):
        for name, low in (("batch_size", 1), ("num_workers", 0)):
            value = getattr(self, name)
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int) or value < low
            ):
                raise ConfigError(f"{name} must be a whole number of at least {low}, got {value!r}")

    @classmethod
    def of(cls, options: ScoringOptions | None = None, **given) -> ScoringOptions:
        """`options` (or the defaults) with the options given by name; an unknown name is
        a TypeError, as a misspelt keyword is."""
        known = {item.name for item in fields(cls)}
        if unknown := sorted(set(given) - known):
            raise TypeError(
                f"unexpected scoring option {unknown[0]!r}; the options are: "
                f"{', '.join(sorted(known))}"
            )
        return replace(options or cls(), **given)

    @classmethod
    def from_args(cls, args) -> ScoringOptions:
        """The options a command was given (those it has; the rest at their defaults)."""
        given = {}
        for item in fields(cls):
            value = getattr(args, CLI_NAMES.get(item.name, item.name), None)
            if value is not None:
                given[item.name] = value
        return cls(**given)

    def batch_for(self, role: str) -> int:
        return self.batch_size or BATCH_SIZES[role]

    def strands_for(self, role: str, recorded: bool | None = None) -> bool:
        """Whether `role` reads both strands: as given, else as the model was evaluated
        (`recorded`, a predictor's), else the role's default."""
        if self.rc_average is not None:
            return self.rc_average
        return recorded if recorded is not None else STRANDS[role]
