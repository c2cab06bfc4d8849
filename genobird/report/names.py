"""How the report names the baselines, in its tables and in its checks."""

MODEL_NAMES = {"kmer-lr": "k-mer (3-6) logistic regression", "cnn": "3-layer CNN, one-hot"}
SHORT_NAMES = {"kmer-lr": "k-mer LR", "cnn": "CNN"}
