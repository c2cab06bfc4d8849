"""DNA corpus: genome documents, the BPE vocabulary, and MLM+NSP pretraining instances."""

from genobird.corpus.documents import DocumentSpec, read_documents, read_index, write_documents
from genobird.corpus.instances import InstanceSpec, write_instances
from genobird.corpus.shards import PretrainingDataset, shard_paths
from genobird.corpus.tokenizer import SPECIAL_TOKENS, Tokenizer
from genobird.corpus.vocab import VocabSpec, train_vocabulary

__all__ = [
    "SPECIAL_TOKENS",
    "DocumentSpec",
    "InstanceSpec",
    "PretrainingDataset",
    "Tokenizer",
    "VocabSpec",
    "read_documents",
    "read_index",
    "shard_paths",
    "train_vocabulary",
    "write_documents",
    "write_instances",
]
