"""A fine-tuning run's recipe as a spec (`FinetuneSpec`: a field per setting that
finetuning.recipe declares, the Trainer's settings beside them), and what a spec means
for a data set of each task kind: its strands, positive weight, head rate, window and
profile bins, evaluation interval, and the questions its probes ask."""

from __future__ import annotations

from dataclasses import field, make_dataclass, replace

from genobird.errors import ConfigError
from genobird.finetuning.probes import open_questions
from genobird.finetuning.recipe import QUESTIONS, SETTINGS, check_needs
from genobird.inputs import token_limit
from genobird.model.base_readers import base_kmer_lengths
from genobird.training import TrainingConfig
from genobird.training.averaging import check_decay


def fresh_model_shape() -> dict:
    """Without pretrained weights: the BigBirdConfig fields of the fresh model (the demo's
    tiny shape; max_position grows to max_tokens when needed)."""
    return dict(hidden_size=128, num_layers=2, num_heads=4, intermediate_size=512,
                max_position=1024)  # fmt: skip


def _check_spec(spec) -> None:
    """Each setting within its bounds (recipe.SETTINGS), and the checks between them,
    before any data or model is loaded."""
    for setting in SETTINGS:
        value = spec.training.get(setting.name) if setting.training else getattr(spec, setting.name)
        setting.check(value)
    if spec.layer_decay != 1 and spec.training.get("learning_rate_scales"):
        # one would silently replace the other
        raise ConfigError("give layer_decay or training.learning_rate_scales, not both")
    check_decay(spec.training.get("ema_decay", 0.0))
    if unknown := set(spec.choose_on_validation) - set(QUESTIONS):
        raise ConfigError(f"choose_on_validation: no question {sorted(unknown)}; "
                          f"asked can be {', '.join(QUESTIONS)}")  # fmt: skip
    if spec.base_kmers:
        base_kmer_lengths(spec.base_kmers)  # refuses a length outside 3-8
    check_needs(recipe_values(spec))


# One field per recipe setting that is not the Trainer's (those go in `training`, a dict
# of TrainingConfig fields), each with the setting's type and default: the settings are
# declared once, in finetuning.recipe. Beside them: the questions a classify run answers
# on validation (finetuning.probes), the training settings and a fresh model's shape.
FinetuneSpec = make_dataclass(
    "FinetuneSpec",
    [*((s.name, s.type | None, field(default=s.default)) for s in SETTINGS if not s.training),
     ("choose_on_validation", tuple, field(default=())),
     ("training", dict, field(default_factory=dict)),
     ("model", dict, field(default_factory=fresh_model_shape))],
    namespace={"__post_init__": _check_spec,
               "__doc__": "A fine-tuning run's recipe (finetuning.recipe declares each "
                          "setting) and its training settings."},
)  # fmt: skip


FinetuneSpec.__module__ = __name__  # pickled by name, as a class defined here is


def recipe_values(spec) -> dict:
    """Every recipe setting's value in a spec (finetune.json, flat)."""
    return {s.name: spec.training.get(s.name) if s.training else getattr(spec, s.name)
            for s in SETTINGS}  # fmt: skip


def strand_symmetric(meta: dict) -> bool:
    """Whether a data set's labels hold on both strands, the default for reverse-complement
    augmentation and averaging: chromatin features and classify labels (TF binding, ...)
    do; promoter windows are oriented by their TSS strand, their reverse complement is not
    a promoter. A model trained on both strands is evaluated on both: on GUE TF 0 that
    lifted test MCC from 0.621 to 0.634 and AUROC from 0.885 to 0.902 (docs/experiments)."""
    return meta["task"] != "promoter"


def task_pos_weight(spec: FinetuneSpec, task_meta: dict) -> float:
    if spec.pos_weight is not None:
        return spec.pos_weight
    return 8.0 if task_meta["task"] == "chromatin" else 1.0


def task_head_lr_scale(spec: FinetuneSpec, task_meta: dict) -> float:
    if spec.head_lr_scale is not None:
        return spec.head_lr_scale
    return 10.0 if task_meta["task"] == "chromatin" else 1.0


def evaluation_strands(spec: FinetuneSpec, meta: dict) -> bool:
    """True when evaluation (and scoring with the saved model) averages both strands."""
    return strand_symmetric(meta) if spec.rc_average is None else spec.rc_average


def base_strands(spec: FinetuneSpec, meta: dict) -> str:
    """How the base readers read strands: as given, else as they are read (`both` where
    the run reads both strands: each base reader then reads both in each input, fitted so)."""
    if spec.base_strands is not None:
        return spec.base_strands
    return "both" if evaluation_strands(spec, meta) else "one"


