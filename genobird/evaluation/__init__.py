"""Evaluation above the models: paired comparisons of runs, the chromatin context
ablation and its plots, zero-shot classification by likelihood, and the copy-context
study of a language model."""
