"""The command line through main(argv): exit codes, one-line errors, no tracebacks."""

import os
import sys

import pytest

from genobird.cli import build_parser, main
from tests.conftest import write


def test_help_lists_the_subcommands(capsys):
    with pytest.raises(SystemExit) as info:
        main(["--help"])
    assert info.value.code == 0
    out = capsys.readouterr().out
    for command in ("demo-reference", "reference"):
        assert command in out


def test_usage_error_exits_2(capsys):
    with pytest.raises(SystemExit) as info:
        main(["demo-reference", "--seed", "x"])
    assert info.value.code == 2
    capsys.readouterr()
    with pytest.raises(SystemExit) as info:
        main(["demo-reference", "outdir"])  # the output is named, not positional
    assert info.value.code == 2
    assert "the following arguments are required: --out" in capsys.readouterr().err


def test_demo_reference_twice_with_one_seed_gives_identical_files(tmp_path, capsys):
    for name in ("a", "b"):
        assert (
            main(
                [
                    "-q",
                    "demo-reference",
                    "--out",
                    str(tmp_path / name),
                    "--seed",
                    "5",
                    "--size-mb",
                    "0.4",
                ]
            )
            == 0
        )
    a = {p.name: p.read_bytes() for p in (tmp_path / "a").rglob("*") if p.is_file()}
    b = {p.name: p.read_bytes() for p in (tmp_path / "b").rglob("*") if p.is_file()}
    assert a == b and "genome.fa" in a
    assert "4 chromosomes" in capsys.readouterr().out


