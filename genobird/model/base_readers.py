"""What a classifier reads of a window's bases beside the encoder: the tokens written out
base by base (`BaseSpeller`), and two readers of those bases, each the features of one
of genobird's baselines, so that a classifier can start as those baselines: the CNN
baseline's tower (`BaseCNN`, one computation with baselines.cnn.SmallCNN: `cnn_tower`)
and the k-mer LR's counts (`BaseKmers`).

Shapes: B batch, N tokens, L bases, P a piece's bases, C filters.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from genobird.errors import ConfigError
from genobird.genome.alphabet import ALPHABET, IUPAC_AMBIGUITY


class BaseSpeller(nn.Module):
    """A batch of tokens written out base by base (`spelled_bases`): what the base
    convolution and a classifier's base readers read.

    The vocabulary is set once (`set_pieces`) and saved with the weights as `piece_codes`
    [V, max_piece_length] (int8: A C G T N as 0-4, `MARKER` for a token without bases,
    `NOTHING` past each piece's end)."""

    BASES = ALPHABET  # A C G T N: codes 0-4; other IUPAC letters are N
    MARKER = 5  # a token without bases: one position of its own
    NOTHING = 6  # past a piece's end, and around the sequence: an all-zero column

    def __init__(self, vocab_size: int, max_piece_length: int):
        super().__init__()
        self.register_buffer("piece_codes", self._marker_codes(vocab_size, max_piece_length))
        self.has_pieces = False

    @classmethod
    def _marker_codes(cls, vocab_size: int, max_piece_length: int) -> torch.Tensor:
        """Every piece as a token without bases: one marker position."""
        codes = torch.full((vocab_size, max_piece_length), cls.NOTHING, dtype=torch.int8)
        codes[:, 0] = cls.MARKER
        return codes

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)
        if prefix + "piece_codes" in state_dict:
            self.has_pieces = True

    def set_pieces(self, pieces: list[str]) -> None:
        """Each DNA piece's bases (case-insensitive; IUPAC codes count as N); any other
        piece ([CLS], a GENA-LM special...) is a single marker position."""
        if len(pieces) != len(self.piece_codes):
            raise ConfigError(
                f"the vocabulary has {len(pieces)} pieces, the model's table of their bases "
                f"{len(self.piece_codes)}"
            )
        limit = self.piece_codes.shape[1]
        codes = self._marker_codes(*self.piece_codes.shape)
        for index, piece in enumerate(pieces):
            bases = piece.upper()
            if not bases or not set(bases) <= set(ALPHABET + IUPAC_AMBIGUITY):
                continue
            if len(bases) > limit:
                raise ConfigError(
                    f"piece {index} ({bases[:20]}...) has {len(bases)} bases; raise "
                    f"base_conv_max_piece_length to at least {max(map(len, pieces))}"
                )
            base_codes = [self.BASES.index(b) if b in self.BASES else 4 for b in bases]
            codes[index, : len(bases)] = torch.tensor(base_codes)
        self.piece_codes.copy_(codes)
        self.has_pieces = True

    def check_pieces(self) -> None:
        if not self.has_pieces:  # else every piece would be read as a token without bases
            raise ConfigError(
                "reading the bases needs the vocabulary's pieces: build the model with "
                "its tokenizer (set_vocabulary) or load its saved weights"
            )

    def spelled_bases(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None, markers: bool = True
    ):
        """The batch written out base by base: codes [B, L] and, for each position, the
        index of the token it belongs to [B, L] (N, one past the last token, for the
        positions after a sequence's end). With `markers`, each token without bases takes
        one `MARKER` position (the base convolution must see where a masked piece was);
        without, the codes are the window's bases alone, as a one-hot baseline reads
        them ([CLS] and [SEP] take no position)."""
        batch, tokens = input_ids.shape
        codes = self.piece_codes[input_ids].long()  # [B, N, P]
        spelled = codes != self.NOTHING if markers else codes < self.MARKER
        spans = spelled.sum(-1)  # [B, N]
        if attention_mask is not None:
            spans = spans * attention_mask.long()
        starts = spans.cumsum(1) - spans
        length = max(1, int((starts[:, -1] + spans[:, -1]).max()))
        offsets = torch.arange(codes.shape[-1], device=input_ids.device)
        used = offsets < spans[..., None]  # [B, N, P]
        rows = torch.arange(batch, device=input_ids.device)[:, None, None].expand_as(used)
        token = torch.arange(tokens, device=input_ids.device)[None, :, None].expand_as(used)
        positions = (starts[..., None] + offsets)[used]
        base_codes = torch.full((batch, length), self.NOTHING, device=input_ids.device)
        base_codes[rows[used], positions] = codes[used]
        owner = torch.full((batch, length), tokens, device=input_ids.device)
        owner[rows[used], positions] = token[used]
        return base_codes, owner


