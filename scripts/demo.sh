#!/usr/bin/env bash
# The main job on the embedded default: build the demo reference and show what it holds.
# Usage: scripts/demo.sh [VENV_BIN]   (make demo passes .venv/bin)
set -euo pipefail
bin="${1:-.venv/bin}"
out="results/demo"
start=$(date +%s)

"$bin/genobird" demo-reference "$out/reference" --seed 0
first_tss=$(head -n 1 "$out/reference/tss.bed")
read -r chrom _ _ name _ strand tss _ <<<"$first_tss"
echo "first planted promoter: $name on $chrom strand $strand, TSS at $tss (0-based)"
"$bin/genobird" -q reference fetch "$out/reference/genome.fa" "$chrom:$((tss - 39))-$((tss + 10))" --strand "$strand"

echo "demo finished in $(( $(date +%s) - start )) s; outputs in $out/"
