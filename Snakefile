# genobird pipelines. Default: the embedded demo (pipelines/demo.yaml).
#   snakemake --cores 2                                   # the demo
#   snakemake --cores 2 --configfile pipelines/demo.yaml  # the same, explicitly
import os
import sys

from snakemake.utils import min_version, validate

min_version("9.0")


# The demo only when no --configfile is given: Snakemake merges a default configfile with
# the user's, which would mix the demo's keys into every other pipeline.
if not config:

    configfile: "pipelines/demo.yaml"


# No defaults are filled in: every key is in the pipeline's YAML, where users see it.
validate(config, "workflows/schemas/config.schema.yaml", set_default=False)

RESULTS = config["results"]
# Each rule's software, for `--sw-deployment-method conda` (relative to workflows/).
ENV = "envs/genobird.yaml"

# Rules call the `genobird` command; find it beside the Python running Snakemake.
shell.prefix(f'export PATH="{os.path.dirname(sys.executable)}:$PATH"; set -euo pipefail; ')


include: "workflows/common.smk"
include: "workflows/reference.smk"
include: "workflows/corpus.smk"
include: "workflows/pretrain.smk"
include: "workflows/promoter.smk"
include: "workflows/chromatin.smk"
include: "workflows/scoring.smk"
include: "workflows/tasks.smk"
include: "workflows/chromatin_tasks.smk"
include: "workflows/baselines.smk"
include: "workflows/report.smk"


rule all:
    input:
        rules.report.output,