def test_fetch_prints_fasta_and_bad_region_is_one_line_error(tmp_path, capsys):
    fasta = write(tmp_path / "r.fa", ">chr1\nACGTACGTAA\n")
    assert main(["reference", "fetch", str(fasta), "1:2-5", "--strand", "-"]) == 0
    assert capsys.readouterr().out == ">1:2-5(-)\nACGT\n"[:0] + ">1:2-5(-)\nTACG\n"
    assert main(["reference", "fetch", str(fasta), "chr1:5-50"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "outside the contig" in err and "Traceback" not in err


def test_missing_file_is_a_one_line_error(tmp_path, capsys):
    assert main(["reference", "fetch", str(tmp_path / "none.fa"), "chr1:1-2"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("genobird: error:") and "not found" in err and err.count("\n") == 1


def test_unknown_data_set_lists_the_available_ones(capsys):
    assert main(["reference", "download", "hg99", "--out", "/tmp/unused"]) == 1
    assert "available: hg19" in capsys.readouterr().err


def test_internal_errors_are_one_line_without_debug(monkeypatch, capsys):
    import genobird.commands.reference as reference

    def broken(args):
        raise RuntimeError("boom")

    monkeypatch.setattr(reference, "cmd_reference_list", broken)
    assert main(["reference", "list"]) == 1
    err = capsys.readouterr().err
    assert "internal error: RuntimeError: boom" in err and "--debug" in err
    with pytest.raises(RuntimeError):
        main(["--debug", "reference", "list"])


def test_a_reader_that_leaves_early_stops_the_command_quietly():
    import subprocess

    # a command whose output outruns the pipe's buffer, read by `head -c 1`
    script = (
        "import sys, genobird.cli as cli, genobird.commands.reference as reference\n"
        "reference.cmd_reference_list = lambda args: [print('x' * 99) for _ in range(20000)]"
        " and 0\n"
        "sys.exit(cli.main(['reference', 'list']))\n"
    )
    shell = f'{sys.executable} -c "$SCRIPT" | head -c 1 > /dev/null; echo ${{PIPESTATUS[0]}}'
    done = subprocess.run(
        ["bash", "-c", shell],
        env={**os.environ, "SCRIPT": script},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.stdout.strip() == "1" and done.stderr == ""


def _leaf_commands(parser, prefix=()):
    import argparse

    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _leaf_commands(sub, (*prefix, name))
            return
    yield prefix


def test_every_subcommand_has_help(capsys):
    commands = list(_leaf_commands(build_parser()))
    assert ("score",) in commands and ("nlp", "finetune") in commands
    assert ("baseline", "markov") in commands and ("ism",) in commands and len(commands) == 38
    assert ("evaluate", "pretrained") in commands and ("evaluate", "runs") in commands
    assert ("evaluate", "corpus") in commands and ("evaluate", "all") in commands
    assert ("likelihood",) in commands and ("zero-shot",) in commands
    assert ("baseline", "compare") in commands
    assert ("convert", "from-hf") in commands and ("convert", "to-hf") in commands
    for command in commands:
        with pytest.raises(SystemExit) as info:
            main([*command, "--help"])
        assert info.value.code == 0
        text = capsys.readouterr().out
        assert f"usage: genobird {' '.join(command)}" in text and len(text) > 200, command
        assert "(default: None)" not in text and "(default: False)" not in text, command
    # the groups list their commands, whose one-line help may hold a % (argparse formats it)
    for group in sorted({command[:1] for command in commands if len(command) > 1}):
        with pytest.raises(SystemExit) as info:
            main([*group, "--help"])
        assert info.value.code == 0, group
        assert f"usage: genobird {group[0]}" in capsys.readouterr().out


def test_layout_reports_density_and_graph_properties(capsys):
    assert main(["layout", "bigbird", "--max-tokens", "2048", "--heads", "2"]) == 0
    out = capsys.readouterr().out
    assert "32 blocks of 64" in out and "2 global rows" in out
    assert "star graph True" in out and "Assumption 1 True" in out
    assert main(["layout", "strided", "--max-tokens", "1024"]) == 0
    assert "star graph False" in capsys.readouterr().out


def test_report_on_a_missing_results_folder_is_a_one_line_error(tmp_path, capsys):
    assert main(["report", "--results", str(tmp_path / "nowhere")]) == 1
    err = capsys.readouterr().err
    assert "no such results folder; run the pipeline first" in err and len(err.splitlines()) == 1


def test_report_with_no_context_windows_is_a_one_line_error_and_writes_nothing(tmp_path, capsys):
    out = tmp_path / "report.html"
    assert (
        main(["report", "--results", str(tmp_path), "--out", str(out), "--context-windows", "0"])
        == 1
    )
    err = capsys.readouterr().err
    assert "context windows must be at least 1, got 0" in err and len(err.splitlines()) == 1
    assert not out.exists()


def test_debug_and_quiet_are_accepted_after_the_command(tmp_path, capsys):
    fasta = write(tmp_path / "r.fa", ">chr1\nACGTACGTAA\n")
    assert main(["reference", "fetch", str(fasta), "chr1:1-4", "--quiet"]) == 0
    assert capsys.readouterr().out.splitlines()[1] == "ACGT"
    from genobird.errors import RegionError

    with pytest.raises(RegionError, match="outside the contig"):  # --debug: raised as it is
        main(["reference", "fetch", str(fasta), "chr1:9-99", "--debug"])
    assert main(["reference", "fetch", str(fasta), "chr1:9-99"]) == 1


def test_fetch_addresses_a_contig_whose_name_holds_a_colon(tmp_path, capsys):
    fasta = write(tmp_path / "r.fa", ">22:20000001-21000000\nNNNNACGTAC\n")
    assert main(["reference", "fetch", str(fasta), "22:20000001-21000000:5-8"]) == 0
    assert capsys.readouterr().out.splitlines()[1] == "ACGT"
    assert main(["reference", "fetch", str(fasta), "22:20000001-21000000"]) == 0
    assert capsys.readouterr().out.splitlines()[1] == "NNNNACGTAC"


HELP_CALLS = [
    ["--help"],
    ["finetune", "--help"],
    ["nlp", "--help"],
    ["score", "--help"],
    ["dataset", "chromatin", "--help"],
]


@pytest.mark.parametrize("argv", HELP_CALLS)
def test_help_imports_no_torch(argv):
    """Help is read often and must come at once: no torch, h5py, pyfaidx or Biopython."""
    import subprocess

    code = (
        "import sys\nfrom genobird.cli import main\ntry:\n"
        f"    main({argv!r})\nexcept SystemExit:\n    pass\n"
        "print(sorted(m for m in ('torch', 'h5py', 'pyfaidx', 'Bio') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "usage: genobird" in done.stdout
    assert done.stdout.strip().splitlines()[-1] == "[]"


def test_a_mistyped_command_or_option_gets_the_closest_and_the_commands_usage(capsys):
    """`--referance` is named with score's own usage and its closest option; a mistyped
    command with the closest command; an option like no other gets no guess."""
    with pytest.raises(SystemExit) as exit_info:
        main(["score", "--model", "m", "--bed", "r.bed", "--referance", "g.fa", "--out", "o.tsv"])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and err.startswith("usage: genobird score")
    assert "unrecognized arguments: --referance g.fa; did you mean '--reference'?" in err
    for argv, hint in (
        (["scroe"], "did you mean 'score'?"),
        (["dataset", "chromatn"], "did you mean 'chromatin'?"),
    ):
        with pytest.raises(SystemExit):
            main(argv)
        assert hint in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["score", "--model", "m", "--fasta", "x.fa", "--out", "o.tsv", "--bogus"])
    assert "did you mean" not in capsys.readouterr().err


def _options_by_command(parser, path=()):
    """(command, action) for every option of every (sub)command."""
    import argparse

    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _options_by_command(sub, (*path, name))
        elif action.option_strings:
            yield " ".join(path), action


# one flag, two concepts: the data set builders' --features are feature tables (files),
# the scoring commands' the names of features to keep; tracks' --format is a track file's
# (bedgraph, bigwig), the score tables' a table's (tsv, h5)
OTHER_CONCEPTS = {
    ("dataset chromatin", "--features"),
    ("dataset deepsea", "--features"),
    ("tracks", "--format"),
}


def test_every_command_spells_a_shared_option_as_the_table_declares_it():
    """No two commands spell one concept two ways: wherever a command has an option of
    the shared table, it takes what the table says (type, values, action, choices)."""
    import argparse

    from genobird.commands.options import SHARED, flag

    by_flag = {flag(name): name for name in SHARED}
    probe = argparse.ArgumentParser()
    checked = 0
    for command, action in _options_by_command(build_parser()):
        name = by_flag.get(action.option_strings[0])
        if name is None or (command, action.option_strings[0]) in OTHER_CONCEPTS:
            continue
        model = probe.add_argument(f"--probe-{checked}", **SHARED[name])
        for field in ("type", "nargs", "choices", "const"):
            assert getattr(action, field) == getattr(model, field), (command, name, field)
        assert type(action) is type(model), (command, name)
        checked += 1
    assert checked > 100  # most commands take most of their files and run options from it


def test_a_shared_option_takes_only_a_commands_own_help_default_required_and_metavar():
    import argparse

    from genobird.commands.options import add_shared

    parser = argparse.ArgumentParser()
    add_shared(parser, "out", "batch_size", out="where", batch_size={"default": 4})
    assert parser.parse_args(["--out", "x"]).batch_size == 4
    with pytest.raises(TypeError, match="may give only"):
        add_shared(argparse.ArgumentParser(), "out", out={"type": int})
    with pytest.raises(TypeError, match="not added"):
        add_shared(argparse.ArgumentParser(), "out", seed="a seed")


def test_every_option_is_as_the_snapshot_holds_it():
    """A refactor changes no option: every command's options, their types, defaults and
    choices, equal tests/data/parser_snapshot.json (help wording aside). A deliberate
    change writes the snapshot again: python -m tests.parser_snapshot --write"""
    import json

    from tests.parser_snapshot import SNAPSHOT, snapshot

    held, now = json.loads(SNAPSHOT.read_text()), json.loads(json.dumps(snapshot()))
    assert sorted(now) == sorted(held), "commands added or removed"
    for command, rows in held.items():
        assert now[command] == rows, f"{command}: options changed"
