"""The fine-tuning recipe as a pipeline config section: its settings as `genobird finetune`
options (with DeepSEA's CNN arm's budget where genobird's arms read their base CNN from
that arm), and the schema block that checks the section (workflows/schemas/
config.schema.yaml)."""

from __future__ import annotations

import json
from collections.abc import Mapping

from genobird.finetuning.recipe import RECIPE_OPTIONS, SETTINGS, TASKS
from genobird.settings import Setting


def finetune_options(section: dict) -> str:
    """The optional fine-tuning settings of a pipeline config section, as `genobird
    finetune` options. rc_augment sets both strands in training and in scoring."""
    options = [
        f"--{key.replace('_', '-')} {section[key]}" for key in RECIPE_OPTIONS if key in section
    ]
    if "rc_augment" in section:  # scored on the strands it was trained on
        strands = "" if section["rc_augment"] else "no-"
        options += [f"--{strands}rc-augment --{strands}rc-average"]
    return " ".join(options)


def reads_deepsea_arm(section: Mapping) -> bool:
    """Whether a chromatin task's genobird arms read their base CNN from DeepSEA's CNN arm
    (at the contexts it runs): a base CNN of DeepSEA's architecture."""
    return (
        bool(section.get("base_cnn_channels"))
        and section.get("base_cnn_architecture") == "deepsea-cnn"
    )


# DeepSEA's CNN arm's settings, each with the base CNN setting it is when genobird's arms
# read their base CNN from that arm
ARM_SETTINGS = (
    ("cnn_channels", "base_cnn_channels"),
    ("cnn_max_epochs", "base_cnn_epochs"),
    ("cnn_max_minutes", "base_cnn_minutes"),
)


def deepsea_arm_settings(name: str, section: Mapping, baselines: Mapping) -> dict:
    """DeepSEA's CNN arm's width and budget: the task section's cnn_channels,
    cnn_max_epochs and cnn_max_minutes (the budgets else those of the pipeline's
    `baselines` section). When genobird's arms read their base CNN from that arm,
    base_cnn_channels, base_cnn_epochs and base_cnn_minutes are the same settings, given
    under either name: a base CNN fitted otherwise could not be read from the arm, and
    each genobird arm would train its own. Raises ValueError naming both keys where they
    differ. A setting given nowhere is left to the command."""
    settings = {
        arm: section.get(arm, baselines.get(arm) if arm != "cnn_channels" else None)
        for arm, _ in ARM_SETTINGS
    }
    if not reads_deepsea_arm(section):
        return settings
    for arm_key, base_key in ARM_SETTINGS:
        arm, base = settings[arm_key], section.get(base_key)
        if arm is not None and base is not None and float(arm) != float(base):
            raise ValueError(
                f"chromatin_tasks.{name}: {base_key} {base} differs from DeepSEA's CNN arm's "
                f"{arm_key} {arm}; genobird's arms read their base CNN from that arm, so give "
                f"one value (or only {arm_key})"
            )
        settings[arm_key] = base if arm is None else arm
    return settings


def arm_finetune_options(name: str, section: Mapping, baselines: Mapping) -> str:
    """A chromatin task's genobird arm's recipe options: its section's, with the budget of
    DeepSEA's CNN arm where the arm reads its base CNN from it (`deepsea_arm_settings`)."""
    if reads_deepsea_arm(section):
        arm = deepsea_arm_settings(name, section, baselines)
        section = {
            **section,
            **{base: arm[key] for key, base in ARM_SETTINGS if arm[key] is not None},
        }
    return finetune_options(section)


# --------------------------------------------------------------------------- pipeline schema
def schema(settings: tuple[Setting, ...] = SETTINGS) -> dict:
    """The pipeline schema's recipe section ($defs/recipe of workflows/schemas/
    config.schema.yaml) for the settings a pipeline section takes."""
    types = {bool: "boolean", int: "integer", float: "number", str: "string"}
    properties, needs = {}, {}
    for one in settings:
        if not one.pipeline:
            continue
        entry = {"enum": list(one.choices)} if one.choices else {"type": types[one.type]}
        for bound, value, is_open in (
            ("Minimum", one.low, one.open_low),
            ("Maximum", one.high, one.open_high),
        ):
            if value is not None:
                key = ("exclusive" + bound) if is_open else bound.lower()
                entry[key] = value
        default = one.default_text(TASKS)
        entry["description"] = one.help + (f" ({default})" if default else "")
        properties[one.name] = entry
        if one.needs:
            needs[one.name] = [one.needs]
    section = {
        "description": "the fine-tuning settings every fine-tuning section takes "
        "(genobird.finetuning.recipe; as genobird finetune options)",
        "type": "object",
    }
    if needs:
        section["dependentRequired"] = needs
    section["properties"] = properties
    return section


def schema_yaml(settings: tuple[Setting, ...] = SETTINGS) -> str:
    """`schema` as the lines of config.schema.yaml's `$defs: recipe:` block (one flow
    mapping per setting, as the file writes them)."""
    section = schema(settings)
    lines = ["  recipe:", f"    description: {section['description']}", "    type: object"]
    if "dependentRequired" in section:
        lines.append("    dependentRequired:")
        lines += [
            f"      {name}: {json.dumps(needs)}"
            for name, needs in section["dependentRequired"].items()
        ]
    lines.append("    properties:")
    lines += [f"      {name}: {json.dumps(entry)}" for name, entry in section["properties"].items()]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":  # python -m genobird.finetuning.recipe_pipeline: the schema's block
    print(schema_yaml(), end="")