def reverse_complement_bases(codes: torch.Tensor, end: int) -> torch.Tensor:
    """Each row's bases (codes [B, L]: A C G T 0-3, anything else kept as it is) read on
    the other strand, its positions coded `end` (past each row's end) left at the end:
    the codes of the reverse-complemented windows. The one reverse complement of the
    CNN baselines' codes and of the base readers' spelled bases."""
    length = codes.shape[1]
    real = (codes != end).sum(1, keepdim=True)  # [B, 1]
    source = real - 1 - torch.arange(length, device=codes.device)[None]  # [B, L]
    flipped = codes.gather(1, source.clamp(min=0))
    complemented = torch.where(flipped < 4, 3 - flipped.long(), flipped.long()).to(codes.dtype)
    return torch.where(source >= 0, complemented, torch.full_like(codes, end))


class BaseCNN(nn.Module):
    """A CNN on the bases the input's tokens spell, beside the encoder: the tower of
    genobird's CNN baseline (baselines/cnn.py's SmallCNN: convolutions of 15, 9 and 5
    bases with batch norm and ReLU, max-pooling of 4 between them, dropout), its global
    maximum and mean over each input's bases handed to the classification head with the
    encoder's pooled vector. So a fine-tuned classifier holds what a one-hot CNN of the
    same size can learn, at every base position, whatever the tokenizer's cuts; the
    encoder adds what tokens and attention see.

    The bases come from the classifier's `speller` (the encoder's base convolution, or a
    table of the vocabulary's bases of its own): A C G T one-hot, N all-zero, and
    positions past an input's end left out of both poolings, so a window's features do
    not depend on how far its batch was padded (`cnn_tower`)."""

    WIDTHS = (15, 9, 5)

    def __init__(self, channels: int, dropout: float):
        super().__init__()
        self.blocks = nn.ModuleList(
            nn.Sequential(
                nn.Conv1d(4 if i == 0 else channels, channels, width, padding=width // 2),
                nn.BatchNorm1d(channels),
            )
            for i, width in enumerate(self.WIDTHS)
        )
        self.dropout = nn.Dropout(dropout)
        self.output_size = 2 * channels

    def start_from(self, cnn: nn.Module) -> None:
        """Take a trained baseline's tower (baselines.cnn.SmallCNN of this width)."""
        self.blocks.load_state_dict(cnn.blocks.state_dict())

    def forward(self, base_codes: torch.Tensor) -> torch.Tensor:
        """base_codes long [B, L] (BaseSpeller's codes) -> features [B, 2C]."""
        x = F.one_hot(base_codes, BaseSpeller.NOTHING + 1)[..., :4]
        x = x.transpose(1, 2).to(self.blocks[0][0].weight.dtype)  # [B, 4, L]
        inside = (base_codes != BaseSpeller.NOTHING).to(x.dtype)[:, None]  # [B, 1, L]
        return cnn_tower(self.blocks, self.dropout, x, inside)


def cnn_tower(
    blocks: nn.ModuleList, dropout: nn.Module, x: torch.Tensor, inside: torch.Tensor
) -> torch.Tensor:
    """The CNN tower's pooled features [B, 2C] of one-hot bases x [B, 4, L], `inside`
    [B, 1, L] 1 on each input's own positions and 0 past its end: the same for an input
    alone and padded in any batch. The one computation of genobird's CNN baseline
    (baselines.cnn.SmallCNN) and of a classifier's base CNN, so that a classifier started
    from the baseline gives the baseline's logits."""
    for index, block in enumerate(blocks):
        # zero past each input's end, as the zero padding of an input alone would be:
        # the next convolution and pooling then see the same values either way (ReLU
        # outputs are >= 0, so a zero never wins a maximum over real ones). Every input is
        # pooled after every block but the last, whatever its length, so a short input
        # is read alike alone and in a batch of longer ones.
        x = F.relu(block(x)) * inside
        if index < len(blocks) - 1:
            x = F.max_pool1d(x, 4, ceil_mode=True)
            inside = F.max_pool1d(inside, 4, ceil_mode=True)
        x = dropout(x)
    count = inside.sum(-1).clamp(min=1)
    return torch.cat([x.amax(dim=-1), x.sum(dim=-1) / count], dim=1)


# DeepSEA's convolutions: 8 bp kernels, max-pooling of 4 after the first two, read over a
# window of at least 1 kb; positions after its three convolutions of a 1,000 bp window:
# 1000 - 7 = 993, pooled 248; - 7 = 241, pooled 60; - 7 = 53
DEEPSEA_KERNEL, DEEPSEA_POOL, DEEPSEA_WINDOW = 8, 4, 1000
DEEPSEA_POSITIONS = 53


class DeepSEATower(nn.Module):
    """DeepSEA's convolutions and fully connected layer (baselines.cnn.DeepSEACNN is this
    tower and an output layer): one-hot bases [B, 4, L] -> the hidden layer's [B, 2C].
    Its channels (320, 480, 960 in DeepSEA) are `channels` for the first convolution and
    1.5x and 3x of it for the others (DeepSEA's ratios), with batch norm after each (not
    in DeepSEA (2015): Selene's DeeperDeepSEA adds it, so that a data set of thousands of
    windows trains in epochs, not hundreds), and a hidden layer of 2x. The fully connected
    layer reads at most `DEEPSEA_POSITIONS` positions, DeepSEA's own count at 1 kb: longer
    inputs are max-pooled down to it, so a window of 8 kb is read by the same layers, each
    position then summarising 8x the bases; a shorter one is read in the middle of a 1 kb
    window of N (all-zero columns). It reads positions, so the inputs of one batch share
    one length (a data set's windows do)."""

    def __init__(self, channels: int, dropout: float):
        super().__init__()
        widths = (channels, channels * 3 // 2, channels * 3)
        self.convs = nn.ModuleList(
            nn.Sequential(
                nn.Conv1d(4 if i == 0 else widths[i - 1], width, DEEPSEA_KERNEL),
                nn.BatchNorm1d(width),
            )
            for i, width in enumerate(widths)
        )
        self.dropouts = nn.ModuleList(nn.Dropout(p) for p in (dropout, dropout, 2.5 * dropout))
        # sized on the first input (the baseline's weights, drawn in this order, are what
        # its published figures were measured with); `materialize` sizes it at once
        self.hidden = nn.LazyLinear(2 * channels)
        self.output_size = 2 * channels

    def materialize(self) -> DeepSEATower:
        """Size the fully connected layer (it always reads `DEEPSEA_POSITIONS`), leaving
        the random number generator as it was."""
        with torch.random.fork_rng(devices=[]), torch.no_grad():
            self(torch.zeros(1, 4, DEEPSEA_WINDOW))
        return self

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[-1] < DEEPSEA_WINDOW:
            left = (DEEPSEA_WINDOW - x.shape[-1]) // 2
            x = F.pad(x, (left, DEEPSEA_WINDOW - x.shape[-1] - left))
        for index, conv in enumerate(self.convs):
            x = F.relu(conv(x))
            if index < 2:
                x = F.max_pool1d(x, DEEPSEA_POOL)
            x = self.dropouts[index](x)
        if x.shape[-1] > DEEPSEA_POSITIONS:  # [B, C, L'] -> [B, C, 53]
            x = F.adaptive_max_pool1d(x, DEEPSEA_POSITIONS)
        return F.relu(self.hidden(x.flatten(1)))


class BaseDeepSEA(nn.Module):
    """DeepSEA's CNN on the bases the input's tokens spell, beside the encoder (as
    `BaseCNN` puts the small CNN there): its hidden layer, read by the head with the
    encoder's vector, so a classifier can start as genobird's DeepSEA CNN baseline, whose
    fully connected layer sees where in a long window each motif lies (the small CNN's
    global pooling does not). A, C, G, T one-hot, N and positions past the end all-zero,
    as the baseline reads them; the inputs of one batch share one length."""

    def __init__(self, channels: int, dropout: float):
        super().__init__()
        self.tower = DeepSEATower(channels, dropout).materialize()
        self.output_size = self.tower.output_size

    def start_from(self, cnn: nn.Module) -> None:
        self.tower.load_state_dict(cnn.tower.state_dict())

    def forward(self, base_codes: torch.Tensor) -> torch.Tensor:
        """base_codes long [B, L] (BaseSpeller's codes) -> features [B, 2C]."""
        x = F.one_hot(base_codes, BaseSpeller.NOTHING + 1)[..., :4]
        return self.tower(x.transpose(1, 2).to(self.tower.convs[0][0].weight.dtype))


# the base CNN's architectures (baselines.cnn.ARCHITECTURES: the baselines they start from)
BASE_CNNS = {"cnn": BaseCNN, "deepsea-cnn": BaseDeepSEA}


class BaseKmers(nn.Module):
    """Counts of every k-mer (k in `ks`) of the bases the input's tokens spell, each
    scaled by a factor fitted on the training windows: the features of genobird's k-mer
    LR baseline (baselines/kmer.py: k-mers holding an N or crossing a token without bases
    are not counted; columns k = ks[0] first, the first base most significant; scaled as
    its MaxAbsScaler scales them), handed to the classification head beside the encoder's
    pooled vector. So a fine-tuned classifier holds what the k-mer LR can learn, which on
    a few hundred windows is often more than a CNN or a transformer learns from them.

    `scale` (saved with the weights) is 1 until `set_scale` gives it the baseline's."""

    def __init__(self, ks: tuple[int, ...]):
        super().__init__()
        if not ks or min(ks) < 1 or max(ks) > 8:
            raise ConfigError(f"base k-mer lengths must lie in 1-8, got {list(ks)}")
        self.ks = tuple(ks)
        self.output_size = sum(4**k for k in self.ks)
        self.register_buffer("scale", torch.ones(self.output_size))

    def set_scale(self, scale) -> None:
        with torch.no_grad():
            self.scale.copy_(torch.as_tensor(scale, dtype=torch.float32))

    def forward(self, base_codes: torch.Tensor) -> torch.Tensor:
        """base_codes long [B, L] (BaseSpeller's codes) -> features [B, sum 4^k]."""
        batch, length = base_codes.shape
        acgt = base_codes < 4
        columns = []
        for k in self.ks:
            counts = self.scale.new_zeros(batch, 4**k)
            if length >= k:
                windows = base_codes.unfold(1, k, 1).clamp(max=3)  # [B, L-k+1, k]
                powers = 4 ** torch.arange(k - 1, -1, -1, device=base_codes.device)
                index = (windows * powers).sum(-1)
                whole = acgt.unfold(1, k, 1).all(-1).to(counts.dtype)
                counts.scatter_add_(1, index, whole)
            columns.append(counts)
        return torch.cat(columns, dim=1) * self.scale


# The shortest k-mers counted by base k-mers: the k-mer LR baseline's (3-6 by default)
SHORTEST_BASE_KMER = 3


def base_kmer_lengths(longest: int) -> tuple[int, ...]:
    """The k-mer lengths of `base_kmers` = longest: 3 to longest."""
    if not SHORTEST_BASE_KMER <= longest <= 8:
        raise ConfigError(
            f"base_kmers (the longest k-mer counted) must be 0 (none) or "
            f"{SHORTEST_BASE_KMER}-8, got {longest}"
        )
    return tuple(range(SHORTEST_BASE_KMER, longest + 1))


def check_base_reader(pooling: str, name: str, value: int) -> None:
    """A base reader (base_cnn_channels, base_kmers) has no transformers counterpart."""
    if value < 0:
        raise ConfigError(f"{name} must be 0 (none) or more, got {value}")
    if pooling == "hf":
        raise ConfigError(
            f"{name} has no transformers counterpart: use pooling "
            f"cls, mean or centre, or leave {name} at 0"
        )
