"""Scoring DNA with a model directory, in data-flow order: `windows` (where scored
windows come from: FASTA, BED and VCF records, crops, pads and N, one policy),
`predict` (the predictors users import), `likelihood` (bits under the language model),
`embed` (vectors), `mutagenesis` (ISM), `variant_effects` (zero-shot effects), `tracks`
(a feature along a region) and `tables` (streaming score tables to TSV or HDF5)."""
