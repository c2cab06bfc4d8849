"""Pack what a machine without internet needs to run a genobird pipeline.

GPU nodes often reach no package index and no shared disk. Run this where both are at
hand, from the repository root, with genobird installed (`make setup`):

    .venv/bin/python scripts/offline_bundle.py --out BUNDLE \\
        --config pipelines/human-mini.yaml pipelines/human-gpu.yaml \\
        --python-version 3.12 --target-has TARGET_PACKAGES

It writes
- BUNDLE/wheels: a wheel of every package genobird needs at run time that the target
  lacks (TARGET_PACKAGES: the target's `python3 -m pip freeze`, or one package name a
  line), at the versions installed here, for the target's Python on x86-64 Linux, and of
  the build backend that installs genobird itself;
- BUNDLE/inputs: each file the configs name (FASTA files with their .fai/.gzi
  indexes, task tables), and BUNDLE/inputs.yaml, a config given last that points the
  pipeline at those copies;
- BUNDLE/manifest.json: the SHA-256 of every file written.

Copy the repository and BUNDLE (at the same path inside it) to the target, then there:

    python3 -m pip install --no-index --no-deps BUNDLE/wheels/*.whl
    python3 -m pip install --no-index --no-deps --no-build-isolation -e .
    snakemake --cores 16 --configfile pipelines/human-mini.yaml \\
        pipelines/human-gpu.yaml BUNDLE/inputs.yaml

Wheels are installed without dependency resolution (nothing to resolve against), which
is why the bundle holds the whole closure the target lacks.
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from importlib import metadata
from pathlib import Path

import yaml
from packaging.markers import default_environment
from packaging.requirements import Requirement

# Files that travel with a FASTA so that pyfaidx need not rebuild them (a bgzipped FASTA
# cannot be indexed without its .gzi).
INDEX_SUFFIXES = (".fai", ".gzi")
# pip's platform tags for x86-64 Linux, newest first; pip matches each tag exactly.
LINUX_PLATFORMS = (
    "manylinux_2_28_x86_64",
    "manylinux_2_27_x86_64",
    "manylinux_2_24_x86_64",
    "manylinux_2_17_x86_64",
    "manylinux2014_x86_64",
    "manylinux1_x86_64",
)
BUILD_BACKEND = "setuptools"


class BundleError(Exception):
    """A bundle that cannot be made as asked; the message names the fix."""


def canonical(name: str) -> str:
    """PyPI's normalised project name (PEP 503): case and -_. runs do not matter."""
    return re.sub(r"[-_.]+", "-", name).lower()


def read_target_packages(path: Path) -> set[str]:
    """Names in a `pip freeze` listing or a plain list of names; versions are ignored."""
    if not path.is_file():
        raise BundleError(f"{path}: not found; write the target's `python3 -m pip freeze` to it")
    names = set()
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            names.add(canonical(re.split(r"[=<>!~ @;\[]", line, maxsplit=1)[0]))
    return names


def target_environment(python_version: str) -> dict:
    """Marker values of the target: this machine's, with the target's Python."""
    environment = default_environment()
    major_minor = ".".join(python_version.split(".")[:2])
    environment.update(python_version=major_minor, python_full_version=f"{major_minor}.0")
    environment.update(sys_platform="linux", platform_system="Linux", platform_machine="x86_64")
    return environment


def runtime_closure(root: str, target_has: set[str], python_version: str) -> dict[str, str]:
    """{name: installed version} of every package `root` needs at run time (extras left
    out) that `target_has` does not hold, following requirements of bundled packages
    only: a package the target has brings its own dependencies."""
    environment = target_environment(python_version)
    pins: dict[str, str] = {}
    installed_version(root)  # not installed here: one line, not a traceback
    pending = [root]
    while pending:
        name = pending.pop()
        for text in metadata.requires(name) or []:
            requirement = Requirement(text)
            if requirement.marker and not requirement.marker.evaluate({**environment, "extra": ""}):
                continue
            needed = canonical(requirement.name)
            if needed in target_has or needed in pins or needed == canonical(root):
                continue
            pins[needed] = installed_version(requirement.name)
            pending.append(requirement.name)
    return dict(sorted(pins.items()))


