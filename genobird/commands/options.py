"""The options several commands share, each declared once: what it takes (type, number
of values, action, choices), its usual default, the name its value goes by in the help
(metavar) and the help it has unless a command says more. A command adds them by name
(`add_shared`) and may give its own help, default, `required` or metavar where its use
differs; what an option takes is the concept's and the same in every command, so no two
commands spell one concept two ways (tests/test_cli.py holds every command to this
table)."""

from __future__ import annotations

import argparse
from pathlib import Path

from genobird.finetuning.recipe import CNN_MAX_EPOCHS

# what a command may say of its own use of a shared option
OWN = frozenset({"help", "default", "required", "metavar"})

# fmt: off
SHARED: dict[str, dict] = {
    # files in and out
    "out": dict(type=Path, required=True, help="output file"),
    "model": dict(metavar="DIR", type=Path, required=True, help="fine-tuned model directory"),
    "data": dict(metavar="H5", type=Path, required=True, help="HDF5 from genobird dataset"),
    "reference": dict(metavar="FASTA", type=Path, nargs="+",
                      help="genome FASTA, or several read as one"),
    "documents": dict(metavar="TXT", type=Path, required=True, help="documents text file"),
    "tokenizer": dict(metavar="FILE", type=Path, help="tokenizer.model"),
    "config": dict(metavar="FILE", type=Path),
    "manifest": dict(metavar="YAML", type=Path, help="manifest YAML (default: GRCh37)"),
    "valid": dict(metavar="FILE", type=Path),
    "test": dict(metavar="FILE", type=Path),
    "format": dict(choices=("tsv", "h5"), help="tsv or h5 (default: from --out's name: "
                   ".h5/.hdf5 is HDF5, else TSV)"),
    # what is read
    "chromosomes": dict(metavar="CHROM", nargs="+"),
    "features": dict(metavar="NAME", nargs="+", help="only these features (default: all)"),
    "window_bp": dict(metavar="BP", type=int),
    "context_bp": dict(metavar="BP", type=int, default=8000),
    "context_tokens": dict(metavar="N", type=int, nargs="+"),
    "max_tokens": dict(metavar="N", type=int),
    "stride": dict(metavar="N", type=int),
    "orders": dict(default="0-10", help="Markov orders to choose from, e.g. 0-10"),
    # held-out data
    "valid_fraction": dict(metavar="F", type=float, default=0.1, help="drawn to validation"),
    "test_fraction": dict(metavar="F", type=float, default=0.1, help="drawn to test"),
    "valid_chromosomes": dict(metavar="REGION", nargs="+", default=["chr7"],
                              help="validation chromosomes"),
    "test_chromosomes": dict(metavar="REGION", nargs="+", default=["chr8", "chr9"],
                             help="test chromosomes"),
    "training_negatives": dict(metavar="N", type=int, default=1,
                               help="DeePromoter negatives per positive in the training split "
                               "(validation and test keep one each)"),
    "seed": dict(metavar="N", type=int, default=0),
    # how a model runs
    "rc_average": dict(action=argparse.BooleanOptionalAction, default=None,
                       help="average both strands (default: as the model was evaluated at "
                       "fine-tuning; promoter models: no)"),
    "segmentations": dict(metavar="K", type=int,
                          help="average this many BPE-dropout cuts of each window per strand "
                          "(default: as the model was evaluated at fine-tuning; 0: the "
                          "tokenizer's own cut)"),
    "batch_size": dict(metavar="N", type=int, default=16),
    "device": dict(metavar="DEVICE", default="auto", help="auto, cpu, cuda, cuda:1 ..."),
    "precision": dict(choices=("auto", "bf16", "no"), default="auto",
                      help="auto: bf16 autocast on CUDA, fp32 on CPU"),
    "workers": dict(metavar="N", type=int,
                    help="processes fetching and tokenising windows (default: up to 8 on "
                    "CUDA, none on CPU)"),
    "threads": dict(metavar="N", type=int, default=1),
    "restart_changed": dict(action="store_true",
                            help="checkpoints in --out of a run with other settings are "
                            "deleted and the run starts afresh, as a pipeline rerunning a job "
                            "whose config changed needs (default: refused; a run's own "
                            "checkpoints are resumed either way)"),
    "strict": dict(action="store_true", help="exit 1 if any record is rejected"),
    # training
    "from_scratch": dict(action="store_true"),
    "vocab_size": dict(metavar="N", type=int),
    "max_steps": dict(metavar="N", type=int),
    "learning_rate": dict(metavar="LR", type=float),
    "effective_batch_size": dict(metavar="N", type=int),
    "warmup_steps": dict(metavar="N", type=int),
    "checkpoint_every": dict(metavar="N", type=int),
    "max_minutes": dict(metavar="MIN", type=float,
                        help="a wall-clock cap on training (default: none; a run then depends "
                        "only on its seed, not on the machine's speed)"),
    "max_epochs": dict(metavar="N", type=int, default=CNN_MAX_EPOCHS,
                       help="passes over the training windows at most; training stops "
                       "sooner after 3 epochs without a better validation AUROC"),
    "channels": dict(metavar="C", type=int, help="filters of the first convolution (default 128)"),
}
# fmt: on


def flag(name: str) -> str:
    """The option string of shared option `name`: --window-bp for window_bp."""
    return "--" + name.replace("_", "-")


def add_shared(parser, *names: str, **uses) -> None:
    """Adds the shared options `names` to `parser` (a parser or an argument group), in
    that order. `uses[name]` is the command's own help (a str), or its own help, default,
    required and metavar (a dict)."""
    for name in names:
        use = uses.pop(name, {})
        use = {"help": use} if isinstance(use, str) else use
        if set(use) - OWN:  # a command that needs another type has another concept
            raise TypeError(
                f"{flag(name)}: a command may give only {sorted(OWN)}, not {sorted(set(use) - OWN)}"
            )
        parser.add_argument(flag(name), **{**SHARED[name], **use})
    if uses:
        raise TypeError(f"own uses given for options not added: {sorted(uses)}")