def strands_chosen_with_start(spec: FinetuneSpec, meta: dict) -> bool:
    """Whether a run's strands are chosen on validation with its start from base readers
    (base_start.choose_strands): a classify run with base readers and a validation split,
    whose options settle neither the strands nor how the base readers read them."""
    return (meta["task"] == "classify" and bool(meta["counts"].get("valid"))
            and bool(spec.base_cnn_channels or spec.base_kmers)
            and spec.rc_augment is None and spec.rc_average is None
            and spec.base_strands is None)  # fmt: skip


def probed_questions(spec: FinetuneSpec, meta: dict) -> list[str]:
    """The questions the run's probes will ask (finetuning.probes): the strands are not
    among them where they are chosen with the start."""
    if strands_chosen_with_start(spec, meta):
        spec = replace(spec, rc_augment=True, rc_average=True)
    return open_questions(spec, meta)


def settle_strands(spec: FinetuneSpec, meta: dict, choice: dict,
                   start_choice: dict | None = None) -> tuple[FinetuneSpec, dict]:  # fmt: skip
    """`spec` with rc_augment and rc_average settled, and how: with the start from base
    readers (`start_choice`, from base_start.choose_strands), by probes on validation
    (`choice`, from finetuning.probes), by the user's options (the one not given follows
    the task kind), or by the task kind (`strand_symmetric`: both for classify when
    nothing was asked)."""
    if start_choice:
        settings = start_choice["settings"]
        strands = {"chosen_by": "the start's validation AUROC",
                   "chosen": start_choice["chosen"],
                   "start_validation_auroc": start_choice["validation_auroc"],
                   **settings}  # fmt: skip
        return replace(spec, **settings), strands
    if "strands" in choice:
        chosen_by = "validation"
        augment = average = choice["strands"]["settings"]["rc_augment"]
    elif spec.rc_augment is not None or spec.rc_average is not None:
        chosen_by = "options"
        augment = strand_symmetric(meta) if spec.rc_augment is None else spec.rc_augment
        average = evaluation_strands(spec, meta)
    else:
        chosen_by = "task" if meta["task"] != "classify" else "default (no probe)"
        augment = average = strand_symmetric(meta)
    resolved = replace(spec, rc_augment=augment, rc_average=average)
    strands = {"chosen_by": chosen_by, "rc_augment": augment, "rc_average": average}
    if spec.base_cnn_channels or spec.base_kmers:
        resolved = replace(resolved, base_strands=base_strands(resolved, meta))
        strands["base_strands"] = resolved.base_strands
    return resolved, strands


def check_window(spec: FinetuneSpec, meta: dict, data_path) -> None:
    """A context wider than the data set's windows cannot be cut from them, and a profile
    head needs a data set of profile labels whose bins are no wider than the context read
    (it learns the central ones that fit: `profile_bins_read`)."""
    if spec.window_bp is not None and spec.window_bp > meta["window_bp"]:
        raise ConfigError(
            f"--window-bp {spec.window_bp} is wider than the windows of {data_path} "
            f"({meta['window_bp']} bp); rebuild the data set with that context or give at most "
            f"{meta['window_bp']}"
        )
    if spec.pooling != "profile":
        return
    if not meta["profile_bins"]:
        raise ConfigError(f"--pooling profile needs profile labels, which {data_path} has "
                          "not; rebuild it with `genobird dataset chromatin --profile-bins "
                          "K`")  # fmt: skip
    read = spec.window_bp or meta["window_bp"]
    if meta["profile_bin_bp"] > read:
        raise ConfigError(f"--pooling profile: the data set's profile bins are "
                          f"{meta['profile_bin_bp']} bp, wider than the {read} bp read; give "
                          f"--window-bp {meta['profile_bin_bp']} or more")  # fmt: skip


def profile_bins_read(meta: dict, window_bp: int) -> int:
    """How many of the data set's profile bins a head reading `window_bp` bases learns: the
    central ones that fit in the window (an odd number, so that the window's own bin stays
    the middle one). One data set of the widest context thus serves every context of an
    ablation: at 1 kb the central 5 bins of 200 bp, at 8 kb all 15 of a 15-bin set."""
    fitting = min(meta["profile_bins"], window_bp // meta["profile_bin_bp"])
    return fitting if fitting % 2 else fitting - 1


def training_max_tokens(spec: FinetuneSpec, model) -> int:
    """The token limit of windows cut with BPE-dropout (`token_limit`); batches are
    padded to their own longest anyway."""
    return token_limit(spec.max_tokens, model.config.max_position, bool(spec.bpe_dropout))


def evaluation_interval(eval_every: int, train_windows: int, training: TrainingConfig) -> int:
    """Steps between validation checks: `eval_every`, or one pass over the training
    windows when that is shorter (at least one step)."""
    per_pass = -(-train_windows // training.effective_batch_size)
    return max(1, min(eval_every, per_pass))