def installed_version(name: str) -> str:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError as exc:
        raise BundleError(f"{name} is needed but not installed here; run `make setup`") from exc


def pip(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pip", *args], capture_output=True, text=True)


def fetch_wheel(name: str, version: str, wheels: Path, python_version: str) -> None:
    """The target's binary wheel of name==version from the package index; failing that,
    a wheel built here from its source, accepted only when it is pure Python."""
    spec = f"{name}=={version}"
    platforms = [arg for tag in LINUX_PLATFORMS for arg in ("--platform", tag)]
    python = python_version.replace(".", "")[:3]
    downloaded = pip(
        "download",
        "--quiet",
        "--no-deps",
        "--only-binary=:all:",
        "--dest",
        str(wheels),
        "--python-version",
        python,
        "--implementation",
        "cp",
        *platforms,
        spec,
    )
    if downloaded.returncode == 0:
        return
    with tempfile.TemporaryDirectory() as scratch:
        built = pip("wheel", "--quiet", "--no-deps", "--wheel-dir", scratch, spec)
        made = sorted(Path(scratch).glob("*.whl"))
        if built.returncode != 0 or not made:
            raise BundleError(
                f"{spec}: no wheel for Python {python_version} on x86-64 Linux "
                "and none could be built here; install it on the target by hand"
            )
        if not made[0].name.endswith("-none-any.whl"):
            raise BundleError(
                f"{spec}: only a source release, and its wheel built here "
                f"({made[0].name}) fits this machine only; build it on the target"
            )
        shutil.copy2(made[0], wheels / made[0].name)


def merged_config(paths: list[Path]) -> dict:
    """The configs merged as Snakemake merges several --configfile: later keys replace
    earlier ones, dictionaries merge key by key, lists are replaced whole."""
    merged: dict = {}
    for path in paths:
        if not path.is_file():
            raise BundleError(f"{path}: config not found")
        loaded = yaml.safe_load(path.read_text()) or {}
        if not isinstance(loaded, dict):
            raise BundleError(f"{path}: a pipeline config is a mapping of keys")
        deep_update(merged, loaded)
    return merged


def deep_update(base: dict, update: dict) -> dict:
    for key, value in update.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            deep_update(base[key], value)
        else:
            base[key] = copy.deepcopy(value)
    return base


def bundled_name(source: str) -> Path:
    """Where a config's file lies under BUNDLE/inputs: its path without '..', '.' or a
    leading '/' (../shared/data/x.fa -> shared/data/x.fa)."""
    parts = [part for part in Path(source).parts if part not in ("..", ".", "/")]
    return Path(*parts)


class InputCopier:
    """Copies the files a config names into BUNDLE/inputs and records their new paths.
    Files inside the repository (pretraining configs, say) travel with it and stay."""

    def __init__(self, bundle: Path, repository: Path):
        self.bundle, self.repository, self.copied = bundle, repository.resolve(), {}

    def rewrite(self, value):
        """`value` with each string naming an existing file replaced by its copy's path;
        None where nothing in it named a file (so the overlay leaves it alone)."""
        if isinstance(value, dict):
            changed = {key: self.rewrite(item) for key, item in value.items()}
            changed = {key: item for key, item in changed.items() if item is not None}
            return changed or None
        if isinstance(value, list):
            items = [self.rewrite(item) for item in value]
            if all(item is None for item in items):
                return None
            # lists are replaced whole when configs merge: each item is given in full
            return [
                old
                if new is None
                else deep_update(copy.deepcopy(old), new)
                if isinstance(old, dict)
                else new
                for new, old in zip(items, value, strict=True)
            ]
        if isinstance(value, str) and Path(value).is_file() and not self.in_repository(value):
            return self.copy(value)
        return None

    def in_repository(self, path: str) -> bool:
        return Path(path).resolve().is_relative_to(self.repository)

    def copy(self, source: str) -> str:
        target = self.bundle / "inputs" / bundled_name(source)
        earlier = self.copied.get(target)
        if earlier is not None:
            if Path(earlier).resolve() != Path(source).resolve():
                raise BundleError(
                    f"{source} and {earlier} would both be bundled as {target}; rename one of them"
                )
            return target.as_posix()  # named again: copied already
        self.copied[target] = source
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, target)
        for suffix in INDEX_SUFFIXES:
            index = Path(source + suffix)
            if index.is_file():
                shutil.copy2(index, Path(str(target) + suffix))
        for named in files_named_by_table(Path(source)):
            self.copy(str(named))  # beside the copied table, where it looks for them
        return target.as_posix()


