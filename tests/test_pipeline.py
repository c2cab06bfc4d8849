"""The Snakemake workflow: config validation and the job graph (dry runs)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import h5py
import numpy as np
import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.pipeline  # every test here runs Snakemake


def snakemake(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile"), *args]
    return subprocess.run(command, capture_output=True, text=True, cwd=cwd)


def pipeline(name: str) -> dict:
    return yaml.safe_load((REPO / "pipelines" / f"{name}.yaml").read_text())


def write_config(tmp_path: Path, config: dict, name: str = "config.yaml") -> str:
    """The config with its outputs under tmp_path; returns its path."""
    config["results"] = str(tmp_path / "results")
    if config["reference"]["source"] == "download":
        config["reference"]["dest"] = str(tmp_path / "downloads")
    (tmp_path / name).write_text(yaml.safe_dump(config))
    return str(tmp_path / name)


def planned_jobs(plan: str) -> int:
    """The job count of a dry run's summary table."""
    return int(re.search(r"^total\s+(\d+)$", plan, re.MULTILINE).group(1))


def test_demo_dry_run_plans_every_stage(tmp_path):
    done = snakemake("-n", "--cores", "2", "--configfile", write_config(tmp_path, pipeline("demo")))
    assert done.returncode == 0, done.stderr[-2000:]
    for rule in (
        "demo_reference",
        "documents",
        "vocabulary",
        "instances",
        "pretrain",
        "promoter_finetune",
        "chromatin_finetune",
        "score",
        "evaluate_corpus",
        "evaluate_pretrained",
        "compare_runs",
        "report",
    ):
        assert rule in done.stdout
    # 6 score jobs (2 models x 3 inputs); Markov + 2 baselines x 2 data sets; the
    # corpus's statistics, the pretrained model's evaluation and the runs' comparisons,
    # then the report
    assert planned_jobs(done.stdout) == 27


def test_a_demo_asking_for_motifs_holds_them_against_the_planted_ones(tmp_path):
    """promoter.motifs plans genobird motifs on the fine-tuned promoter model, the demo
    reference's planted promoter motifs given as the known ones, before the report."""
    config = pipeline("demo")
    config["promoter"]["motifs"] = {"windows": 40, "span": [1960, 2040]}
    done = snakemake("-n", "-p", "--cores", "2", "--configfile", write_config(tmp_path, config))
    assert done.returncode == 0, done.stderr[-2000:]
    plan = done.stdout
    assert "rule promoter_motifs:" in plan
    assert "--split test --label 1 --limit 40 --span 1960-2040" in plan
    assert "reference/promoter_motifs.meme" in plan and "promoter/motifs" in plan
    assert planned_jobs(plan) == 28


def test_grch37_dry_run_offline_plans_downloads_and_the_papers_settings(tmp_path):
    path = write_config(tmp_path, pipeline("grch37"))
    done = snakemake("-n", "-p", "--cores", "16", "--configfile", path)
    assert done.returncode == 0, done.stderr[-2000:]
    plan = done.stdout
    for key, entry in (
        ("genome", "hg19"),
        ("promoters", "epdnew-hs006-hg19"),
        ("deepsea_bundle", "deepsea-bundle"),
    ):
        assert f"rule download_{key}:" in plan
        assert f"genobird reference download {entry} --manifest reference/grch37.yaml" in plan
    downloads = tmp_path / "downloads"
    assert f"--reference {downloads}/hg19.fa.bgz.gz" in plan  # the bgzipped, indexed genome
    assert f"--tss {downloads}/Hs_EPDnew_006_hg19.bed" in plan
    assert "--upstream-bp 5000 --downstream-bp 3000" in plan
    assert "--passes 10" in plan and "--vocab-size 32000" in plan
    assert "--max-tokens 4096" in plan
    assert "torchrun --standalone --nproc_per_node 8 -m genobird.cli -q pretrain" in plan
    assert "dataset deepsea --mat" in plan and "--split train valid test" in plan
    assert "--context-bp 8000" in plan
    # the motifs the promoter model reads: the test positives' bases around the TSS
    assert "--split test --label 1 --limit 1000 --span 4900-5100" in plan
    assert "--known" not in plan  # a real genome has no planted motifs
    assert planned_jobs(plan) == 22  # 4 downloads; BED scoring only; 3 evaluations; motifs


