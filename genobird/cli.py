"""The `genobird` command line. `main(argv=None)` returns the exit code, so tests call it.

Exit codes: 0 success, 1 a problem with the input or the run (one line on stderr, no
traceback), 2 a usage error (argparse), 130 interrupted. `--debug` shows tracebacks.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from pathlib import Path

# Long-sequence attention allocates GBs of short-lived CPU tensors; backing them with
# transparent huge pages removes the first-touch page faults that made time grow
# super-linearly with length (benchmarks/README.md: 32k tokens 1.8x faster). torch
# reads this at its first allocation, so it is set here, before torch is imported.
os.environ.setdefault("THP_MEM_ALLOC_ENABLE", "1")

from genobird import __version__
from genobird.errors import GenobirdError, InputError
from genobird.fileio import atomic_write

log = logging.getLogger("genobird")

EXIT_OK, EXIT_FAILURE, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130


# =========================================================================== commands
def cmd_demo_reference(args: argparse.Namespace) -> int:
    from genobird.genome.demo import DemoSpec, generate_demo_reference

    if args.size_mb <= 0:
        raise GenobirdError(f"--size-mb must be positive, got {args.size_mb}")
    manifest = generate_demo_reference(args.outdir, DemoSpec(seed=args.seed, size_mb=args.size_mb))
    total = sum(manifest["chromosomes"].values())
    print(
        f"wrote {args.outdir}: {len(manifest['chromosomes'])} chromosomes, {total:,} bp, "
        f"{manifest['promoters']} promoters, {len(manifest['features'])} chromatin features"
    )
    return EXIT_OK


def cmd_reference_list(args: argparse.Namespace) -> int:
    from genobird.genome.download import load_manifest

    for name, data_set in load_manifest(args.manifest).items():
        print(f"{name}\t{data_set.description}\t{data_set.url}")
    return EXIT_OK


def cmd_reference_download(args: argparse.Namespace) -> int:
    from genobird.genome.download import download, load_manifest

    data_sets = load_manifest(args.manifest)
    unknown = [name for name in args.names if name not in data_sets]
    if unknown:
        raise GenobirdError(
            f"unknown data set(s) {', '.join(unknown)}; available: {', '.join(data_sets)}"
        )
    for name in args.names:
        path = download(data_sets[name], args.dest)
        print(f"{name}: {path}")
    return EXIT_OK


def cmd_reference_fetch(args: argparse.Namespace) -> int:
    from genobird.genome import Interval, Reference, parse_region

    with Reference(args.fasta) as reference:
        # a contig's own name (which may hold a colon) is the whole contig
        if args.region in reference.lengths:
            region = Interval(args.region, 0, reference.lengths[args.region])
        else:
            region = parse_region(args.region)
        sequence = reference.fetch(
            region.chrom, region.start, region.end, strand=args.strand, pad=args.pad
        )
    print(f">{args.region}({args.strand})")
    for i in range(0, len(sequence), 60):
        print(sequence[i : i + 60])
    return EXIT_OK


def cmd_corpus_documents(args: argparse.Namespace) -> int:
    from genobird.corpus import DocumentSpec, write_documents

    spec = DocumentSpec(
        passes=args.passes,
        min_sentence_bp=args.min_sentence_bp,
        max_sentence_bp=args.max_sentence_bp,
        max_n_fraction=args.max_n_fraction,
        seed=args.seed,
    )
    summary = write_documents(
        args.reference, args.out, spec, args.chromosomes, args.threads, progress=not args.quiet
    )
    print(
        f"wrote {args.out}: {summary.documents:,} documents, {summary.sentences:,} sentences, "
        f"{summary.bp / 1e6:,.1f} Mbp from {summary.chromosomes} chromosomes in "
        f"{summary.seconds:.1f} s ({summary.mbp_per_second:.1f} Mbp/s scanned)"
    )
    return EXIT_OK


def cmd_convert_from_hf(args: argparse.Namespace) -> int:
    from genobird.convert import from_hf

    result = from_hf(args.hf_dir, args.out_dir, window_bp=args.window_bp)
    fresh = result["fresh_heads"]
    print(
        f"wrote {args.out_dir}: {result['model_class']} from {result['architecture']} "
        f"(attention {result['attention_type']})"
        + (f"; fresh heads (not in the file): {', '.join(fresh)}" if fresh else "")
    )
    return EXIT_OK


def cmd_convert_to_hf(args: argparse.Namespace) -> int:
    from genobird.convert import to_hf

    result = to_hf(args.model_dir, args.out_dir)
    print(
        f"wrote {args.out_dir}: {result['architecture']} ({result['tensors']} tensors, "
        f"attention_type {result['attention_type']}) and tokenizer.json"
    )
    if result.get("note"):
        print(f"note: {result['note']}")
    return EXIT_OK


def cmd_vocab_train(args: argparse.Namespace) -> int:
    from genobird.corpus import VocabSpec, read_documents, train_vocabulary

    spec = VocabSpec(
        vocab_size=args.vocab_size,
        sample_sentences=args.sample_sentences,
        seed=args.seed,
        threads=args.threads,
    )
    tokenizer = train_vocabulary(args.documents, args.out, spec)
    message = f"wrote {args.out}: {tokenizer.vocab_size:,} pieces"
    if args.heldout:
        sentences = [s for document in read_documents(args.heldout) for s in document]
        bp_per_token = tokenizer.bp_per_token(sentences, threads=args.threads)
        message += f"; {bp_per_token:.2f} bp/token on {len(sentences):,} held-out sentences"
    print(message)
    return EXIT_OK


def cmd_corpus_instances(args: argparse.Namespace) -> int:
    from genobird.corpus import InstanceSpec, write_instances

    spec = InstanceSpec(
        max_seq_length=args.max_seq_length,
        max_predictions=args.max_predictions,
        masked_lm_prob=args.masked_lm_prob,
        dupe_factor=args.dupe_factor,
        short_seq_prob=args.short_seq_prob,
        documents_per_chunk=args.documents_per_chunk,
        dynamic_masking=args.dynamic_masking,
        seed=args.seed,
    )
    manifest = write_instances(
        args.documents, args.tokenizer, args.out, spec, args.threads, progress=not args.quiet
    )
    print(
        f"wrote {args.out}: {manifest['instances']:,} instances in {len(manifest['shards'])} "
        f"shards from {manifest['bp'] / 1e6:,.1f} Mbp in {manifest['seconds']:.1f} s"
    )
    return EXIT_OK


def cmd_pretrain(args: argparse.Namespace) -> int:
    from genobird.training.pretraining import load_run_config, run_pretraining

    overrides = {
        f"training.{name}": value
        for name, value in (
            ("max_steps", args.max_steps),
            ("batch_size", args.batch_size),
            ("effective_batch_size", args.effective_batch_size),
            ("learning_rate", args.learning_rate),
        )
        if value is not None
    }
    data = {"train": args.train, "eval": args.eval, "tokenizer": args.tokenizer,
            "init": args.init}  # fmt: skip
    overrides.update({f"data.{k}": str(v) for k, v in data.items() if v is not None})
    config = load_run_config(args.config, overrides)
    if args.output:
        config["output"] = str(args.output)
    if args.context_lengths:
        config["context_lengths"] = args.context_lengths
    config["no_resume"] = args.no_resume
    config.setdefault("training", {})["progress"] = not args.quiet
    summary = run_pretraining(config)
    evaluation = summary.get("eval") or {}
    message = f"pretrained {summary['steps']} steps; model in {config['output']}/model"
    if evaluation:
        message += (
            f"; held-out MLM accuracy {evaluation['mlm_accuracy']:.3f}, "
            f"BPC {evaluation['bits_per_character']:.3f}"
        )
        if "nsp_accuracy" in evaluation:
            message += f", NSP accuracy {evaluation['nsp_accuracy']:.3f}"
    print(message)
    return EXIT_OK


def _report_rejected(problems, limit: int = 5) -> None:
    for problem in problems[:limit]:
        log.warning("skipped: %s", problem)
    if len(problems) > limit:
        log.warning("... and %d more skipped records", len(problems) - limit)


def cmd_dataset_promoter(args: argparse.Namespace) -> int:
    from genobird.tasks.promoter import PromoterSpec, build_promoter_dataset

    spec = PromoterSpec(
        upstream=args.upstream,
        downstream=args.downstream,
        hard_negatives=args.hard_negatives,
        training_negatives=args.training_negatives,
        min_distance=args.min_distance,
        off_end=args.off_end,
        valid_chromosomes=tuple(args.valid_chromosomes),
        test_chromosomes=tuple(args.test_chromosomes),
        seed=args.seed,
    )
    windows, problems = build_promoter_dataset(
        args.tss, args.reference, args.out, spec, liftover_chain=args.liftover
    )
    _report_rejected(problems)
    print(f"wrote {args.out}: {len(windows):,} windows; {len(problems)} TSS rows skipped")
    return EXIT_OK


def cmd_dataset_promoter_sequences(args: argparse.Namespace) -> int:
    from genobird.tasks.promoter import PromoterSpec, build_promoter_sequence_dataset

    spec = PromoterSpec(seed=args.seed, training_negatives=args.training_negatives)
    windows, problems = build_promoter_sequence_dataset(
        args.positives, args.out, spec, args.valid_fraction, args.test_fraction
    )
    _report_rejected(problems)
    positives = sum(int(label[0]) for label in windows.labels)
    print(
        f"wrote {args.out}: {positives:,} promoters and {len(windows) - positives:,} DeePromoter "
        f"negatives; {len(problems)} records skipped"
    )
    return EXIT_OK


def cmd_dataset_chromatin(args: argparse.Namespace) -> int:
    import numpy as np

    from genobird.tasks.chromatin import ChromatinSpec, build_chromatin_dataset, positives_by_split

    spec = ChromatinSpec(
        bin_size=args.bin_size,
        context=args.context,
        min_overlap=args.min_overlap,
        negative_ratio=args.negative_ratio,
        max_bins=args.max_bins,
        chromosomes=tuple(args.chromosomes) if args.chromosomes else None,
        valid_chromosomes=tuple(args.valid_chromosomes),
        test_chromosomes=tuple(args.test_chromosomes),
        assayed=_assayed_pairs(args.assayed),
        seed=args.seed,
    )
    windows = build_chromatin_dataset(args.features, args.reference, args.out, spec,
                                      progress=not args.quiet)  # fmt: skip
    print(f"wrote {args.out}: {len(windows):,} windows x {len(windows.feature_names)} features")
    splits = np.asarray(windows.splits)
    for split, positives in positives_by_split(windows).items():
        print(f"  {split}: {int((splits == split).sum()):,} windows; positives per feature "
              f"median {int(np.median(positives))}, min {int(positives.min())}; "
              f"{int((positives >= 20).sum())} of {len(positives)} features with 20 or "
              "more")  # fmt: skip
    return EXIT_OK


def _assayed_pairs(pairs: list[str]) -> dict:
    """{table: where} of --assayed TABLE=WHERE."""
    assayed = {}
    for pair in pairs:
        table, separator, where = pair.partition("=")
        if not separator or not table or not where:
            raise InputError(f"--assayed {pair!r}: write TABLE=WHERE, e.g. histone.tsv=chr19")
        assayed[table] = where
    return assayed


def _names_preview(names: list[str], shown: int = 5) -> str:
    """'3 labels: a, b, c', or the first few and a count: a data set may have 919."""
    listed = ", ".join(names[:shown]) + (
        f", ... ({len(names) - shown} more)" if len(names) > shown else ""
    )
    return f"{len(names)} label{'s' * (len(names) != 1)}: {listed}"


def cmd_dataset_classify(args: argparse.Namespace) -> int:
    from genobird.tasks.classify import build_classify_dataset

    windows, problems = build_classify_dataset(
        args.input, args.out, args.label_columns, args.valid_fraction, args.test_fraction,
        args.seed, args.valid, args.test,
    )  # fmt: skip
    _report_rejected(problems)
    print(
        f"wrote {args.out}: {len(windows):,} sequences, {_names_preview(windows.feature_names)}; "
        f"{len(problems)} records skipped"
    )
    return EXIT_OK


def cmd_dataset_deepsea(args: argparse.Namespace) -> int:
    if args.csv:
        return _dataset_deepsea_csv(args)
    from genobird.tasks.chromatin import import_deepsea

    missing = [f"--{name}" for name in ("split", "coordinates", "reference")
               if getattr(args, name) is None]  # fmt: skip
    if missing:
        raise GenobirdError(f"--mat needs {', '.join(missing)}")
    if len(args.mat) != len(args.split):
        raise GenobirdError("give one --split name per --mat file, in the same order")
    windows = import_deepsea(
        dict(zip(args.split, args.mat, strict=True)), args.coordinates, args.reference,
        args.out, args.features, args.context,
    )  # fmt: skip
    print(f"wrote {args.out}: {len(windows):,} windows x {len(windows.feature_names)} features")
    return EXIT_OK


def _dataset_deepsea_csv(args: argparse.Namespace) -> int:
    from genobird.tasks.deepsea_csv import DEEPSEA_WINDOW_BP, import_deepsea_csv

    if args.split_column and (args.valid or args.test):
        raise GenobirdError("give either --split-column or --valid/--test files, not both")
    summary = import_deepsea_csv(
        args.csv, args.out, args.features, args.split_column, args.valid_fraction,
        args.test_fraction, args.seed, args.valid, args.test,
    )  # fmt: skip
    _report_rejected(summary.problems)
    if summary.other_length:
        log.warning("%d sequences are not %d bp long (kept)", summary.other_length,
                    DEEPSEA_WINDOW_BP)  # fmt: skip
    splits = ", ".join(f"{count:,} {split}" for split, count in summary.counts.items())
    skipped = len(summary.problems)
    print(f"wrote {args.out}: {splits}; {skipped} row{'s' * (skipped != 1)} skipped")
    return EXIT_OK


def fresh_shape_of(model_dir: Path) -> dict:
    """The architecture of a model directory, for a fresh model of the same shape (the
    from-scratch control of a pretrained model); the vocabulary comes from --tokenizer."""
    from genobird.model.io import read_model_description

    config = dict(read_model_description(model_dir)["config"])
    config.pop("vocab_size")
    return config


def cmd_finetune(args: argparse.Namespace) -> int:
    from genobird.tasks.data import read_metadata
    from genobird.tasks.finetune import FinetuneSpec, finetune

    meta = read_metadata(args.data)
    if meta["task"] != args.task:
        raise GenobirdError(f"{args.data} is a {meta['task']} data set, not {args.task}")
    training = {
        "learning_rate": args.learning_rate,
        "warmup_steps": args.warmup_steps,
        "max_steps": args.max_steps,
        "batch_size": args.batch_size,
        "effective_batch_size": args.effective_batch_size or args.batch_size,
        "checkpoint_every": args.checkpoint_every,
        "log_every": 20,
        "eval_every": 0,
        "progress": not args.quiet,
        "seed": args.seed,
        "ema_decay": args.ema_decay,
    }
    spec = FinetuneSpec(
        max_tokens=args.max_tokens,
        window_bp=args.window_bp,
        pos_weight=args.pos_weight,
        rc_average=args.rc_average,
        rc_augment=args.rc_augment,
        pooling=args.pooling,
        centre_bp=args.centre_bp,
        dropout=args.dropout,
        eval_every=args.eval_every,
        patience=args.patience,
        layer_decay=args.layer_decay,
        head_lr_scale=args.head_lr_scale,
        bpe_dropout=args.bpe_dropout,
        segmentations=args.segmentations,
        training=training,
        seed=args.seed,
    )  # fmt: skip
    if args.shape_of:
        if not args.from_scratch:
            raise GenobirdError("--shape-of is for --from-scratch (a pretrained model has one)")
        spec.model = fresh_shape_of(args.shape_of)
    report = finetune(args.data, args.output, spec, args.pretrained, args.tokenizer)
    print(f"fine-tuned {args.task}; test {_headline(report)}; model in {args.output}/model")
    return EXIT_OK


def cmd_score(args: argparse.Namespace) -> int:
    from genobird.scoring import write_scores

    kind, source = _score_source(args, ("fasta", "bed", "vcf"))
    predictor = _load_predictor(args)
    summary = write_scores(
        predictor, kind, source, args.out, args.format, args.features, args.reference,
        args.tiles, progress=not args.quiet, chromosomes=args.chromosomes,
    )  # fmt: skip
    return _finish_scoring(summary, kind, source, args)


def cmd_likelihood(args: argparse.Namespace) -> int:
    from genobird.likelihood import LikelihoodScorer
    from genobird.scoring import write_scores

    kind, source = _score_source(args, ("fasta", "bed"))
    scorer = LikelihoodScorer(
        args.model, args.device, args.stride, args.both_strands, args.batch_size
    )
    summary = write_scores(
        scorer, kind, source, args.out, args.format, None, args.reference,
        progress=not args.quiet, chromosomes=args.chromosomes,
    )  # fmt: skip
    return _finish_scoring(summary, kind, source, args)


def _score_source(args: argparse.Namespace, kinds: tuple[str, ...]) -> tuple[str, Path]:
    """The input kind and file of a scoring command, checked against its other options."""
    kind, source = next((k, getattr(args, k)) for k in kinds if getattr(args, k))
    if kind != "fasta" and args.reference is None:
        raise GenobirdError(f"--{kind} needs --reference FASTA to cut the windows from")
    if kind == "fasta" and args.chromosomes:
        raise GenobirdError("--chromosomes selects BED regions or VCF variants, not FASTA records")
    return kind, source


def _finish_scoring(summary, kind: str, source: Path, args: argparse.Namespace) -> int:
    """Say what a scoring command wrote; exit 1 when nothing was scored, or with --strict
    when anything was rejected."""
    print(
        f"scored {summary.scored:,} records, rejected {summary.rejected:,}; wrote "
        + ", ".join(str(p) for p in summary.outputs)
    )
    if summary.scored == 0:
        reason = (
            f"all {summary.rejected:,} records were rejected (reasons in {args.out}.rejected.tsv)"
            if summary.rejected
            else f"{source} has no {kind.upper()} records"
        )
        print(f"genobird: error: nothing could be scored: {reason}", file=sys.stderr)
        return EXIT_FAILURE
    if args.strict and summary.rejected:
        print(f"genobird: error: --strict and {summary.rejected} records rejected", file=sys.stderr)
        return EXIT_FAILURE
    return EXIT_OK


def cmd_zero_shot(args: argparse.Namespace) -> int:
    from genobird.baselines.markov import parse_orders
    from genobird.tasks.zero_shot import zero_shot

    if args.stride is not None and args.model is None:
        raise GenobirdError("--stride is for --model (the language model's masking)")
    report = zero_shot(args.data, args.output, args.model, args.markov, parse_orders(args.orders),
                       args.device, args.stride)  # fmt: skip
    chosen = f" (order {report['order']})" if "order" in report else ""
    print(
        f"{report['model']}{chosen}: test AUROC {report['auroc']:.4f}, F1 {report['f1']:.4f}, "
        f"MCC {report['mcc']:.4f}; wrote {args.output / 'report'}"
    )
    return EXIT_OK


def cmd_ism(args: argparse.Namespace) -> int:
    from genobird.mutagenesis import bed_regions, fasta_regions, plot_ism, run_ism

    if args.bed and args.reference is None:
        raise GenobirdError("--bed needs --reference FASTA to cut the windows from")
    predictor = _load_predictor(args)
    features = args.features or predictor.feature_names
    plotted = args.feature or features[0]
    if args.plot and plotted not in features:
        raise GenobirdError(f"--feature {plotted!r} is not among the features mutated")
    problems: list = []
    regions = (
        bed_regions(args.bed, args.reference, predictor.input_length_bp, problems)
        if args.bed
        else fasta_regions(args.fasta, predictor.input_length_bp, problems)
    )
    try:
        count, first = run_ism(predictor, regions, args.out, args.window, args.score,
                               args.features, progress=not args.quiet)  # fmt: skip
    finally:  # the skipped records explain an input where nothing could be mutated
        _report_rejected(problems)
    print(
        f"mutated {count:,} records x {len(first.effects):,} bp x 3 bases "
        f"({len(features):,} features); {len(problems)} records skipped; wrote {args.out}"
    )
    if args.plot:
        plot_ism(first, features.index(plotted), plotted, args.plot, args.score)
        print(f"wrote {args.plot} ({plotted}, {first.region.name})")
    return EXIT_OK


def cmd_baseline_markov(args: argparse.Namespace) -> int:
    from genobird.baselines.markov import markov_baseline, parse_orders, read_dna

    orders = parse_orders(args.orders)
    train = [codes for path in args.train for codes in read_dna(path)]
    heldout = [codes for path in args.heldout for codes in read_dna(path)]
    result = markov_baseline(train, heldout, orders, not args.forward_only, args.valid_fraction)
    report = {
        **result.to_dict(),
        "train": [str(p) for p in args.train],
        "heldout": [str(p) for p in args.heldout],
    }
    if args.out:
        with atomic_write(args.out) as handle:
            json.dump(report, handle, indent=2)
    print(
        f"order-{result.order} Markov (alpha {result.alpha:g}, chosen on validation DNA): "
        f"{result.bits_per_bp:.4f} bits/bp on {result.heldout_bp:,} held-out bases "
        f"(trained on {result.train_bp:,})"
    )
    return EXIT_OK


def cmd_baseline_classifier(args: argparse.Namespace) -> int:
    from genobird.baselines import run_classifier_baseline

    options = {"window_bp": args.window_bp}
    if args.kind in ("cnn", "deepsea-cnn"):
        options.update(rc_average=args.rc_average, max_minutes=args.max_minutes)
        if args.channels is not None:
            options["channels"] = args.channels
    report = run_classifier_baseline(args.kind, args.data, args.output, args.seed, **options)
    print(f"{args.kind} baseline; test {_headline(report)}; report in {args.output}/report")
    return EXIT_OK


def cmd_baseline_compare(args: argparse.Namespace) -> int:
    from genobird.tasks.compare import paired_bootstrap, read_predictions

    if args.against is None and len(args.runs) != 2:
        raise InputError(
            f"compare takes two runs (A, then B), got {len(args.runs)}; to compare seeds "
            "of one recipe with another, give A's runs, then --against and B's runs"
        )
    a_runs, b_runs = (args.runs, args.against) if args.against else ([args.runs[0]], [args.runs[1]])
    if _feature_count(a_runs[0]) > 1:
        return _compare_feature_runs(a_runs, b_runs, args)
    sides = {"A": [read_predictions(run) for run in a_runs],
             "B": [read_predictions(run) for run in b_runs]}  # fmt: skip
    result = paired_bootstrap(sides["A"], sides["B"], args.resamples, args.seed)
    result["a"], result["b"] = ([str(run.source) for run in runs] for runs in sides.values())
    if args.out:
        with atomic_write(args.out) as handle:
            json.dump(result, handle, indent=2)
    _print_comparison(result, sides, args.resamples)
    return EXIT_OK


def _feature_count(run: Path) -> int:
    from genobird.tasks.compare import read_feature_predictions

    return len(read_feature_predictions(run).feature_names)


def _compare_feature_runs(a_runs: list[Path], b_runs: list[Path], args) -> int:
    """Two multi-feature runs (chromatin profiles): each category's median AUROC, paired."""
    from genobird.tasks.compare import (
        describe_difference,
        paired_median_auroc,
        read_feature_predictions,
    )

    if len(a_runs) != 1 or len(b_runs) != 1:
        raise InputError("runs of several features are compared one against one (A, then B)")
    a, b = read_feature_predictions(a_runs[0]), read_feature_predictions(b_runs[0])
    result = paired_median_auroc(a, b, args.resamples, args.seed, args.min_positives)
    result["a"], result["b"] = str(a.source), str(b.source)
    if args.out:
        with atomic_write(args.out) as handle:
            json.dump(result, handle, indent=2)
    print(f"A {a.source}\nB {b.source}")
    print(f"{result['examples']:,} test examples, {args.resamples:,} paired resamples; median "
          f"AUROC over the features with >= {args.min_positives} test positives, 95% "
          "intervals:")  # fmt: skip
    for category, row in result["categories"].items():
        print(f"  {category:<10} {row['features']:>4} features  A {row['a']:.3f}  B {row['b']:.3f}"
              f"  A - B {describe_difference(row)}  (A ahead in {row['a_better_share']:.0%} of "
              "resamples)")  # fmt: skip
    return EXIT_OK


