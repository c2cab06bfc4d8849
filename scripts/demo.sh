#!/usr/bin/env bash
# The main job on the embedded default, as far as the project goes today: demo genome ->
# documents -> BPE vocabulary -> MLM+NSP pretraining instances -> a tiny block-sparse
# BigBird pretrained on them -> promoter and chromatin fine-tuning with their reports. Usage: scripts/demo.sh [VENV_BIN]  (make demo passes .venv/bin)
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

# Fine-tuning: promoter windows of 3 kb; chromatin bins with 600 bp of context, the best
# trade-off for this tiny model on 2 cores (2 kb helps histone marks, which need distant
# context, but costs the motif-driven TF and DNase features more; benchmarks/README.md).
# Split by chromosome: valid chr3, test chrX.
genobird -q dataset promoter --tss "$out/reference/tss.bed" --reference "$out/reference/genome.fa" \
    --out "$out/promoter/data.h5" --upstream 2000 --downstream 1000 \
    --valid-chromosomes chr3 --test-chromosomes chrX
genobird -q finetune promoter --data "$out/promoter/data.h5" --output "$out/promoter" \
    --pretrained "$out/pretrain/model" --max-tokens 640 --max-steps 320
genobird -q dataset chromatin --features "$out/reference/features.tsv" \
    --reference "$out/reference/genome.fa" --out "$out/chromatin/data.h5" --context 600 \
    --max-bins 3000 --valid-chromosomes chr3 --test-chromosomes chrX
genobird -q finetune chromatin --data "$out/chromatin/data.h5" --output "$out/chromatin" \
    --pretrained "$out/pretrain/model" --max-tokens 160 --max-steps 300 --learning-rate 5e-4

# Scoring: the planted TSSs of chrX (held out) as BED regions, with both predictors.
mkdir -p "$out/score"
awk -F'\t' '$1 == "chrX"' "$out/reference/tss.bed" > "$out/score/tss_chrX.bed"
genobird -q score --model "$out/promoter/model" --bed "$out/score/tss_chrX.bed" \
    --reference "$out/reference/genome.fa" --out "$out/score/promoter_tss_chrX.tsv"
genobird -q score --model "$out/chromatin/model" --bed "$out/score/tss_chrX.bed" \
    --reference "$out/reference/genome.fa" --out "$out/score/chromatin_tss_chrX.tsv"

echo "demo finished in $(( $(date +%s) - start )) s; outputs in $out/"