def _at(config, data: Path) -> dict:
    """The config with its ../shared/data paths pointing at `data`."""
    return yaml.safe_load(yaml.safe_dump(config).replace("../shared/data", str(data)))


def test_human_mini_dry_run_plans_real_dna_tasks_and_baselines(tmp_path, shared_data):
    config = _at(pipeline("human-mini"), shared_data)
    done = snakemake("-n", "-p", "--cores", "2", "--configfile", write_config(tmp_path, config))
    assert done.returncode == 0, done.stderr[-2000:]
    plan = done.stdout
    genome = f"{shared_data}/genome/"
    assert (
        f"--reference {genome}grch38_chr20_chr21_0-10Mb.fa.gz "
        f"{genome}hg19_chr19_0-3119000_softmasked.fa {genome}grch37_22_20-21Mb.fa"
    ) in plan
    assert "--chromosomes 22:20000001-21000000 --passes 1" in plan  # the held-out piece
    assert "dataset promoter-sequences --positives" in plan
    assert f"--valid {shared_data}/tasks/gue_human_tf/0/dev.csv" in plan
    # GUE TF 0's recipe, the one that takes the 2-core model past the k-mer LR
    gue_recipe = "--max-steps 3000 --learning-rate 0.0003 --batch-size 32 --eval-every 500"
    # pinned as its figures were made: no early stop, no base readers (classify's defaults)
    pinned = "--patience 0 --pooling mean --base-cnn-channels 0 --base-kmers 0 --dropout 0.3"
    assert f"{gue_recipe} {pinned} --rc-augment --rc-average" in plan
    assert "genobird -q baseline markov" in plan and "--orders 0-10" in plan
    for rule in ("sequence_task_finetune", "classifier_baseline", "markov_baseline"):
        assert f"rule {rule}:" in plan
    # TATA is also classified by likelihood alone, beside Markov models of the same DNA
    results = config["results"]
    zero_shot = f"zero-shot --data {results}/tasks/epdnew_tata/data.h5 --out {results}/tasks"
    assert f"{zero_shot}/epdnew_tata/zero-shot/genobird --model {results}/pretrain/model" in plan
    assert f"{zero_shot}/epdnew_tata/zero-shot/markov --markov {results}/corpus/train.txt" in plan
    assert plan.count("genobird -q zero-shot") == 2  # not GUE TF 0
    assert "promoter_finetune" not in plan and "rule score:" not in plan  # no TSS BED given
    assert planned_jobs(plan) == 22


def test_human_gpu_overlay_pretrains_on_one_gpu_and_fine_tunes_every_tf_task(tmp_path, shared_data):
    """pipelines/human-gpu.yaml is given after human-mini.yaml; Snakemake merges the two."""
    base = write_config(tmp_path, _at(pipeline("human-mini"), shared_data))
    overlay = {**_at(pipeline("human-gpu"), shared_data), "results": str(tmp_path / "results")}
    (tmp_path / "gpu.yaml").write_text(yaml.safe_dump(overlay))
    done = snakemake("-n", "-p", "--cores", "16", "--configfile", base, str(tmp_path / "gpu.yaml"))
    assert done.returncode == 0, done.stderr[-2000:]
    plan = done.stdout
    assert (
        "torchrun --standalone --nproc_per_node 1 -m genobird.cli -q pretrain "
        "--config pipelines/pretrain/human-gpu.yaml"
    ) in plan
    assert "--max-steps 6000" in plan
    for task in range(5):
        assert f"--valid {shared_data}/tasks/gue_human_tf/{task}/dev.csv" in plan
    recipe = "--max-steps 4000 --learning-rate 0.0001 --batch-size 32 --eval-every 500"
    assert plan.count(recipe) == 5
    assert "dataset promoter-sequences --positives" in plan  # human-mini's TATA task stays
    # each added task: data, fine-tuning, 2 baselines; human-mini's TATA adds 2 zero-shot jobs
    assert planned_jobs(plan) == 22 + 4 * 4