def files_named_by_table(path: Path) -> list[Path]:
    """The peak (and assayed-region) files a chromatin feature table names, relative to
    it: they must travel with the table."""
    if path.suffix != ".tsv":
        return []
    lines = path.read_text().splitlines()
    header = lines[0].split("\t") if lines else []
    columns = [header.index(name) for name in ("peak_file", "assayed") if name in header]
    if not columns or "peak_file" not in header:
        return []
    named = []
    for line in lines[1:]:
        fields = line.split("\t")
        for column in columns:
            if column < len(fields) and fields[column] and (path.parent / fields[column]).is_file():
                named.append(Path(os.path.normpath(path.parent / fields[column])))
    return named


def bundle_inputs(configs: list[Path], bundle: Path, repository: Path) -> dict:
    """Copy every file outside `repository` that the merged configs name into
    BUNDLE/inputs; write and return the overlay config (BUNDLE/inputs.yaml) that points
    the pipeline at the copies. Relative paths are read from the working directory, as
    Snakemake reads them."""
    overlay = InputCopier(bundle, repository).rewrite(merged_config(configs)) or {}
    bundle.mkdir(parents=True, exist_ok=True)
    (bundle / "inputs.yaml").write_text(
        "# Given last: points the pipeline at the files bundled beside this one.\n"
        + yaml.safe_dump(overlay, sort_keys=False)
    )
    return overlay


def write_manifest(bundle: Path) -> Path:
    files = sorted(path for path in bundle.rglob("*") if path.is_file())
    digests = {
        path.relative_to(bundle).as_posix(): sha256(path)
        for path in files
        if path.name != "manifest.json"
    }
    manifest = bundle / "manifest.json"
    manifest.write_text(json.dumps(digests, indent=1) + "\n")
    return manifest


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="the bundle folder (new)")
    parser.add_argument(
        "--config",
        type=Path,
        nargs="+",
        required=True,
        help="the pipeline configs, in the order given to snakemake",
    )
    parser.add_argument("--python-version", default="3.12", help="the target's Python")
    parser.add_argument(
        "--target-has", type=Path, help="the target's `pip freeze` (or names a line): not bundled"
    )
    parser.add_argument(
        "--leave-out",
        nargs="+",
        default=[],
        metavar="NAME",
        help="packages the pipeline can run without (with their own "
        "dependencies), e.g. pulp with `snakemake --scheduler greedy`, "
        "pybedtools where no rule reads peak BEDs",
    )
    parser.add_argument("--no-wheels", action="store_true", help="bundle the inputs only")
    return parser.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    try:
        if args.out.exists():
            raise BundleError(f"{args.out} exists; give a new folder")
        pins = build(args)
    except BundleError as exc:
        print(f"offline_bundle: error: {exc}", file=sys.stderr)
        return 2
    size = sum(path.stat().st_size for path in args.out.rglob("*") if path.is_file())
    print(f"{args.out}: {len(pins)} wheels, {size / 2**20:.1f} MiB")
    return 0


def build(args) -> dict[str, str]:
    """The bundle in args.out; nothing is left there when it cannot be completed."""
    try:
        target_has = read_target_packages(args.target_has) if args.target_has else set()
        not_bundled = target_has | {canonical(name) for name in args.leave_out}
        pins = (
            {} if args.no_wheels else runtime_closure("genobird", not_bundled, args.python_version)
        )
        bundle_inputs(args.config, args.out, Path.cwd())
        if pins:
            pins[BUILD_BACKEND] = installed_version(BUILD_BACKEND)
            wheels = args.out / "wheels"
            wheels.mkdir()
            for name, version in pins.items():
                fetch_wheel(name, version, wheels, args.python_version)
        write_manifest(args.out)
    except BaseException:
        shutil.rmtree(args.out, ignore_errors=True)
        raise
    return pins


if __name__ == "__main__":
    sys.exit(main())
