#!/usr/bin/env bash
# The main job on the embedded default, as far as the project goes today: demo genome ->
# documents -> BPE vocabulary -> MLM+NSP pretraining instances -> a tiny block-sparse
# BigBird pretrained on them (model directory in results/demo/pretrain/model). Usage: scripts/demo.sh [VENV_BIN]  (make demo passes .venv/bin)
set -euo pipefail
bin="${1:-.venv/bin}"
out="results/demo"
genobird() { "$bin/genobird" "$@"; }
start=$(date +%s)

genobird demo-reference "$out/reference" --seed 0
genobird -q corpus documents --reference "$out/reference/genome.fa" --out "$out/corpus/train.txt" \
    --chromosomes chr1 chr2 chrX --passes 2 --threads 2
genobird -q corpus documents --reference "$out/reference/genome.fa" --out "$out/corpus/heldout.txt" \
    --chromosomes chr3 --passes 1
genobird -q vocab train --documents "$out/corpus/train.txt" --out "$out/corpus/tokenizer.model" \
    --vocab-size 4000 --heldout "$out/corpus/heldout.txt" --threads 2
genobird -q corpus instances --documents "$out/corpus/train.txt" \
    --tokenizer "$out/corpus/tokenizer.model" --out "$out/corpus/instances" \
    --max-seq-length 1024 --threads 2
genobird -q corpus instances --documents "$out/corpus/heldout.txt" \
    --tokenizer "$out/corpus/tokenizer.model" --out "$out/corpus/instances-heldout" \
    --max-seq-length 1024
genobird layout bigbird --seq-len 1024 --block-size 64 --heads 4
genobird -q pretrain --config pipelines/pretrain/demo.yaml

echo "demo finished in $(( $(date +%s) - start )) s; outputs in $out/"