def test_human_mini_gue_overlay_fine_tunes_every_tf_task_with_bpe_dropout(tmp_path, shared_data):
    """pipelines/human-mini-gue.yaml adds GUE TF 1-4 to human-mini and refits TF 0, each
    with two seeds."""
    base = write_config(tmp_path, _at(pipeline("human-mini"), shared_data))
    overlay = tmp_path / "gue.yaml"
    overlay.write_text(yaml.safe_dump(_at(pipeline("human-mini-gue"), shared_data)))
    done = snakemake("-n", "-p", "--cores", "2", "--configfile", base, str(overlay))
    assert done.returncode == 0, done.stderr[-2000:]
    plan = done.stdout
    for task in range(5):
        assert f"--valid {shared_data}/tasks/gue_human_tf/{task}/dev.csv" in plan
    recipe = "--max-steps 6000 --learning-rate 0.0003 --batch-size 32 --eval-every 500"
    finetunes = [line for line in plan.splitlines() if "finetune classify" in line]
    assert len(finetunes) == 5 * 2  # two seeds each
    assert all(
        recipe in line and "--bpe-dropout 0.1 --segmentations 16" in line for line in finetunes
    )
    assert sum("--seed 1 >" in line for line in finetunes) == 5
    tata = [line for line in plan.splitlines() if "--max-steps 400" in line]
    assert len(tata) == 1 and "--bpe-dropout" not in tata[0]  # human-mini's TATA stays
    # each added task: data, 2 fine-tuning seeds, 2 baselines; TF 0 a second seed; human-mini's
    # TATA adds 2 zero-shot jobs
    assert planned_jobs(plan) == 22 + 4 * 5 + 1


def test_own_fasta_refuses_coordinates_with_several_files(tmp_path):
    config = pipeline("human-mini")
    config["reference"]["tss"] = "tss.bed"
    config["promoter"] = pipeline("ci")["promoter"]
    config["split"] = pipeline("ci")["split"]
    done = snakemake("-n", "--cores", "1", "--configfile", write_config(tmp_path, config))
    assert done.returncode != 0
    assert "give reference.fasta as a single FASTA file" in done.stdout + done.stderr
    del config["promoter"]
    done = snakemake("-n", "--cores", "1", "--configfile", write_config(tmp_path, config))
    assert done.returncode != 0 and "'promoter' is a required property" in done.stdout + done.stderr


@pytest.mark.slow
def test_own_fasta_pipeline_with_sequence_task_and_baselines_runs_end_to_end(tmp_path):
    """reference.source fasta: two FASTA files (the corpus reads both), a sequence task
    from CSVs (with BPE-dropout and segmentation averaging), the Markov and k-mer
    baselines, the report comparing them."""
    from genobird.genome import read_fasta
    from genobird.genome.demo import DemoSpec, generate_demo_reference

    generate_demo_reference(tmp_path / "demo", DemoSpec(seed=2, size_mb=1.0))
    records = list(read_fasta(tmp_path / "demo" / "genome.fa"))
    for index, part in enumerate((records[:2], records[2:])):
        text = "".join(f">{r.name}\n{r.sequence}\n" for r in part)
        (tmp_path / f"part{index}.fa").write_text(text)
    rng = np.random.default_rng(0)
    for split, count in (("train", 300), ("dev", 60), ("test", 60)):
        rows = ["sequence,label"]
        for _ in range(count):
            label = int(rng.integers(0, 2))
            bases = "".join(rng.choice(list("ACGT"), size=80))
            rows.append(
                f"{bases[:30] + ('TGACGTCA' if label else 'ACGTACGT') + bases[38:]},{label}"
            )
        (tmp_path / f"{split}.csv").write_text("\n".join(rows) + "\n")
    config = pipeline("ci")
    config["reference"] = {
        "source": "fasta",
        "fasta": [str(tmp_path / "part0.fa"), str(tmp_path / "part1.fa")],
    }
    for key in ("promoter", "chromatin", "split"):
        del config[key]
    config["corpus"].update(train_chromosomes=["chr1", "chr3"], heldout_chromosomes=["chr2"])
    config["sequence_tasks"] = {
        "motif": {
            "input": str(tmp_path / "train.csv"),
            "valid": str(tmp_path / "dev.csv"),
            "test": str(tmp_path / "test.csv"),
            "max_steps": 10,
            "learning_rate": 1e-3,
            "batch_size": 8,
            "bpe_dropout": 0.1,
            "segmentations": 2,
        }
    }
    config["baselines"] = {"markov_orders": "0-4", "classifiers": ["kmer-lr"]}
    done = snakemake("--cores", "2", "--configfile", write_config(tmp_path, config))
    assert done.returncode == 0, done.stderr[-3000:]
    results = tmp_path / "results"
    index = json.loads((results / "corpus" / "train.txt.index.json").read_text())
    assert index["chromosomes"] == ["chr1", "chr3"]  # one from each file
    markov = json.loads((results / "baselines" / "markov.json").read_text())
    assert 1.0 < markov["bits_per_bp"] < 2.0
    kmer = json.loads((results / "tasks/motif/baselines/kmer-lr/report/metrics.json").read_text())
    assert kmer["auroc"] > 0.9
    tuned = json.loads((results / "tasks/motif/report/metrics.json").read_text())
    assert (tuned["bpe_dropout"], tuned["segmentations"]) == (0.1, 2)  # evaluated on 2 cuts
    task_info = json.loads((results / "tasks/motif/model/config.json").read_text())["task_info"]
    assert task_info["segmentations"] == 2  # and scores so
    page = (results / "report.html").read_text()
    assert "Bits per base on the held-out chromosomes" in page
    assert f"order-{markov['order']} Markov" in page
    assert "Fine-tuning: motif" in page and "k-mer (3-6) logistic regression" in page