def _print_comparison(result: dict, sides: dict, resamples: int) -> None:
    from genobird.tasks.compare import describe_difference, describe_value

    for label, runs in sides.items():
        if len(runs) == 1:
            print(f"{label} {runs[0].source}")
        else:
            print(
                f"{label} the mean of {len(runs)} runs: " + ", ".join(str(r.source) for r in runs)
            )
    print(f"{result['examples']:,} test sequences, {resamples:,} paired resamples; 95% "
          "intervals:")  # fmt: skip
    for name, row in result["metrics"].items():
        line = (f"  {name:<6} A {describe_value(row, 'a')}  B {describe_value(row, 'b')}  "
                f"A - B {describe_difference(row)}  (A ahead in {row['a_better_share']:.0%} "
                "of resamples)")  # fmt: skip
        for side in "ab":
            if len(row[f"{side}_runs"]) > 1:
                line += f"; {side.upper()}'s runs " + " / ".join(
                    f"{value:.3f}" for value in row[f"{side}_runs"]
                )
        print(line)


def _headline(report: dict) -> str:
    """The figures a run prints: F1, MCC, AUROC, AUPRC (binary) or median AUROCs."""
    headline = ("f1", "mcc", "auroc", "auprc") if "f1" in report else ("median_auroc",)
    figures = ", ".join(f"{k} {report[k]:.3f}" for k in headline if k in report)
    if "median_auroc_by_category" in report:
        figures += ", by category " + ", ".join(
            f"{c} {v:.3f}" for c, v in report["median_auroc_by_category"].items()
        )
    return figures


