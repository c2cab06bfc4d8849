"""The package's layers (docs/architecture.md): imports run down them, never back up, and
no two modules import each other, directly or round a longer circle. Imports inside
functions count: a lazy import is still a dependency."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "genobird"
# lowest first: a module may import from its own layer and those before it
LAYERS = [
    [
        "genobird.errors",
        "genobird.fileio",
        "genobird.device",
        "genobird.version",
        "genobird.settings",
    ],
    ["genobird.genome"],
    ["genobird.corpus"],
    ["genobird.attention"],
    ["genobird.model"],
    ["genobird.inputs"],
    ["genobird.training"],
    ["genobird.datasets"],
    ["genobird.baselines"],
    ["genobird.finetuning"],
    # scoring, in data-flow order: where windows come from (the record source) and where
    # tables go, the predictors, the language model's bits, then what is built on them
    [
        "genobird.scoring.options",
        "genobird.scoring.windows",
        "genobird.scoring.source",
        "genobird.scoring.tables",
    ],
    ["genobird.scoring.predict"],
    ["genobird.scoring.likelihood"],
    ["genobird.scoring", "genobird.convert"],
    # what a model reads: attributions over many windows, and the motifs in them
    ["genobird.interpret"],
    # the results folder and the evaluations' artifacts: written by evaluation, drawn by
    # the report (which imports no evaluation code: test_report)
    ["genobird.artifacts"],
    ["genobird.evaluation"],
    ["genobird.report.sources", "genobird.report.names"],
    ["genobird.report.checks"],
    ["genobird.report"],
    ["genobird.nlp", "genobird.commands", "genobird.cli"],
]


def layer_of(module: str) -> int | None:
    matches = [
        (len(prefix), index)
        for index, prefixes in enumerate(LAYERS)
        for prefix in prefixes
        if module == prefix or module.startswith(prefix + ".")
    ]
    return max(matches)[1] if matches else None


def imports() -> dict[str, set[str]]:
    """module -> the genobird modules it imports (anywhere in it)."""
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        module = ".".join(parts).removesuffix(".__init__")
        targets = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                # `from genobird.x import y`: the module x.y where y is one (a .py file or a
                # compiled extension), else x
                folder = PACKAGE.parent.joinpath(*node.module.split("."))
                names = [
                    f"{node.module}.{alias.name}" if is_module(folder, alias.name) else node.module
                    for alias in node.names
                ]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            else:
                continue
            targets |= {name for name in names if name.startswith("genobird.")}
        found[module] = targets
    for source in PACKAGE.rglob("*.c"):  # compiled extensions: leaves of the graph
        found[".".join(source.relative_to(PACKAGE.parent).with_suffix("").parts)] = set()
    return found


def is_module(folder: Path, name: str) -> bool:
    """Whether `name` in package `folder` is a module (a .py file, a package or a
    compiled extension) rather than a name its __init__ exports."""
    return (
        (folder / f"{name}.py").is_file()
        or (folder / name).is_dir()
        or (folder / f"{name}.c").is_file()
    )


def test_every_module_has_a_layer():
    assert [m for m in imports() if m != "genobird" and layer_of(m) is None] == []


def test_imports_run_down_the_layers():
    upward = sorted(
        (module, target)
        for module, targets in imports().items()
        if module != "genobird"  # the package's lazy facade names its top API
        for target in targets
        if layer_of(target) > layer_of(module)
    )
    assert upward == []


def test_no_modules_import_each_other():
    graph = imports()
    modules = set(graph)

    def resolved(target: str) -> str | None:  # `from genobird.x import y`: x, or x.y
        while target and target not in modules:
            target = target.rpartition(".")[0]
        return target or None

    edges = {
        m: {resolved(t) for t in targets} - {None, m, "genobird"} for m, targets in graph.items()
    }
    cycles, state = [], {}

    def visit(module: str, path: list[str]) -> None:
        state[module] = "open"
        for target in sorted(edges.get(module, ())):
            if state.get(target) == "open":
                cycles.append([*path[path.index(target) :], target])
            elif target not in state:
                visit(target, [*path, target])
        state[module] = "done"

    for module in sorted(edges):
        if module not in state:
            visit(module, [module])
    assert cycles == []


# a module a maintainer can hold in mind: split one that grows past this, in data-flow order
MAX_MODULE_LINES = 500


def test_no_module_is_longer_than_a_maintainer_can_read_at_once():
    long = sorted(
        (len(path.read_text().splitlines()), str(path.relative_to(PACKAGE.parent)))
        for path in PACKAGE.rglob("*.py")
        if len(path.read_text().splitlines()) > MAX_MODULE_LINES
    )
    assert long == []


def test_scoring_opens_hdf5_for_writing_in_one_place():
    """score, likelihood, embed and ism write HDF5 through one writer
    (scoring.tables.H5Output): one call in the scoring package opens a file for writing."""
    writes = []
    for path in (PACKAGE / "scoring").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "File"
                and any(
                    isinstance(arg, ast.Constant) and arg.value in ("w", "a", "w-", "x", "r+")
                    for arg in [*node.args[1:], *(k.value for k in node.keywords)]
                )
            ):
                writes.append(f"{path.name}:{node.lineno}")
    assert len(writes) == 1, writes