@pytest.mark.parametrize("name", ["demo", "grch37", "human-mini"])
def test_lint_reports_nothing(tmp_path, name):
    done = snakemake("--lint", "--configfile", write_config(tmp_path, pipeline(name)))
    assert done.returncode == 0 and "Congratulations" in done.stdout + done.stderr, done.stdout


def test_optional_finetune_and_report_settings_reach_their_commands(tmp_path):
    config = pipeline("demo")
    config["promoter"].update(
        dropout=0.2, eval_every=50, patience=2, pos_weight=4, training_negatives=4, rc_augment=True
    )
    config["chromatin"].update(
        pooling="mean", rc_augment=False, layer_decay=0.8, bpe_dropout=0.1, segmentations=4
    )
    config["report"] = {"context_lengths": [16, 32], "context_windows": 300}
    done = snakemake("-n", "-p", "--cores", "2", "--configfile", write_config(tmp_path, config))
    assert done.returncode == 0, done.stderr[-2000:]
    promoter = next(line for line in done.stdout.splitlines() if "finetune promoter" in line)
    chromatin = next(line for line in done.stdout.splitlines() if "finetune chromatin" in line)
    for option in ("--dropout 0.2", "--eval-every 50", "--patience 2", "--pos-weight 4"):
        assert option in promoter and option not in chromatin
    assert "--pooling mean" in chromatin and "--pooling" not in promoter
    assert "--layer-decay 0.8" in chromatin and "--layer-decay" not in promoter
    assert "--bpe-dropout 0.1" in chromatin and "--bpe-dropout" not in promoter
    assert "--segmentations 4" in chromatin and "--segmentations" not in promoter
    assert "--rc-augment --rc-average" in promoter
    assert "--no-rc-augment --no-rc-average" in chromatin
    data = next(line for line in done.stdout.splitlines() if "dataset promoter " in line)
    assert "--training-negatives 4" in data
    report = next(line for line in done.stdout.splitlines() if "genobird -q report" in line)
    assert "--context-tokens 16 32 --context-windows 300" in report
    # the pretrained model is evaluated by its own rule, which the report only draws
    evaluate = next(
        line for line in done.stdout.splitlines() if "genobird -q evaluate pretrained" in line
    )
    assert "--context-tokens 16 32 --context-windows 300" in evaluate
    assert any("genobird -q evaluate runs" in line for line in done.stdout.splitlines())
    config["promoter"]["dropout"] = 1.0
    done = snakemake("-n", "--cores", "1", "--configfile", write_config(tmp_path, config))
    assert done.returncode != 0 and "['promoter']['dropout']" in done.stdout + done.stderr
    config["promoter"].update(dropout=0.2, segmentations=4)  # sampled cuts need BPE-dropout
    done = snakemake("-n", "--cores", "1", "--configfile", write_config(tmp_path, config))
    assert done.returncode != 0
    assert "'bpe_dropout' is a dependency of 'segmentations'" in done.stdout + done.stderr