LAYOUT_PATTERNS = ("bigbird", "etc", "strided", "fixed", "star", "random", "window-global")


def cmd_report(args: argparse.Namespace) -> int:
    from genobird.report import build_report

    out = args.out or args.results / "report.html"
    build_report(args.results, out, args.context_lengths, context_windows=args.context_windows)
    print(f"wrote {out}")
    return EXIT_OK


def cmd_layout(args: argparse.Namespace) -> int:
    from genobird.attention import analyse_layout
    from genobird.attention import layouts as patterns

    size, length = args.block_size, args.seq_len
    build = {
        "bigbird": lambda: patterns.bigbird_layout(
            length, size, args.global_blocks, args.window_blocks, args.random_blocks,
            args.heads, args.seed, args.layer,
        ),
        "etc": lambda: patterns.bigbird_etc_layout(
            length, args.global_tokens, size, args.window_blocks, args.random_blocks,
            args.heads, args.seed, args.layer,
        ),
        "strided": lambda: patterns.strided_layout(
            length, size, args.window, args.stride, args.heads
        ),
        "fixed": lambda: patterns.fixed_layout(length, size, args.stride, 1, args.heads),
        "star": lambda: patterns.star_layout(length, size, args.heads),
        "random": lambda: patterns.random_layout(
            length, size, args.random_blocks, args.heads, args.seed, args.layer
        ),
        "window-global": lambda: patterns.window_global_layout(
            length, size, args.window_blocks, (0,), args.heads
        ),
    }  # fmt: skip
    layout = build[args.pattern]()
    per_row = layout.block_mask.sum(dim=2).float()
    print(
        f"{layout.name}: {layout.seq_len} tokens in {layout.num_blocks} blocks of {size}, "
        f"{layout.num_heads} heads; density {layout.density():.3f}; key blocks per query block "
        f"min {per_row.min():.0f} / mean {per_row.mean():.1f} / max {per_row.max():.0f}; "
        f"{len(layout.global_rows)} global rows"
    )
    print(analyse_layout(layout).summary())
    return EXIT_OK


