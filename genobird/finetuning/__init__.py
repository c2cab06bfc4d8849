"""Fine-tuning a pretrained encoder on a data set: the recipe's settings, the probes that
choose what a run leaves open, the start from genobird's baselines, and the run itself."""