def test_promoter_sequence_task_takes_training_negatives_and_only_it(tmp_path):
    config = pipeline("demo")
    positives = tmp_path / "promoters.txt"
    positives.write_text("ACGT" * 75 + "\n")
    task = {
        "promoter_sequences": str(positives),
        "max_steps": 10,
        "learning_rate": 1e-4,
        "batch_size": 4,
        "training_negatives": 3,
        "pos_weight": 3,
    }
    config["sequence_tasks"] = {"tata": task}
    done = snakemake("-n", "-p", "--cores", "2", "--configfile", write_config(tmp_path, config))
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.splitlines()
    data = next(line for line in lines if "dataset promoter-sequences" in line)
    assert "--training-negatives 3" in data
    finetune = next(line for line in lines if "finetune promoter" in line and "tasks/tata" in line)
    assert "--pos-weight 3" in finetune
    config["sequence_tasks"] = {"gue": {**task, "input": str(positives)}}
    del config["sequence_tasks"]["gue"]["promoter_sequences"]
    done = snakemake("-n", "--cores", "1", "--configfile", write_config(tmp_path, config))
    output = done.stdout + done.stderr
    assert done.returncode != 0 and "'promoter_sequences' is a dependency of" in output


def test_sequence_task_seeds_fine_tune_apart_and_reach_the_report(tmp_path):
    """`seeds: 3`: seed 0 in the task's folder as before, seeds 1 and 2 under seeds/N with
    the same recipe, and the report waits for all three."""
    config = pipeline("demo")
    positives = tmp_path / "promoters.txt"
    positives.write_text("ACGT" * 75 + "\n")
    task = {
        "promoter_sequences": str(positives),
        "max_steps": 10,
        "learning_rate": 1e-4,
        "batch_size": 4,
        "seeds": 3,
    }
    config["sequence_tasks"] = {"tata": task}
    done = snakemake("-n", "-p", "--cores", "2", "--configfile", write_config(tmp_path, config))
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.splitlines()
    runs = [line for line in lines if "finetune promoter" in line and "tasks/tata" in line]
    assert len(runs) == 3
    results = config["results"]
    seed_0 = next(line for line in runs if f"--out {results}/tasks/tata " in line)
    assert "--seed" not in seed_0  # finetune's default, 0: the task's folder as before
    for seed in (1, 2):
        run = next(line for line in runs if f"--out {results}/tasks/tata/seeds/{seed} " in line)
        same_recipe = seed_0.replace("tasks/tata ", f"tasks/tata/seeds/{seed} ")
        log = f"{results}/logs/task_finetune_tata"
        assert run == same_recipe.replace(f" > {log}.log", f" --seed {seed} > {log}_seed{seed}.log")
    report = lines.index(next(line for line in lines if line.startswith("rule report:")))
    assert f"{results}/tasks/tata/seeds/2/report/metrics.json" in lines[report + 1]  # its input
    task["seeds"] = 0
    done = snakemake("-n", "--cores", "1", "--configfile", write_config(tmp_path, config))
    assert done.returncode != 0 and "['seeds']" in done.stdout + done.stderr


def test_unknown_config_key_fails_before_any_rule_naming_it(tmp_path):
    config = pipeline("demo")
    config["corpus"]["pases"] = 2
    done = snakemake("-n", "--cores", "1", "--configfile", write_config(tmp_path, config))
    assert done.returncode != 0
    assert "'pases' was unexpected" in done.stderr + done.stdout


def test_out_of_range_value_fails_naming_the_key(tmp_path):
    config = pipeline("demo")
    config["corpus"]["passes"] = 0
    done = snakemake("-n", "--cores", "1", "--configfile", write_config(tmp_path, config))
    output = done.stderr + done.stdout
    assert done.returncode != 0 and "['corpus']['passes']" in output