# =========================================================================== parser
def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="genobird",
        description="BigBird block-sparse transformers for long DNA sequences.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"genobird {__version__}")
    output = parser.add_argument_group("output")
    output.add_argument("-v", "--verbose", action="store_true", help="log debug messages")
    output.add_argument("-q", "--quiet", action="store_true", help="log warnings and errors only")
    output.add_argument("--debug", action="store_true", help="show tracebacks of errors")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    _add_demo_reference(commands)
    _add_reference(commands)
    _add_corpus(commands)
    _add_vocab(commands)
    _add_pretrain(commands)
    _add_dataset(commands)
    _add_finetune(commands)
    _add_score(commands)
    _add_likelihood(commands)
    _add_zero_shot(commands)
    _add_ism(commands)
    _add_baseline(commands)
    _add_report(commands)
    _add_layout(commands)
    _add_convert(commands)
    _add_nlp(commands)
    return parser


def _add_convert(commands) -> None:
    convert = commands.add_parser(
        "convert", help="HuggingFace BigBird checkpoints (e.g. GENA-LM) in and out."
    )
    actions = convert.add_subparsers(dest="action", metavar="ACTION", required=True)
    source = _subparser(
        actions,
        "from-hf",
        "Convert a transformers BigBird directory (config.json, model.safetensors or "
        "pytorch_model.bin, tokenizer.json) into a genobird model directory.",
        cmd_convert_from_hf,
    )
    source.add_argument("hf_dir", type=Path, help="downloaded HuggingFace model folder")
    source.add_argument("out_dir", type=Path, help="genobird model folder to write (new)")
    source.add_argument("--window-bp", type=int,
                        help="classifiers: input length in bp they were fine-tuned on")  # fmt: skip
    target = _subparser(
        actions,
        "to-hf",
        "Write a genobird model directory as a transformers BigBird directory with a "
        "tokenizer.json (BigBirdForMaskedLM, or ForSequenceClassification for a "
        "classifier fine-tuned with --pooling hf).",
        cmd_convert_to_hf,
    )
    target.add_argument("model_dir", type=Path, help="genobird model folder")
    target.add_argument("out_dir", type=Path, help="HuggingFace folder to write (new)")


def _add_nlp(commands) -> None:
    from genobird.nlp.cli import add_nlp_commands

    add_nlp_commands(commands, _subparser)


