"""What a model reads: attributions over many windows, and the motifs in them named by
their JASPAR matches (a fine-tuned model's, or a baseline's: interpret.baselines)."""

# the JASPAR database motifs are named from, unless asked otherwise (pyjaspar ships it)
JASPAR_RELEASE = 2026
JASPAR_TAXON = "vertebrates"
# where a run's motifs go (RUN/motifs: genobird motifs --out), which its page links
RUN_MOTIFS_FOLDER = "motifs"