def test_keys_of_the_other_reference_source_are_refused_by_name(tmp_path):
    config = pipeline("grch37")
    config["reference"]["seed"] = 0  # a demo-only key
    done = snakemake("-n", "--cores", "1", "--configfile", write_config(tmp_path, config))
    output = done.stdout + done.stderr
    assert done.returncode != 0 and "'seed' is not one of ['source', 'manifest'" in output
    config = pipeline("demo")
    del config["chromatin"]["max_bins"]  # required with the demo's peak labels
    done = snakemake("-n", "--cores", "1", "--configfile", write_config(tmp_path, config))
    assert done.returncode != 0 and "'max_bins' is a required property" in done.stdout + done.stderr
    config = pipeline("demo")
    config["chromatin"]["deepsea_features"] = "features.tsv"  # a download-only key
    done = snakemake("-n", "--cores", "1", "--configfile", write_config(tmp_path, config))
    output = done.stdout + done.stderr
    assert done.returncode != 0 and "instance['chromatin']:\n    'deepsea_features'" in output
    config = pipeline("grch37")
    config["chromatin"]["max_bins"] = 100  # demo and own-FASTA only
    done = snakemake("-n", "--cores", "1", "--configfile", write_config(tmp_path, config))
    assert done.returncode != 0 and "'max_bins' should not be valid" in done.stdout + done.stderr


def test_a_manifest_entry_that_does_not_exist_is_named(tmp_path):
    config = pipeline("grch37")
    config["reference"]["genome"] = "hg91"
    done = snakemake("-n", "--cores", "1", "--configfile", write_config(tmp_path, config))
    assert done.returncode != 0
    assert "reference.genome: 'hg91' is not in reference/grch37.yaml" in done.stdout + done.stderr


