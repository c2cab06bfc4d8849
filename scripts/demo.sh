#!/usr/bin/env bash
# The main job on the embedded default: the demo pipeline (Snakefile, pipelines/demo.yaml)
# from the synthetic genome to results/demo/report.html. Usage: scripts/demo.sh [VENV_BIN]
# (make demo passes .venv/bin). Rerunning it resumes an interrupted run; a finished run is
# a no-op. CORES (default 2) sets the cores Snakemake may use.
set -euo pipefail
bin="${1:-.venv/bin}"
start=$(date +%s)
"$bin/snakemake" --cores "${CORES:-2}" --configfile pipelines/demo.yaml --rerun-incomplete \
    --printshellcmds
echo "demo finished in $(( $(date +%s) - start )) s; report: results/demo/report.html"
"$bin/python" -c 'import json; c = json.load(open("results/demo/report.checks.json"))
print("checks against the baselines: %d of %d met (results/demo/report.checks.json)" % (c["met"], c["of"]))' 2>/dev/null || true
