"""scripts/offline_bundle.py: a pipeline's inputs and the wheels a machine without
internet lacks. (Downloading wheels needs a package index; it is not exercised here.)"""

import importlib.util
import json
from importlib import metadata
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def bundle():
    path = REPO / "scripts" / "offline_bundle.py"
    spec = importlib.util.spec_from_file_location("offline_bundle", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


@pytest.fixture
def layout(tmp_path, monkeypatch):
    """A repository with two configs naming files beside it (../shared) and in it."""
    repo = tmp_path / "repo"
    write(tmp_path / "shared/data/genome.fa", ">chr1\nACGT\n")
    write(tmp_path / "shared/data/genome.fa.fai", "chr1\t4\t6\t4\t5\n")
    write(tmp_path / "shared/data/tasks/0/train.csv", "sequence,label\nACGT,1\n")
    write(tmp_path / "shared/data/tasks/0/test.csv", "sequence,label\nTTTT,0\n")
    write(repo / "pipelines/pretrain/small.yaml", "model: {}\n")
    first = {
        "results": "results/mini",
        "reference": {"source": "fasta", "fasta": ["../shared/data/genome.fa"]},
        "corpus": {"heldout_chromosomes": ["chr1"], "vocab_size": 100},
        "pretrain": {"config": "pipelines/pretrain/small.yaml", "max_steps": 5},
        "sequence_tasks": {"tf0": {"input": "../shared/data/tasks/0/train.csv", "max_steps": 3}},
    }
    second = {
        "sequence_tasks": {"tf0": {"max_steps": 9, "test": "../shared/data/tasks/0/test.csv"}}
    }
    write(repo / "first.yaml", yaml.safe_dump(first))
    write(repo / "second.yaml", yaml.safe_dump(second))
    monkeypatch.chdir(repo)
    return repo


def test_inputs_outside_the_repository_are_copied_and_the_overlay_points_at_them(bundle, layout):
    configs = [Path("first.yaml"), Path("second.yaml")]
    overlay = bundle.bundle_inputs(configs, Path("offline"), layout)

    copies = "offline/inputs/shared/data"
    assert overlay == {
        "reference": {"fasta": [f"{copies}/genome.fa"]},
        "sequence_tasks": {
            "tf0": {"input": f"{copies}/tasks/0/train.csv", "test": f"{copies}/tasks/0/test.csv"}
        },
    }
    assert yaml.safe_load(Path("offline/inputs.yaml").read_text()) == overlay
    # the configs given last-wins, then the overlay: every path names a same-bytes copy
    merged = bundle.deep_update(bundle.merged_config(configs), overlay)
    assert merged["sequence_tasks"]["tf0"]["max_steps"] == 9
    assert merged["pretrain"]["config"] == "pipelines/pretrain/small.yaml"  # in the repo
    assert merged["results"] == "results/mini"
    originals = {
        f"{copies}/genome.fa": "../shared/data/genome.fa",
        f"{copies}/genome.fa.fai": "../shared/data/genome.fa.fai",
        f"{copies}/tasks/0/train.csv": "../shared/data/tasks/0/train.csv",
        f"{copies}/tasks/0/test.csv": "../shared/data/tasks/0/test.csv",
    }
    for copy, original in originals.items():
        assert Path(copy).read_bytes() == Path(original).read_bytes()
    assert not Path("offline/inputs/pipelines").exists()


def test_two_files_that_would_share_a_bundled_name_are_refused(bundle, tmp_path, monkeypatch):
    repo = tmp_path / "a" / "repo"
    # the same file twice is one copy; another file of the same bundled name is an error
    write(
        repo / "c.yaml", yaml.safe_dump({"fasta": ["../one/x.fa", "../one/x.fa", "../../one/x.fa"]})
    )
    write(tmp_path / "a/one/x.fa", ">a\nAC\n")
    write(tmp_path / "one/x.fa", ">b\nGT\n")
    monkeypatch.chdir(repo)
    with pytest.raises(bundle.BundleError, match=r"\.\./\.\./one/x\.fa and \.\./one/x\.fa"):
        bundle.bundle_inputs([Path("c.yaml")], Path("offline"), repo)


def test_the_wheel_list_is_the_runtime_closure_the_target_lacks(bundle):
    target_has = {"torch", "numpy"}
    pins = bundle.runtime_closure("genobird", target_has, "3.12")

    for needed in ("snakemake", "pyfaidx", "biopython", "sentencepiece", "h5py", "yte"):
        assert pins[needed] == metadata.version(needed)
    # extras (the dev tools) stay out, and so does what only the target's torch needs
    for absent in ("torch", "numpy", "pytest", "ruff", "transformers", "sympy"):
        assert absent not in pins
    # closed: each bundled package's own requirements are bundled or on the target
    environment = {**bundle.target_environment("3.12"), "extra": ""}
    for name in pins:
        for text in metadata.requires(name) or []:
            requirement = Requirement(text)
            if requirement.marker is None or requirement.marker.evaluate(environment):
                needed = bundle.canonical(requirement.name)
                assert needed in pins or needed in target_has, (name, needed)

    with pytest.raises(bundle.BundleError, match="not-installed-here is needed but not installed"):
        bundle.runtime_closure("not-installed-here", target_has, "3.12")
    without_snakemake = bundle.runtime_closure("genobird", target_has | {"snakemake"}, "3.12")
    assert "yte" not in without_snakemake  # snakemake's own need
    assert without_snakemake["pyyaml"] == metadata.version("pyyaml")  # genobird's too


def test_target_listings_are_read_as_names(bundle, tmp_path):
    listing = write(
        tmp_path / "freeze.txt",
        "Jinja2==3.1.6\ntyping_extensions==4.16.0\n"
        "torch @ file:///wheels/torch.whl\n# a comment\n\nsnakemake\n",
    )
    assert bundle.read_target_packages(listing) == {
        "jinja2",
        "typing-extensions",
        "torch",
        "snakemake",
    }


def test_the_command_refuses_bad_input_in_one_line_and_leaves_nothing(bundle, layout, capsys):
    assert bundle.main(["--out", "offline", "--config", "missing.yaml", "--no-wheels"]) == 2
    assert (
        capsys.readouterr().err.strip() == "offline_bundle: error: missing.yaml: config not found"
    )
    assert not Path("offline").exists()

    args = ["--out", "offline", "--config", "first.yaml", "--target-has", "nowhere.txt"]
    assert bundle.main(args) == 2
    assert "nowhere.txt: not found" in capsys.readouterr().err
    assert not Path("offline").exists()

    Path("offline").mkdir()
    assert bundle.main(["--out", "offline", "--config", "first.yaml", "--no-wheels"]) == 2
    assert "offline exists" in capsys.readouterr().err
    assert not any(Path("offline").iterdir())


def test_the_inputs_only_bundle_has_a_manifest_of_every_file(bundle, layout):
    assert (
        bundle.main(["--out", "offline", "--config", "first.yaml", "second.yaml", "--no-wheels"])
        == 0
    )
    manifest = json.loads(Path("offline/manifest.json").read_text())
    files = {
        p.relative_to("offline").as_posix()
        for p in Path("offline").rglob("*")
        if p.is_file() and p.name != "manifest.json"
    }
    assert set(manifest) == files
    assert manifest["inputs/shared/data/genome.fa"] == bundle.sha256(
        Path("../shared/data/genome.fa")
    )


def test_a_wheel_that_cannot_be_had_leaves_no_half_bundle(bundle, layout, monkeypatch, capsys):
    def no_wheel(name, version, wheels, python_version):
        raise bundle.BundleError(f"{name}=={version}: no wheel")

    monkeypatch.setattr(bundle, "fetch_wheel", no_wheel)
    write(Path("target.txt"), "torch==2.11.0\n")
    args = ["--out", "offline", "--config", "first.yaml", "--target-has", "target.txt"]
    assert bundle.main(args) == 2
    assert ": no wheel" in capsys.readouterr().err
    assert not Path("offline").exists()


def test_a_feature_table_travels_with_the_peak_files_it_names(bundle, tmp_path, monkeypatch):
    repo = tmp_path / "repo"
    shared = tmp_path / "shared/data/chromatin"
    write(shared / "peaks/A.bed", "chr1\t0\t100\n")
    write(shared / "regions/chr1.bed", "chr1\t0\t500\n")
    write(
        shared / "features.tsv",
        "name\tcategory\tpeak_file\tassayed\n"
        "a\tTF\tpeaks/A.bed\tregions/chr1.bed\nb\tTF\tpeaks/A.bed\tchr1\n",
    )
    config = {
        "chromatin_tasks": {
            "x": {
                "features": [{"table": "../shared/data/chromatin/features.tsv", "assayed": "chr1"}]
            }
        }
    }
    write(repo / "c.yaml", yaml.safe_dump(config))
    monkeypatch.chdir(repo)
    overlay = bundle.bundle_inputs([Path("c.yaml")], Path("offline"), repo)
    # a list is replaced whole when configs merge: its items keep every key
    assert overlay["chromatin_tasks"]["x"]["features"] == [
        {"table": "offline/inputs/shared/data/chromatin/features.tsv", "assayed": "chr1"}
    ]
    copies = Path("offline/inputs/shared/data/chromatin")
    # the table's relative paths resolve beside the copy as they did beside the original
    assert (copies / "peaks/A.bed").read_text() == "chr1\t0\t100\n"
    assert (copies / "regions/chr1.bed").is_file()
    assert not (copies / "chr1").exists()
