"""What a fine-tuned model reads: attributions over many windows, and the motifs in them
named by their JASPAR matches."""