def terminate_when(args: list[str], appears: Path, timeout: float = 300) -> None:
    """Run Snakemake and send SIGTERM to it and its jobs once `appears` exists."""
    command = [sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile"), *args]
    run = subprocess.Popen(
        command,
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline = time.monotonic() + timeout
    while not appears.exists() and run.poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    assert run.poll() is None, f"the run ended before {appears} appeared"
    os.killpg(run.pid, signal.SIGTERM)
    run.wait(timeout=60)


@pytest.mark.slow
def test_ci_pipeline_runs_end_to_end_resumes_and_then_has_nothing_to_do(tmp_path):
    """A run terminated during pretraining (SIGTERM, as a preempted job gets) completes
    when started again; a third run is a no-op. pipelines/ci.yaml: every stage on a 1 Mb
    genome, about 40 s on 2 cores."""
    base = ["--cores", "2", "--configfile", write_config(tmp_path, pipeline("ci"))]
    results = tmp_path / "results"
    terminate_when(base, results / "logs" / "pretrain.log")
    assert (results / "corpus" / "instances-train" / "manifest.json").is_file()
    assert not (results / "pretrain" / "model").exists()
    finished = snakemake(*base)
    assert finished.returncode == 0, finished.stderr[-3000:]
    for task in ("promoter", "chromatin"):
        assert (results / task / "report" / "metrics.json").is_file()
        scores = (results / "score" / f"{task}_heldout_tss.tsv").read_text()
        assert scores.splitlines()[0].startswith(
            "index\tchrom\tstart\tend\tname\tstrand\tline\twindow_start\twindow_end\tcontains_N"
        )
        assert len((results / "score" / f"{task}_samples.tsv").read_text().splitlines()) > 10
        assert (results / "score" / f"{task}_variants.tsv.log_odds_diff.tsv").is_file()
    page = (results / "report.html").read_text()
    for heading in (
        "Corpus",
        "Vocabulary",
        "Pretraining",
        "context length",
        "promoter",
        "chromatin",
        "Score tables",
    ):
        assert heading in page, heading
    assert page.count("data:image/png;base64,") >= 4  # curves, context, ROC/PR plots
    # the config's context lengths, each after the first with its paired gains
    assert "<td>16</td>" in page and "<td>64</td>" in page
    assert "bits per bp saved over the previous length" in page
    assert 'href="score/promoter_variants.tsv"' in page
    # the demo genome's section first; its copies read back at the config's lengths
    assert page.index("<h2>The demo genome") == page.index("<h2>")
    copies = page[page.index("Reading copies from context") :]
    assert "genobird, in copies" in copies and "<td>16</td>" in copies
    again = snakemake(*base, "-n")
    assert "Nothing to be done" in again.stdout + again.stderr
    # the README's Python examples run on the pipeline's outputs as they stand
    blocks = re.findall(r"```python\n(.*?)```", (REPO / "README.md").read_text(), re.DOTALL)
    assert len(blocks) == 3
    for block in blocks:
        code = block.replace("results/demo/", f"{results}/")
        done = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path
        )
        assert done.returncode == 0, done.stderr[-2000:]


def test_pretraining_on_gpus_launches_torchrun(tmp_path):
    config = pipeline("demo")
    config["pretrain"]["gpus"] = 8
    done = snakemake("-n", "-p", "--cores", "2", "--configfile", write_config(tmp_path, config))
    assert done.returncode == 0, done.stderr[-2000:]
    assert "torchrun --standalone --nproc_per_node 8 -m genobird.cli -q pretrain" in done.stdout


@pytest.mark.slow
def test_download_pipeline_runs_offline_on_a_mini_grch37(tmp_path):
    """The GRCh37 branch end to end: downloads from file:// URLs (checksums, bgzip, untar,
    index), EPDnew promoters, DeepSEA's three .mat splits, then every later stage with the
    CI pipeline's small settings."""
    from genobird.datasets.windows import read_metadata
    from genobird.genome.demo import DemoSpec, generate_demo_reference
    from tests.mini_grch37 import build_mini_grch37

    generate_demo_reference(tmp_path / "demo", DemoSpec(seed=1, size_mb=1.0))
    manifest = build_mini_grch37(tmp_path / "demo", tmp_path / "published")
    config = pipeline("ci")
    config["reference"] = {
        "source": "download",
        "manifest": str(manifest),
        "dest": "",
        "genome": "hg19",
        "promoters": "epdnew",
        "deepsea_bundle": "deepsea-bundle",
        "deepsea_coordinates": "deepsea-coordinates",
    }
    config["corpus"].update(train_chromosomes=["chr1", "chr2"], heldout_chromosomes=["chr8"])
    config["split"] = {"valid_chromosomes": ["chr7"], "test_chromosomes": ["chr8"]}
    del config["chromatin"]["max_bins"]
    base = ["--cores", "2", "--configfile", write_config(tmp_path, config)]
    done = snakemake(*base)
    assert done.returncode == 0, done.stderr[-3000:]
    downloads, results = tmp_path / "downloads", tmp_path / "results"
    assert (downloads / "hg19.fa.bgz.gz.fai").is_file()
    assert "deepsea_train_bundle.v0.9.tar.gz" in (downloads / "checksums.json").read_text()
    chromatin = read_metadata(results / "chromatin" / "data.h5")
    assert len(chromatin["feature_names"]) == 919
    with h5py.File(results / "chromatin" / "data.h5", "r") as handle:
        splits = set(handle["split"][:].astype(str))
    assert splits == {"train", "valid", "test"}
    for task in ("promoter", "chromatin"):
        assert (results / task / "report" / "metrics.json").is_file()
        rows = (results / "score" / f"{task}_heldout_tss.tsv").read_text().splitlines()
        assert len(rows) > 1 and all(row.split("\t")[1] == "chr8" for row in rows[1:])
    assert "Score tables" in (results / "report.html").read_text()
    again = snakemake(*base, "-n")
    assert "Nothing to be done" in again.stdout + again.stderr


def test_states_gpu_overlay_runs_every_arm_longer_with_one_cnn_budget(tmp_path, shared_data):
    """pipelines/chromatin-states-gpu.yaml, given after human-mini.yaml and
    chromatin-states.yaml: genobird's arms fine-tune 600 steps of 16 at every context,
    and the CNN arms' new budget is the budget of the base CNN the genobird arms read
    from them (else each would train its own)."""
    configs = [write_config(tmp_path, _at(pipeline("human-mini"), shared_data))]
    for name in ("chromatin-states", "chromatin-states-gpu"):
        (tmp_path / f"{name}.yaml").write_text(yaml.safe_dump(_at(pipeline(name), shared_data)))
        configs.append(str(tmp_path / f"{name}.yaml"))
    done = snakemake("-n", "-p", "--cores", "16", "--configfile", *configs)
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.splitlines()
    finetunes = [line for line in lines if "genobird -q finetune chromatin" in line]
    cnn_arms = [line for line in lines if "genobird -q baseline deepsea-cnn" in line]
    assert len(finetunes) == 4 and len(cnn_arms) == 4
    for line in finetunes:
        assert "--max-steps 600 --learning-rate 0.0003 --batch-size 16" in line
        assert "--eval-every 150" in line and "--base-cnn-minutes 5 " in line
        assert "deepsea-cnn-" in line.split("--base-start-from")[1]
    assert all("--max-minutes 5 " in line for line in cnn_arms)


def test_profiles_name_only_rules_that_exist(tmp_path):
    done = snakemake("--list-rules", "--configfile", write_config(tmp_path, pipeline("grch37")))
    assert done.returncode == 0, done.stderr[-2000:]
    rules = set(done.stdout.split())
    assert {"download_genome", "pretrain", "chromatin_finetune"} <= rules
    for profile in ("local", "slurm"):
        settings = yaml.safe_load(
            (REPO / "pipelines" / "profiles" / profile / "config.v8+.yaml").read_text()
        )
        assert set(settings.get("set-resources", {})) <= rules, profile


def test_state_arms_start_from_the_baseline_arms_at_their_context(tmp_path, shared_data):
    """pipelines/chromatin-states.yaml: each genobird arm reads its start from the k-mer
    LR and DeepSEA CNN arms at its context (`--base-start-from`), blended by category; a
    context without such arms reads none; a recipe of base k-mers alone reads the k-mer
    LR arm alone."""
    base = write_config(tmp_path, _at(pipeline("human-mini"), shared_data))
    states = _at(pipeline("chromatin-states"), shared_data)
    task = states["chromatin_tasks"]["roadmap_states_hg19"]
    task["kmer_contexts"] = task["cnn_contexts"] = [1000, 4000]
    overlay = tmp_path / "states.yaml"
    overlay.write_text(yaml.safe_dump(states))
    done = snakemake("-n", "-p", "--cores", "2", "--configfile", base, str(overlay))
    assert done.returncode == 0, done.stderr[-2000:]
    arms = f"{tmp_path}/results/chromatin_tasks/roadmap_states_hg19/baselines"
    finetunes = {
        int(re.search(r"--window-bp (\d+)", line).group(1)): line
        for line in done.stdout.splitlines()
        if "finetune chromatin" in line
    }
    assert set(finetunes) == {1000, 2000, 4000, 8000}
    assert f"--base-start-from {arms}/kmer-lr-4000 {arms}/deepsea-cnn-4000 >" in finetunes[4000]
    assert (
        "--base-cnn-architecture deepsea-cnn --base-cnn-epochs 10 --base-cnn-minutes 15"
        in finetunes[4000]
        and "--base-blend by-category" in finetunes[4000]
    )
    assert "--base-start-from" not in finetunes[8000]  # no baseline arm at 8 kb here
    # the CNN arm is fitted as the genobird arms' base CNN is: one width, one budget
    cnn_arm = next(
        line
        for line in done.stdout.splitlines()
        if "baseline deepsea-cnn" in line and "--window-bp 4000" in line
    )
    assert "--max-epochs 10 --max-minutes 15 --channels 128" in cnn_arm
    task["base_cnn_minutes"] = 10  # a base CNN the arms could not read: refused by name
    overlay.write_text(yaml.safe_dump(states))
    done = snakemake("-n", "--cores", "2", "--configfile", base, str(overlay))
    assert done.returncode != 0
    assert (
        "chromatin_tasks.roadmap_states_hg19: base_cnn_minutes 10 differs from DeepSEA's "
        "CNN arm's cnn_max_minutes 15"
    ) in done.stdout + done.stderr
    task["cnn_channels"], task["base_cnn_minutes"] = 320, 15
    overlay.write_text(yaml.safe_dump(states))
    done = snakemake("-n", "--cores", "2", "--configfile", base, str(overlay))
    refused = "base_cnn_channels 128 differs from DeepSEA's CNN arm's cnn_channels 320"
    assert done.returncode != 0 and refused in done.stdout + done.stderr
    base_cnn = ("base_cnn_channels", "base_cnn_architecture", "base_cnn_minutes", "cnn_channels")
    for name in (*base_cnn, "base_blend"):
        del task[name]
    overlay.write_text(yaml.safe_dump(states))
    done = snakemake("-n", "-p", "--cores", "2", "--configfile", base, str(overlay))
    assert done.returncode == 0, done.stderr[-2000:]
    line = next(
        line
        for line in done.stdout.splitlines()
        if "finetune chromatin" in line and "--window-bp 4000" in line
    )
    assert f"--base-start-from {arms}/kmer-lr-4000 >" in line and "--base-cnn" not in line