def _subparser(commands, name: str, help_text: str, handler) -> argparse.ArgumentParser:
    sub = commands.add_parser(
        name,
        help=help_text,
        description=help_text,
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    sub.set_defaults(handler=handler)
    return sub


def _add_demo_reference(commands) -> None:
    sub = _subparser(
        commands,
        "demo-reference",
        "Write the embedded default: a deterministic synthetic genome with promoters, "
        "repeats and chromatin features.",
        cmd_demo_reference,
    )
    sub.add_argument("outdir", type=Path, help="output folder")
    sub.add_argument("--seed", type=int, default=0, help="random seed (same seed: same files)")
    sub.add_argument("--size-mb", type=float, default=4.2, help="total genome size in Mb")


def _add_reference(commands) -> None:
    reference = commands.add_parser("reference", help="Download and read reference data sets.")
    actions = reference.add_subparsers(dest="action", metavar="ACTION", required=True)
    listing = _subparser(actions, "list", "List the data sets of a manifest.", cmd_reference_list)
    listing.add_argument("--manifest", type=Path, help="manifest YAML (default: GRCh37)")
    get = _subparser(
        actions,
        "download",
        "Download, verify (checksum), post-process and index data sets; resumes.",
        cmd_reference_download,
    )
    get.add_argument("names", nargs="+", metavar="NAME", help="data set names (see list)")
    get.add_argument("--dest", type=Path, default=Path("reference/data"), help="folder")
    get.add_argument("--manifest", type=Path, help="manifest YAML (default: GRCh37)")
    fetch = _subparser(
        actions, "fetch", "Print a region of a FASTA (1-based chr:start-end).", cmd_reference_fetch
    )
    fetch.add_argument("fasta", type=Path, help="FASTA (plain or bgzipped)")
    fetch.add_argument(
        "region",
        help="chrom:start-end, 1-based inclusive (the coordinates "
        "follow the last colon), or a contig's name for all of it",
    )
    fetch.add_argument("--strand", choices=["+", "-"], default="+", help="'-': reverse complement")
    fetch.add_argument("--pad", action="store_true", help="fill with N past the contig ends")


def _add_corpus(commands) -> None:
    corpus = commands.add_parser("corpus", help="Build pretraining documents and instances.")
    actions = corpus.add_subparsers(dest="action", metavar="ACTION", required=True)
    docs = _subparser(
        actions,
        "documents",
        "Cut a genome into documents of consecutive sentences (paper appendix F.1).",
        cmd_corpus_documents,
    )
    docs.add_argument("--reference", type=Path, nargs="+", required=True,
                      help="genome FASTA (several: one documents file, in file order)")  # fmt: skip
    docs.add_argument("--out", type=Path, required=True, help="documents text file")
    docs.add_argument(
        "--chromosomes", nargs="+", help="contigs to use (default: 1-22, X, Y; aliases ok)"
    )
    docs.add_argument("--passes", type=int, default=10, help="passes over each chromosome")
    docs.add_argument("--min-sentence-bp", type=int, default=500)
    docs.add_argument("--max-sentence-bp", type=int, default=1000)
    docs.add_argument(
        "--max-n-fraction", type=float, default=0.5, help="drop sentences with more N"
    )
    docs.add_argument("--seed", type=int, default=0)
    docs.add_argument("--threads", type=int, default=1, help="chromosomes in parallel")
    inst = _subparser(
        actions,
        "instances",
        "Write MLM+NSP pretraining instances as HDF5 shards.",
        cmd_corpus_instances,
    )
    inst.add_argument("--documents", type=Path, required=True, help="documents text file")
    inst.add_argument("--tokenizer", type=Path, required=True, help="tokenizer.model")
    inst.add_argument("--out", type=Path, required=True, help="output folder")
    inst.add_argument("--max-seq-length", type=int, default=4096)
    inst.add_argument("--max-predictions", type=int, help="default: 15%% of max-seq-length")
    inst.add_argument("--masked-lm-prob", type=float, default=0.15)
    inst.add_argument("--dupe-factor", type=int, default=1)
    inst.add_argument("--short-seq-prob", type=float, default=0.1)
    inst.add_argument("--documents-per-chunk", type=int, default=2000)
    inst.add_argument(
        "--dynamic-masking", action="store_true", help="store no masks; mask when loading"
    )
    inst.add_argument("--seed", type=int, default=0)
    inst.add_argument("--threads", type=int, default=1, help="chunks in parallel")


def _add_vocab(commands) -> None:
    vocab = commands.add_parser("vocab", help="Train the sentencepiece BPE vocabulary.")
    actions = vocab.add_subparsers(dest="action", metavar="ACTION", required=True)
    train = _subparser(
        actions,
        "train",
        "Train a BPE vocabulary on a seeded sample of document sentences.",
        cmd_vocab_train,
    )
    train.add_argument("--documents", type=Path, required=True, help="documents text file")
    train.add_argument("--out", type=Path, required=True, help="tokenizer.model to write")
    train.add_argument("--vocab-size", type=int, default=32_000)
    train.add_argument("--sample-sentences", type=int, default=1_000_000)
    train.add_argument("--heldout", type=Path, help="documents to report bp/token on")
    train.add_argument("--seed", type=int, default=0)
    train.add_argument("--threads", type=int, default=1)


def _add_pretrain(commands) -> None:
    sub = _subparser(
        commands,
        "pretrain",
        "Pretrain BigBird with MLM + NSP on instance shards; resumes from the latest "
        "checkpoint in the output folder. Multi-GPU: torchrun --nproc_per_node N "
        "-m genobird.cli pretrain ...",
        cmd_pretrain,
    )
    sub.add_argument("--config", type=Path, required=True, help="YAML: model, training, data")
    sub.add_argument("--output", type=Path, help="output folder (overrides the config)")
    data = sub.add_argument_group("data overrides")
    data.add_argument("--train", type=Path, help="training instances folder")
    data.add_argument("--eval", type=Path, help="held-out instances folder")
    data.add_argument("--tokenizer", type=Path, help="tokenizer.model or tokenizer.json")
    data.add_argument(
        "--init", type=Path, help="continue pretraining this model folder (`convert from-hf`)"
    )
    overrides = sub.add_argument_group("training overrides")
    overrides.add_argument("--max-steps", type=int)
    overrides.add_argument("--batch-size", type=int, help="per process")
    overrides.add_argument("--effective-batch-size", type=int)
    overrides.add_argument("--learning-rate", type=float)
    sub.add_argument(
        "--context-lengths", type=int, nargs="+", help="also run the context-length ablation"
    )
    sub.add_argument("--no-resume", action="store_true", help="ignore existing checkpoints")


def _add_dataset(commands) -> None:
    dataset = commands.add_parser("dataset", help="Build fine-tuning data sets (HDF5).")
    actions = dataset.add_subparsers(dest="action", metavar="ACTION", required=True)
    promoter = _subparser(
        actions,
        "promoter",
        "Promoter windows around EPDnew-style TSSs, with DeePromoter negatives.",
        cmd_dataset_promoter,
    )
    promoter.add_argument("--tss", type=Path, required=True, help="EPDnew-style TSS BED")
    promoter.add_argument("--reference", type=Path, required=True, help="genome FASTA")
    promoter.add_argument("--out", type=Path, required=True, help="HDF5 to write")
    promoter.add_argument("--upstream", type=int, default=5000)
    promoter.add_argument("--downstream", type=int, default=3000)
    promoter.add_argument("--liftover", type=Path, help="chain file hg38 -> hg19")
    promoter.add_argument("--hard-negatives", type=int, default=0, help="per positive")
    _add_training_negatives_argument(promoter)
    promoter.add_argument("--min-distance", type=int, default=10_000)
    promoter.add_argument("--off-end", choices=["skip", "pad"], default="skip")
    _add_split_arguments(promoter)
    sequences = _subparser(
        actions,
        "promoter-sequences",
        "Promoter sequences without coordinates (one per line, or FASTA; e.g. EPDnew's as "
        "DeePromoter publishes them), each with a DeePromoter negative; seeded split.",
        cmd_dataset_promoter_sequences,
    )
    sequences.add_argument("--positives", type=Path, required=True, help="text or FASTA")
    sequences.add_argument("--out", type=Path, required=True, help="HDF5 to write")
    _add_training_negatives_argument(sequences)
    _add_fraction_arguments(sequences)
    chromatin = _subparser(
        actions,
        "chromatin",
        "Genome bins labelled from peak BEDs (features.tsv: name, category, peak_file).",
        cmd_dataset_chromatin,
    )
    chromatin.add_argument("--features", type=Path, nargs="+", required=True,
                           help="feature table TSV(s): name, category, peak_file, and "
                           "optionally assayed (chromosomes, or a BED, where the feature was "
                           "measured; elsewhere its label is unknown)")  # fmt: skip
    chromatin.add_argument("--reference", type=Path, nargs="+", required=True,
                           help="genome FASTA, or several files read as one genome")  # fmt: skip
    chromatin.add_argument("--out", type=Path, required=True, help="HDF5 to write")
    chromatin.add_argument("--bin-size", type=int, default=200)
    chromatin.add_argument("--context", type=int, default=8000, help="window around each bin")
    chromatin.add_argument("--min-overlap", type=float, default=0.5, help="bin fraction")
    chromatin.add_argument("--negative-ratio", type=float, default=1.0)
    chromatin.add_argument("--max-bins", type=int, help="subsample the labelled bins")
    chromatin.add_argument("--assayed", nargs="+", metavar="TABLE=WHERE", default=[],
                           help="where the features of a table without an assayed column "
                           "were measured: chromosomes (comma-separated) or a BED of regions, "
                           "e.g. histone.tsv=chr19; elsewhere their labels are unknown, not "
                           "negative")  # fmt: skip
    chromatin.add_argument("--chromosomes", nargs="+")
    _add_split_arguments(chromatin, regions=True)
    deepsea = _subparser(
        actions,
        "deepsea",
        "DeepSEA's 919 chromatin features: from the .mat files (a wider context cut from "
        "the reference around the published 200 bp bins), or from a CSV of sequences and "
        "labels (the layout GENA-LM and others publish).",
        cmd_dataset_deepsea,
    )
    source = deepsea.add_mutually_exclusive_group(required=True)
    source.add_argument("--mat", type=Path, nargs="+",
                        help="train.mat, valid.mat and/or test.mat")  # fmt: skip
    source.add_argument("--csv", type=Path,
                        help="CSV(.gz): a sequence then 919 labels per row")  # fmt: skip
    mat = deepsea.add_argument_group(".mat route")
    mat.add_argument("--split", choices=["train", "valid", "test"], nargs="+",
                     help="the split of each --mat, in order")  # fmt: skip
    mat.add_argument("--coordinates", type=Path,
                     help="BED of the bins: one split's, or genome-wide")  # fmt: skip
    mat.add_argument("--reference", type=Path, help="hg19 FASTA")
    mat.add_argument("--context", type=int, default=8000, help="paper: 8 kb")
    table = deepsea.add_argument_group("CSV route")
    table.add_argument("--split-column", help="column of train/valid/test (needs a header)")
    table.add_argument("--valid", type=Path, help="CSV of the validation split")
    table.add_argument("--test", type=Path, help="CSV of the test split")
    table.add_argument("--valid-fraction", type=float, default=0.05)
    table.add_argument("--test-fraction", type=float, default=0.05)
    table.add_argument("--seed", type=int, default=0)
    deepsea.add_argument("--features", type=Path,
                         help="919-feature table TSV (default: placeholder names, DeepSEA's "
                         "categories)")  # fmt: skip
    deepsea.add_argument("--out", type=Path, required=True, help="HDF5 to write")
    classify = _subparser(
        actions,
        "classify",
        "Your own labelled sequences: CSV/TSV (sequence column + label columns) or FASTA "
        "(labels as key=value in the header).",
        cmd_dataset_classify,
    )
    classify.add_argument("--input", type=Path, required=True, help="CSV, TSV or FASTA")
    classify.add_argument(
        "--valid", type=Path, help="validation records in their own file (then --input is train)"
    )
    classify.add_argument(
        "--test", type=Path, help="test records in their own file (then --input is train)"
    )
    classify.add_argument("--out", type=Path, required=True, help="HDF5 to write")
    classify.add_argument("--label-columns", nargs="+", help="default: all but reserved")
    _add_fraction_arguments(classify)


def _add_training_negatives_argument(parser) -> None:
    parser.add_argument(
        "--training-negatives",
        type=int,
        default=1,
        help="DeePromoter negatives per positive in the training split (validation and "
        "test keep one each)",
    )


def _add_fraction_arguments(parser) -> None:
    """A seeded random split for records without one."""
    parser.add_argument("--valid-fraction", type=float, default=0.1, help="drawn to validation")
    parser.add_argument("--test-fraction", type=float, default=0.1, help="drawn to test")
    parser.add_argument("--seed", type=int, default=0, help="seed of the split")


def _add_split_arguments(parser, regions: bool = False) -> None:
    what = ("chromosomes or regions chrom:start-end (1-based); a window whose context "
            "reaches into a held-out region from outside it is left out") if regions else (
            "chromosomes")  # fmt: skip
    parser.add_argument("--valid-chromosomes", nargs="+", default=["chr7"],
                        help=f"validation {what}")  # fmt: skip
    parser.add_argument("--test-chromosomes", nargs="+", default=["chr8", "chr9"],
                        help=f"test {what}")  # fmt: skip
    parser.add_argument("--seed", type=int, default=0)


def _add_finetune(commands) -> None:
    sub = _subparser(
        commands,
        "finetune",
        "Fine-tune a pretrained model (or one from scratch) on a sequence data set; writes "
        "a model directory and a report (metrics.json, ROC/PR plots).",
        cmd_finetune,
    )
    sub.add_argument("task", choices=["promoter", "chromatin", "classify"])
    sub.add_argument("--data", type=Path, required=True, help="HDF5 from genobird dataset")
    sub.add_argument("--output", type=Path, required=True)
    source = sub.add_mutually_exclusive_group(required=True)
    source.add_argument("--pretrained", type=Path, help="pretraining model directory")
    source.add_argument(
        "--from-scratch",
        action="store_true",
        help="no pretrained weights: a fresh 2-layer, 128-wide model (needs --tokenizer)",
    )
    sub.add_argument("--tokenizer", type=Path, help="with --from-scratch")
    sub.add_argument("--shape-of", type=Path, metavar="MODEL_DIR",
                     help="with --from-scratch: the architecture of this model directory, "
                     "with fresh weights (default: 2 layers x 128)")  # fmt: skip
    sub.add_argument("--max-tokens", type=int,
                     help="longest input (default: what the data set's windows need, at most "
                     "the pretrained model's max_position); each batch is padded only to its "
                     "own longest window")  # fmt: skip
    sub.add_argument("--window-bp", type=int,
                     help="read each window as its central WINDOW_BP bases (default: whole): "
                     "one data set fine-tuned at several contexts around the same "
                     "bins")  # fmt: skip
    sub.add_argument("--pos-weight", type=float, help="default: 8 for chromatin, else 1")
    sub.add_argument("--rc-average", action=argparse.BooleanOptionalAction, default=None,
                     help="evaluate on both strands, and score so with the saved model "
                     "(default: all but promoter)")  # fmt: skip
    sub.add_argument(
        "--rc-augment",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="train on a random strand per window (default: all but promoter)",
    )
    sub.add_argument(
        "--pooling",
        choices=["cls", "mean", "hf", "centre"],
        default="cls",
        help="[CLS] pooler (the paper), the mean of the token states, HuggingFace "
        "BigBird's head on [CLS] (exportable with `convert to-hf`), or the mean of the "
        "states of the tokens over the window's central --centre-bp (a chromatin bin)",
    )
    sub.add_argument("--centre-bp", type=int, default=200,
                     help="with --pooling centre: the bases pooled, centred")  # fmt: skip
    sub.add_argument(
        "--dropout",
        type=float,
        help="dropout on hidden states while fine-tuning (default: the model's own)",
    )
    sub.add_argument(
        "--eval-every",
        type=int,
        default=0,
        help="steps between validation AUROC checks; the best weights are kept",
    )
    sub.add_argument(
        "--patience",
        type=int,
        default=0,
        help="stop after this many checks without improvement (0: never)",
    )
    sub.add_argument("--learning-rate", type=float, default=3e-4)
    sub.add_argument("--head-lr-scale", type=float,
                     help="the fresh head's learning rate as a multiple of --learning-rate "
                     "(default: 10 for chromatin, 1 otherwise)")  # fmt: skip
    sub.add_argument("--layer-decay", type=float, default=1.0,
                     help="layer-wise learning-rate decay: each encoder layer learns this "
                     "times as fast as the one above it, the embeddings slowest "
                     "(1: one rate)")  # fmt: skip
    sub.add_argument("--ema-decay", type=float, default=0.0,
                     help="evaluate, select and keep an exponential moving average of the "
                     "weights with this decay per step, e.g. 0.999 (0: the weights as "
                     "trained)")  # fmt: skip
    sub.add_argument("--bpe-dropout", type=float, default=0.0,
                     help="cut each training window into pieces with BPE-dropout, each "
                     "merge skipped with this probability, e.g. 0.1 (0: the tokenizer's "
                     "own pieces); validation checks read the tokenizer's own")  # fmt: skip
    sub.add_argument("--segmentations", type=int, default=0,
                     help="average the test and validation predictions (and the saved "
                     "model's scores) over this many BPE-dropout cuts of each window per "
                     "strand, e.g. 16; needs --bpe-dropout (0: the tokenizer's own "
                     "cut)")  # fmt: skip
    sub.add_argument("--warmup-steps", type=int, default=20)
    sub.add_argument("--max-steps", type=int, default=300)
    sub.add_argument("--batch-size", type=int, default=8)
    sub.add_argument("--effective-batch-size", type=int)
    sub.add_argument("--checkpoint-every", type=int, default=1000)
    sub.add_argument("--seed", type=int, default=0)


def _add_score(commands) -> None:
    sub = _subparser(
        commands,
        "score",
        "Score FASTA records, BED regions or VCF variants with a fine-tuned model; "
        "unscorable records go to OUT.rejected.tsv. Exit 1 when nothing was scored, or "
        "with --strict when anything was rejected.",
        cmd_score,
    )
    sub.add_argument("--model", type=Path, required=True, help="fine-tuned model directory")
    inputs = sub.add_mutually_exclusive_group(required=True)
    inputs.add_argument("--fasta", type=Path, help="sequences to score")
    inputs.add_argument("--bed", type=Path, help="regions (centred, resized to the window)")
    inputs.add_argument("--vcf", type=Path, help="variants (ref and alt windows)")
    sub.add_argument(
        "--reference",
        type=Path,
        nargs="+",
        help="genome FASTA, or several read as one (for --bed and --vcf)",
    )
    sub.add_argument(
        "--chromosomes", nargs="+", help="only the BED regions or variants on these chromosomes"
    )
    sub.add_argument("--out", type=Path, required=True, help="output file")
    sub.add_argument(
        "--format",
        choices=["tsv", "h5"],
        help="tsv or h5 (default: from --out's name: .h5/.hdf5 is HDF5, else TSV)",
    )
    sub.add_argument("--features", nargs="+", help="only these feature columns")
    sub.add_argument("--tiles", action="store_true", help="score long FASTA records in tiles")
    _add_predictor_options(sub)
    sub.add_argument("--strict", action="store_true", help="exit 1 if any record is rejected")


def _add_likelihood(commands) -> None:
    sub = _subparser(
        commands,
        "likelihood",
        "Score FASTA records or BED regions zero-shot with a pretrained language model: "
        "the bits it needs to predict each sequence's pieces from their context (every "
        "piece masked once), in all and per bp. Exit 1 when nothing was scored.",
        cmd_likelihood,
    )
    sub.add_argument("--model", type=Path, required=True,
                     help="pretraining model directory (e.g. RESULTS/pretrain/model)")  # fmt: skip
    inputs = sub.add_mutually_exclusive_group(required=True)
    inputs.add_argument("--fasta", type=Path, help="sequences to score, each whole")
    inputs.add_argument("--bed", type=Path, help="regions to score as they are")
    sub.add_argument(
        "--reference", type=Path, nargs="+", help="genome FASTA, or several read as one (for --bed)"
    )
    sub.add_argument("--chromosomes", nargs="+", help="only the BED regions on these chromosomes")
    sub.add_argument("--out", type=Path, required=True, help="output file")
    sub.add_argument(
        "--format",
        choices=["tsv", "h5"],
        help="tsv or h5 (default: from --out's name: .h5/.hdf5 is HDF5, else TSV)",
    )
    sub.add_argument("--stride", type=int,
                     help="pieces this far apart are masked together, in as many passes "
                     "(default 7: as pretraining scores its held-out bits per bp; one "
                     "larger than a sequence's piece count masks one piece at a time)")  # fmt: skip
    sub.add_argument("--both-strands", action=argparse.BooleanOptionalAction, default=True,
                     help="average the scores of both strands (--no-both-strands: the "
                     "given strand; BED regions on their own)")  # fmt: skip
    sub.add_argument("--batch-size", type=int, default=32)
    sub.add_argument("--device", default="auto", help="auto, cpu, cuda, cuda:1 ...")
    sub.add_argument("--strict", action="store_true", help="exit 1 if any record is rejected")


def _add_zero_shot(commands) -> None:
    sub = _subparser(
        commands,
        "zero-shot",
        "Classify a single-feature data set by likelihood alone, with no fine-tuning: "
        "each window's bits per bp under a pretraining model (--model) or, the baseline, "
        "under order-k Markov models of the given DNA (--markov; the order chosen on the "
        "validation split), turned into a probability by a one-feature logistic fit on "
        "the training split; writes OUTPUT/report as finetune does.",
        cmd_zero_shot,
    )
    sub.add_argument("--data", type=Path, required=True, help="HDF5 from genobird dataset")
    sub.add_argument("--output", type=Path, required=True)
    scorer = sub.add_mutually_exclusive_group(required=True)
    scorer.add_argument("--model", type=Path, help="pretraining model directory")
    scorer.add_argument("--markov", type=Path,
                        help="FASTA or genobird documents to fit the Markov models on "
                        "(e.g. the pretraining corpus's train.txt)")  # fmt: skip
    sub.add_argument("--orders", default="0-10", help="Markov orders to choose from")
    sub.add_argument("--stride", type=int,
                     help="with --model: pieces this far apart masked together (default 7, "
                     "as genobird likelihood)")  # fmt: skip
    sub.add_argument("--device", default="auto", help="auto, cpu, cuda, cuda:1 ...")


def _add_predictor_options(sub) -> None:
    """How a fine-tuned model runs: the options of `load_predictor`."""
    sub.add_argument("--rc-average", action=argparse.BooleanOptionalAction, default=None,
                     help="average both strands (default: as the model was evaluated at "
                     "fine-tuning; promoter models: no)")  # fmt: skip
    sub.add_argument("--segmentations", type=int,
                     help="average this many BPE-dropout cuts of each window per strand "
                     "(default: as the model was evaluated at fine-tuning; 0: the "
                     "tokenizer's own cut)")  # fmt: skip
    sub.add_argument("--batch-size", type=int, default=16)
    sub.add_argument("--device", default="auto", help="auto, cpu, cuda, cuda:1 ...")
    sub.add_argument("--precision", choices=("auto", "bf16", "no"), default="auto",
                     help="auto: bf16 autocast on CUDA, fp32 on CPU")  # fmt: skip
    sub.add_argument("--workers", type=int,
                     help="processes fetching and tokenising windows (default: up to 4 on "
                     "CUDA, none on CPU)")  # fmt: skip


def _load_predictor(args: argparse.Namespace):
    from genobird.predict import load_predictor

    return load_predictor(
        args.model, device=args.device, batch_size=args.batch_size, rc_average=args.rc_average,
        segmentations=args.segmentations, precision=args.precision, num_workers=args.workers,
    )  # fmt: skip


def _add_ism(commands) -> None:
    sub = _subparser(
        commands,
        "ism",
        "In-silico mutagenesis: every base of the central WINDOW bp changed to each other "
        "base, and the change of each feature's score (HDF5), with an optional heatmap.",
        cmd_ism,
    )
    sub.add_argument("--model", type=Path, required=True, help="fine-tuned model directory")
    inputs = sub.add_mutually_exclusive_group(required=True)
    inputs.add_argument("--fasta", type=Path, help="sequences (fitted to the model's window)")
    inputs.add_argument("--bed", type=Path, help="regions (centred, + strand)")
    sub.add_argument(
        "--reference", type=Path, nargs="+", help="genome FASTA, or several read as one (for --bed)"
    )
    sub.add_argument("--window", type=int, required=True, help="bp mutated, centred")
    sub.add_argument("--out", type=Path, required=True, help="HDF5 to write")
    sub.add_argument("--score", choices=["diff", "log_odds"], default="diff",
                     help="alt - ref probability, or the log-odds change")  # fmt: skip
    sub.add_argument("--features", nargs="+", help="only these features (default: all)")
    sub.add_argument("--plot", type=Path, help="PNG heatmap of the first record")
    sub.add_argument("--feature", help="the feature to plot (default: the first)")
    _add_predictor_options(sub)


def _add_baseline(commands) -> None:
    baseline = commands.add_parser(
        "baseline", help="Simple models on the same data, to judge genobird's figures by."
    )
    kinds = baseline.add_subparsers(dest="kind", metavar="MODEL", required=True)
    markov = _subparser(
        kinds,
        "markov",
        "Order-k Markov model of DNA (k and add-alpha smoothing chosen on the last part of "
        "each training sequence): bits per base on held-out DNA, beside genobird's BPC.",
        cmd_baseline_markov,
    )
    markov.add_argument("--train", type=Path, nargs="+", required=True,
                        help="documents or FASTA files")  # fmt: skip
    markov.add_argument("--heldout", type=Path, nargs="+", required=True,
                        help="documents or FASTA files")  # fmt: skip
    markov.add_argument("--orders", default="0-10", help="orders to choose from, e.g. 0-10")
    markov.add_argument("--valid-fraction", type=float, default=0.1,
                        help="tail of each training sequence that chooses k and alpha")  # fmt: skip
    markov.add_argument("--forward-only", action="store_true",
                        help="count the given strand only (default: both strands)")  # fmt: skip
    markov.add_argument("--out", type=Path, help="JSON report")
    for kind, text in (
        ("kmer-lr", "k-mer (3-6) counts and logistic regression, C chosen on the validation "
                    "split"),
        ("cnn", "a 3-layer CNN on one-hot DNA, early stopping on the validation split"),
        ("deepsea-cnn", "DeepSEA's CNN (three 8 bp convolutions, max-pooling, a fully "
                        "connected layer), scaled by --channels, early stopping on the "
                        "validation split"),
    ):  # fmt: skip
        sub = _subparser(
            kinds, kind, f"{text}; same splits and metrics.json as genobird finetune.",
            cmd_baseline_classifier,
        )  # fmt: skip
        sub.add_argument("--data", type=Path, required=True, help="HDF5 from genobird dataset")
        sub.add_argument("--output", type=Path, required=True, help="writes OUTPUT/report")
        sub.add_argument("--seed", type=int, default=0)
        sub.add_argument("--window-bp", type=int,
                         help="read each window as its central WINDOW_BP bases (default: "
                         "whole)")  # fmt: skip
        if kind != "kmer-lr":
            sub.add_argument("--rc-average", action=argparse.BooleanOptionalAction,
                             default=None, help="average both strands (default: all tasks "
                             "but promoter)")  # fmt: skip
            sub.add_argument("--max-minutes", type=float, default=10.0, help="training budget")
            sub.add_argument("--channels", type=int,
                             help="filters of the first convolution (default 128)")  # fmt: skip

    compare = _subparser(
        kinds,
        "compare",
        "Two predictors (fine-tuned or baseline runs) on the same test split, paired: each "
        "metric's difference A - B with a 95% bootstrap interval over the test sequences.",
        cmd_baseline_compare,
    )
    compare.add_argument("runs", type=Path, nargs="+", metavar="RUN",
                         help="output folders of genobird finetune or genobird baseline: "
                         "A, then B; or A's runs (seeds of one recipe, compared as their "
                         "mean) when --against is given")  # fmt: skip
    compare.add_argument("--against", type=Path, nargs="+", metavar="RUN",
                         help="B's runs (one, or seeds of one recipe, compared as their "
                         "mean)")  # fmt: skip
    compare.add_argument("--resamples", type=int, default=2000,
                         help="resamples of the test sequences (at least 100)")  # fmt: skip
    compare.add_argument("--seed", type=int, default=0, help="seed of the resampling")
    compare.add_argument("--min-positives", type=int, default=1,
                         help="runs of several features (chromatin): count the features with "
                         "at least this many test positives, e.g. 20")  # fmt: skip
    compare.add_argument("--out", type=Path, help="JSON report")


def _add_report(commands) -> None:
    sub = _subparser(
        commands,
        "report",
        "Write the HTML report of a pipeline results folder: corpus and vocabulary, "
        "pretraining curves, MLM accuracy against context length, fine-tuning metrics "
        "with ROC/PR plots, links to the score tables.",
        cmd_report,
    )
    sub.add_argument("--results", type=Path, required=True, help="the pipeline's results folder")
    sub.add_argument("--out", type=Path, help="HTML file (default: RESULTS/report.html)")
    sub.add_argument("--context-lengths", type=int, nargs="+", default=[128, 256, 512, 1024],
                     help="tokens at which to measure the pretrained MLM accuracy")  # fmt: skip
    sub.add_argument("--context-windows", type=int, default=4000,
                     help="held-out windows scored at each context length (fewer: faster, "
                          "wider intervals)")  # fmt: skip


def _add_layout(commands) -> None:
    sub = _subparser(
        commands,
        "layout",
        "Describe an attention sparsity pattern: density, blocks per row, and whether it "
        "satisfies Yun et al.'s Assumption 1 and contains a star graph (BigBird Theorem 1).",
        cmd_layout,
    )
    sub.add_argument("pattern", choices=LAYOUT_PATTERNS)
    sub.add_argument("--seq-len", type=int, default=4096, help="tokens")
    sub.add_argument("--block-size", type=int, default=64)
    sub.add_argument("--heads", type=int, default=1)
    shape = sub.add_argument_group("pattern parameters")
    shape.add_argument("--global-blocks", type=int, default=2, help="bigbird")
    shape.add_argument("--global-tokens", type=int, default=64, help="etc")
    shape.add_argument("--window-blocks", type=int, default=3, help="bigbird, etc, window-global")
    shape.add_argument("--random-blocks", type=int, default=3, help="bigbird, etc, random")
    shape.add_argument("--window", type=int, default=1, help="strided: neighbours each side")
    shape.add_argument("--stride", type=int, default=4, help="strided stride; fixed group size")
    shape.add_argument("--seed", type=int, default=0)
    shape.add_argument("--layer", type=int, default=0)


# =========================================================================== entry point
def _configure_logging(args: argparse.Namespace) -> None:
    level = logging.DEBUG if args.verbose else logging.WARNING if args.quiet else logging.INFO
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")


# Options of the genobird command itself, accepted after the subcommand too: a user who
# sees an error adds --debug at the end of the line they ran.
ANYWHERE = ("--debug", "--quiet", "--verbose")


def hoisted(argv: list[str]) -> list[str]:
    """argv with the options of ANYWHERE moved in front of the subcommand (up to a
    `--`, after which arguments are left alone)."""
    end = argv.index("--") if "--" in argv else len(argv)
    flags = [arg for arg in argv[:end] if arg in ANYWHERE]
    rest = [arg for arg in argv[:end] if arg not in ANYWHERE]
    return flags + rest + argv[end:]


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(hoisted(list(sys.argv[1:] if argv is None else argv)))
    _configure_logging(args)
    try:
        return args.handler(args)
    except GenobirdError as exc:
        _fail(f"error: {exc}", args)
    except KeyboardInterrupt:
        print("genobird: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # the reader left (`| head`): stop quietly, as Unix tools do
        _discard_stdout()
        return EXIT_FAILURE
    except OSError as exc:  # files the user named: missing, unreadable, disk full
        name = f" {exc.filename}" if getattr(exc, "filename", None) else ""
        _fail(f"error:{name} {exc.strerror or exc}", args)
    except Exception as exc:  # a bug: still one line unless --debug
        _fail(
            f"internal error: {type(exc).__name__}: {exc} "
            "(rerun with --debug for the traceback and report it)",
            args,
        )
    return EXIT_FAILURE


def _discard_stdout() -> None:
    """Point stdout at /dev/null, so that Python's flush at exit finds no closed pipe."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())


def _fail(message: str, args: argparse.Namespace) -> None:
    if args.debug:
        raise
    print(f"genobird: {message}", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
