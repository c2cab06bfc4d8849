# The reference genome and its annotations: the embedded demo genome, generated
# deterministically; the data sets of a download manifest (reference/grch37.yaml)
# fetched with `genobird reference download` (resumable, checksum-verified); or your own
# FASTA files (plain or bgzipped), with an optional TSS BED and peak feature table.
#
# Every later stage reads these names: GENOME_FILES (the FASTAs the corpus reads),
# GENOME (the one FASTA that coordinates refer to), TSS (promoter BED or None),
# HAS_PROMOTER and HAS_CHROMATIN (which fine-tuning stages run).

REFERENCE = config["reference"]
DEMO = REFERENCE["source"] == "demo"
OWN_FASTA = REFERENCE["source"] == "fasta"
# motifs a promoter model's discovered motifs are held against (the demo's planted ones)
KNOWN_PROMOTER_MOTIFS = None


if DEMO:

    rule demo_reference:
        output:
            fasta=f"{RESULTS}/reference/genome.fa",
            tss=f"{RESULTS}/reference/tss.bed",
            features=f"{RESULTS}/reference/features.tsv",
            samples=f"{RESULTS}/reference/samples.fa",
            variants=f"{RESULTS}/reference/variants.vcf",
            manifest=f"{RESULTS}/reference/manifest.json",
            # the motifs it plants in promoters: what motif discovery may recover
            promoter_motifs=f"{RESULTS}/reference/promoter_motifs.meme",
        params:
            outdir=lambda wildcards, output: os.path.dirname(output.manifest),
            seed=REFERENCE["seed"],
            size=REFERENCE["size_mb"],
        log:
            f"{RESULTS}/logs/demo_reference.log",
        threads: 1
        resources:
            mem_mb=2000,
        conda:
            ENV
        shell:
            "genobird demo-reference --out {params.outdir} --seed {params.seed} --size-mb {params.size}"
            " > {log} 2>&1"

    GENOME = rules.demo_reference.output.fasta
    TSS = rules.demo_reference.output.tss
    FEATURES = rules.demo_reference.output.features
    KNOWN_PROMOTER_MOTIFS = rules.demo_reference.output.promoter_motifs

elif OWN_FASTA:
    GENOME_FILES = list(REFERENCE["fasta"])
    TSS = REFERENCE.get("tss")
    FEATURES = REFERENCE.get("features")
    if (TSS or FEATURES) and len(GENOME_FILES) > 1:
        raise ValueError(
            "reference.tss and reference.features refer to coordinates of one genome: give "
            "reference.fasta as a single FASTA file with them"
        )
    GENOME = GENOME_FILES[0]

else:
    from genobird.genome.download import final_path, load_manifest

    MANIFEST = load_manifest(REFERENCE["manifest"])
    DOWNLOADS = REFERENCE["dest"]
    # config key -> manifest entry; each becomes one rule, download_<key>
    DOWNLOADED = {}
    for key in ("genome", "promoters", "deepsea_bundle", "deepsea_coordinates"):
        entry = REFERENCE[key]
        if entry not in MANIFEST:
            raise ValueError(
                f"reference.{key}: '{entry}' is not in {REFERENCE['manifest']}; "
                f"its entries: {', '.join(MANIFEST)}"
            )
        target = str(final_path(MANIFEST[entry], DOWNLOADS))
        DOWNLOADED[key] = target

        rule:
            name:
                f"download_{key}"
            output:
                directory(target) if MANIFEST[entry].post == "untar" else target,
            params:
                entry=entry,
                manifest=REFERENCE["manifest"],
                dest=lambda wildcards, output: os.path.dirname(output[0]),
            log:
                f"{RESULTS}/logs/download_{key}.log",
            threads: 1
            resources:
                mem_mb=2000,
                downloads=1,  # `--resources downloads=N` caps parallel downloads
            retries: 2  # a dropped connection resumes where it stopped
            conda:
                ENV
            shell:
                "genobird reference download {params.entry} --manifest {params.manifest}"
                " --out {params.dest} > {log} 2>&1"

    GENOME = DOWNLOADED["genome"]
    TSS = DOWNLOADED["promoters"]
    FEATURES = None  # DeepSEA's labels come from its bundle (workflows/chromatin.smk)

if not OWN_FASTA:
    GENOME_FILES = [GENOME]
HAS_PROMOTER = TSS is not None
HAS_CHROMATIN = not OWN_FASTA or FEATURES is not None
