# genobird pipelines. Default: the embedded demo (pipelines/demo.yaml).
#   snakemake --cores 2                                   # the demo
#   snakemake --cores 2 --configfile pipelines/demo.yaml  # the same, explicitly
import os
import sys

from snakemake.utils import min_version, validate

min_version("9.0")


configfile: "pipelines/demo.yaml"


validate(config, "workflows/schemas/config.schema.yaml")

RESULTS = config["results"]

# Rules call the `genobird` command; find it beside the Python running Snakemake.
shell.prefix(f'export PATH="{os.path.dirname(sys.executable)}:$PATH"; set -euo pipefail; ')


include: "workflows/reference.smk"
include: "workflows/corpus.smk"
include: "workflows/pretrain.smk"
include: "workflows/promoter.smk"
include: "workflows/chromatin.smk"
include: "workflows/scoring.smk"
include: "workflows/report.smk"


rule all:
    input:
        rules.report.output,
