"""Labelled sequence data sets: the windows' HDF5 format and torch Dataset, promoter,
chromatin-profile and generic classification sets, peaks, held-out splits and the
metrics every model is scored with. Below the baselines and fine-tuning, which read them."""
