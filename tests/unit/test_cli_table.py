"""The command table: every verb declared once, overrides accepted anywhere, errors in one line."""

from __future__ import annotations

from pathlib import Path

import pytest

from fixgraph.cli import commands, main, parse


def test_every_verb_is_declared_once_with_help() -> None:
    table = commands()
    assert {"run", "evaluate", "answers", "sweep", "finalists", "test", "config", "candidates", "bench"} <= set(table)
    assert all(command.help for command in table.values())


@pytest.mark.parametrize(
    "argv",
    [
        ["evaluate", "--questions", "q.jsonl", "corpus=x", "experiment=single"],
        ["evaluate", "corpus=x", "--questions", "q.jsonl", "experiment=single"],
        ["evaluate", "corpus=x", "experiment=single", "--questions", "q.jsonl"],
    ],
)
def test_overrides_are_accepted_anywhere(argv: list[str]) -> None:
    args = parse(argv, commands())
    assert args.questions == Path("q.jsonl") and args.overrides == ["corpus=x", "experiment=single"]


def test_unknown_flags_and_stray_words_are_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        parse(["evaluate", "corpus=x", "--questionz", "q.jsonl"], commands())
    assert "unrecognized arguments: --questionz" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        parse(["ui", "extra=1"], commands())  # a verb without overrides


def test_config_errors_name_the_key_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["config", "+systems.hybrid.rrf_kk=5"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "fixgraph config: error: systems.hybrid" in err and "rrf_kk" in err
    assert main(["run", "systems.hybrid.rrf_kk=5"]) == 2  # not appended: Hydra refuses it, named
    assert "systems.hybrid.rrf_kk" in capsys.readouterr().err


def test_a_model_that_is_not_assembled_or_unknown_is_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    assert main(["llm", "assemble", "no-such-model"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "fixgraph llm: error: unknown GGUF model 'no-such-model'" in err
    from fixgraph.llm.gguf import resolve_gguf  # what answering with a model never assembled reaches

    with pytest.raises(Exception, match="not assembled") as raised:
        resolve_gguf("qwen2.5-coder-0.5b-instruct-q4_k_m", tmp_path)
    from fixgraph.errors import USER_ERRORS

    assert isinstance(raised.value, USER_ERRORS)


def test_sweep_expressions_are_taken_out_before_composition() -> None:
    from fixgraph.experiment.commands import _sweep_words

    args = parse(["sweep", "experiment=single", "retriever=choice(dense,bm25)", "--trials", "3"], commands())
    _sweep_words(args)
    assert args.overrides == ["experiment=single"] and [p.key for p in args.sweep_params] == ["retriever"]


def test_the_cli_pins_portable_cpu_math_but_keeps_a_choice_made_in_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import os

    from fixgraph.cli import PORTABLE_MATH_ENV

    environment = {k: v for k, v in os.environ.items() if k not in PORTABLE_MATH_ENV} | {"MKL_CBWR": "AVX2"}
    monkeypatch.setattr(os, "environ", environment)
    assert main(["config", "+systems.hybrid.rrf_kk=5"]) == 2  # any verb: set before the config is read
    assert environment["ONEDNN_MAX_CPU_ISA"] == "SSE41" and environment["ATEN_CPU_CAPABILITY"] == "default"
    assert environment["MKL_CBWR"] == "AVX2"
