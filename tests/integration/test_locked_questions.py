"""The locked test follows the questions: split=pool, copies of the question file and renamed copies of
test questions are refused outside `fixgraph test`; --exclude-locked drops and records them; output
folders of different question sets never collide; the ledger of looks survives deleting a file."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from omegaconf import DictConfig

from fixgraph.evaluation.locked_questions import LockedQuestionsError
from fixgraph.evaluation.protocol_errors import ProtocolError
from fixgraph.evaluation.splits import build_split, resolve_questions
from fixgraph.experiment.evaluate import evaluate
from fixgraph.experiment.ledger import LedgerError
from fixgraph.experiment.locked import StudyPaths, attempts, record_finalists, run_test
from fixgraph.io import stable_hash
from tests.conftest import CONF

NO_TRACK = "tracking.enabled=false"


def locked_ids(cfg: DictConfig) -> list[str]:
    split = json.loads(Path(str(cfg.splitting.file)).read_text())
    return sorted(qid for qid, entry in split["questions"].items() if entry["part"] == "test")


def copy_pool(cfg: DictConfig, target: Path, keep: Callable[[dict], bool], rename: bool) -> Path:
    rows = [json.loads(line) for line in Path(str(cfg.splitting.pool)).read_text().splitlines() if line.strip()]
    rows = [{**r, "qid": f"copy-{r['qid']}"} if rename else r for r in rows if keep(r)]
    target.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return target


def test_split_pool_is_refused_naming_the_locked_questions(protocol_config: Callable[..., DictConfig]) -> None:
    cfg = protocol_config(["split=pool", NO_TRACK])
    locked = locked_ids(cfg)
    with pytest.raises(LockedQuestionsError, match=rf"{len(locked)} of 16 questions are locked test questions") as err:
        evaluate(cfg)
    assert all(qid in str(err.value) for qid in locked) and "--exclude-locked" in str(err.value)
    with pytest.raises(LockedQuestionsError):  # sweeps, the candidate cache and benchmarks load splits this way
        build_split(cfg.split).load()


def test_copies_of_the_question_file_are_refused_even_renamed(
    protocol_config: Callable[..., DictConfig], tmp_path: Path
) -> None:
    cfg = protocol_config([NO_TRACK])
    locked = locked_ids(cfg)
    same = copy_pool(cfg, tmp_path / "dev.jsonl", lambda r: True, rename=False)
    with pytest.raises(LockedQuestionsError, match=rf"{len(locked)} of 16"):
        resolve_questions(cfg, same, None)
    renamed = copy_pool(cfg, tmp_path / "renamed.jsonl", lambda r: r["qid"] == locked[0], rename=True)
    with pytest.raises(LockedQuestionsError, match=rf"copy-{locked[0]} \(same text as {locked[0]}\)"):
        resolve_questions(cfg, renamed, None)
    # text normalised: case, punctuation and spacing do not make a new question
    rows = [json.loads(renamed.read_text())]
    rows[0]["question"] = "  " + rows[0]["question"].upper().replace(" ", "   ") + "?!"
    renamed.write_text(json.dumps(rows[0]) + "\n")
    with pytest.raises(LockedQuestionsError, match="same text as"):
        resolve_questions(cfg, renamed, None)


def test_exclude_locked_drops_them_and_records_the_count(
    protocol_config: Callable[..., DictConfig], caplog: pytest.LogCaptureFixture
) -> None:
    cfg = protocol_config(["split=pool", "split.exclude_locked=true", NO_TRACK])
    locked = locked_ids(cfg)
    with caplog.at_level("WARNING"):
        result = evaluate(cfg)
    assert f"excluded {len(locked)} locked test question(s)" in caplog.text
    assert result.info["questions"] == 16 - len(locked)
    recorded = json.loads((result.output_dir / "info.json").read_text())["locked_excluded"]
    assert recorded["count"] == len(locked) and sorted(q["qid"] for q in recorded["questions"]) == locked
    assert not set(locked) & set(result.per_question["qid"])


def test_output_folders_of_different_question_sets_never_collide(
    protocol_config: Callable[..., DictConfig], tmp_path: Path
) -> None:
    cfg = protocol_config([NO_TRACK])
    locked = set(locked_ids(cfg))
    dev = evaluate(cfg)
    assert dev.output_dir.name == "dev"  # dvc.yaml and the README point there
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    # two different question sets, both files called dev.jsonl (the stem of the split=dev folder, too)
    one = copy_pool(cfg, tmp_path / "a" / "dev.jsonl", lambda r: r["qid"] not in locked, rename=False)
    two = copy_pool(cfg, tmp_path / "b" / "dev.jsonl", lambda r: r["qid"] not in locked and r["qid"] < "p-08", False)
    first, second = evaluate(cfg, questions_path=one), evaluate(cfg, questions_path=two)
    assert len({dev.output_dir, first.output_dir, second.output_dir}) == 3
    assert first.output_dir.name.startswith("dev-") and second.output_dir.name.startswith("dev-")
    assert (dev.output_dir / "info.json").exists()  # the split=dev evaluation was not overwritten
    again = evaluate(cfg, questions_path=one)  # the same set goes to the same folder
    assert again.output_dir == first.output_dir


def test_cli_refuses_pool_in_one_line(tmp_path: Path) -> None:
    from tests.conftest import FIXTURES

    pool = tmp_path / "pool.jsonl"
    shutil.copy(FIXTURES / "protocol_questions.jsonl", pool)
    overrides = [f"splitting.pool={pool}", f"splitting.file={tmp_path / 'split.json'}", "splitting.salt=s"]
    env = {"FIXGRAPH_CONFIG_DIR": str(CONF), "PATH": "/usr/bin:/bin"}
    run = [sys.executable, "-m", "fixgraph.cli"]
    subprocess.run([*run, "split", *overrides], cwd=tmp_path, env=env, check=True, capture_output=True)
    done = subprocess.run(
        [*run, "evaluate", "split=pool", *overrides], cwd=tmp_path, capture_output=True, text=True, env=env
    )
    assert done.returncode == 2
    assert "fixgraph evaluate: error: split pool: 5 of 16 questions are locked test questions" in done.stderr
    assert "Traceback" not in done.stderr


# --- the record of looks ---------------------------------------------------------------------------


def test_deleting_the_ledger_does_not_reset_the_lock(protocol_config: Callable[..., DictConfig]) -> None:
    cfg = protocol_config([NO_TRACK])
    record_finalists(cfg, "s", ["dense"])
    run_test(cfg, "s")  # --no-track: no MLflow run, still a ledger entry and a numbered report
    paths = StudyPaths.of(cfg, "s")
    assert [(e["outcome"], e["look"], e["tracked"]) for e in attempts(paths)] == [("completed", 1, False)]
    paths.ledger.path.unlink()
    with pytest.raises(LedgerError, match=r"look 1 of study 's'.*does not record.*restore it from git"):
        run_test(cfg, "s", force_reason="try again with a clean slate")


def test_mlflow_runs_witness_looks_the_ledger_lost(protocol_config: Callable[..., DictConfig]) -> None:
    cfg = protocol_config()
    record_finalists(cfg, "m", ["dense"], track=False)
    _, result = run_test(cfg, "m")
    paths = StudyPaths.of(cfg, "m")
    paths.ledger.path.unlink()
    shutil.rmtree(paths.looks)  # both local witnesses gone: MLflow still knows
    with pytest.raises(LedgerError, match=rf"MLflow holds locked-test run\(s\) {result.mlflow_run_id}"):
        run_test(cfg, "m", force_reason="x")


def test_ledger_edits_break_the_chain(protocol_config: Callable[..., DictConfig]) -> None:
    cfg = protocol_config([NO_TRACK])
    record_finalists(cfg, "c", ["dense"])
    run_test(cfg, "c")
    with pytest.raises(ProtocolError):
        run_test(cfg, "c")  # refused, and recorded
    ledger = StudyPaths.of(cfg, "c").ledger.path
    lines = ledger.read_text().splitlines()
    entry = json.loads(lines[0])
    entry["forced"] = True  # rewrite history: the first look "was forced"
    ledger.write_text("\n".join([json.dumps(entry), *lines[1:]]) + "\n")
    with pytest.raises(LedgerError, match=r":1: entry 1 was edited"):
        run_test(cfg, "c", force_reason="x")
    ledger.write_text(lines[1] + "\n")  # or drop the first entry altogether
    with pytest.raises(LedgerError, match=r":1: entry 2 does not follow entry 0"):
        run_test(cfg, "c", force_reason="x")


def test_rewritten_split_history_is_caught_after_a_look(protocol_config: Callable[..., DictConfig]) -> None:
    cfg = protocol_config([NO_TRACK])
    record_finalists(cfg, "h", ["dense"])
    run_test(cfg, "h")
    split_file = Path(str(cfg.splitting.file))
    data = json.loads(split_file.read_text())
    data["history"][0]["reason"] = "a kinder story"
    data["history_digest"] = stable_hash(data["history"])  # a careful forger reseals it
    split_file.write_text(json.dumps(data))
    with pytest.raises(ProtocolError, match="history was rewritten since look 1"):
        run_test(cfg, "h", force_reason="x")


def test_legacy_test_log_is_migrated_not_reset(protocol_config: Callable[..., DictConfig]) -> None:
    cfg = protocol_config([NO_TRACK])
    record_finalists(cfg, "old", ["dense"])
    paths = StudyPaths.of(cfg, "old")
    common = {"finalists_sha256": "f" * 64, "study": "old", "git_sha": "abc", "git_dirty": "false"}
    legacy = [
        {**common, "status": "started", "forced": False, "force_reason": None, "time": "2026-11-30T11:34:27+00:00"},
        {**common, "status": "completed", "forced": False, "force_reason": None, "mlflow_run_id": "r1",
         "time": "2026-11-30T11:34:27+00:00"},
        {**common, "status": "started", "forced": True, "force_reason": "CI fix", "time": "2026-11-30T12:12:59+00:00"},
        {**common, "status": "completed", "forced": True, "force_reason": "CI fix", "mlflow_run_id": "r2",
         "time": "2026-11-30T12:12:59+00:00"},
    ]  # fmt: skip
    paths.legacy_log.write_text("".join(json.dumps(line) + "\n" for line in legacy))
    (paths.root / "test_report.json").write_text('{"look": "the second, which overwrote the first"}')
    with pytest.raises(ProtocolError, match="already scored on test"):
        run_test(cfg, "old")
    log = attempts(paths)
    assert [(e["attempt"], e["outcome"], e.get("look"), e.get("mlflow_run_id")) for e in log] == [
        (1, "completed", 1, "r1"),
        (2, "completed", 2, "r2"),
        (3, "refused", None, None),
    ]
    assert log[1]["force_reason"] == "CI fix" and not paths.legacy_log.exists()
    # the surviving (last) report is look 2's, now numbered; look 1's was lost before numbering
    assert log[1]["report"] == "test_looks/2/test_report.json" and log[0]["report"] is None
    assert "overwrote" in (paths.looks / "2" / "test_report.json").read_text()
    assert not (paths.root / "test_report.json").exists()


def test_finalists_recorded_before_the_new_keys_still_run(protocol_config: Callable[..., DictConfig]) -> None:
    """experiments/gnome-retrieval-baselines/finalists.yaml predates split.exclude_locked and
    evaluation.allow_unmapped: a forced look replays that config and must not fail on them."""
    import yaml

    from fixgraph.experiment.locked import _with_digest

    cfg = protocol_config([NO_TRACK])
    path, _ = record_finalists(cfg, "old-keys", ["dense"])
    record = yaml.safe_load(path.read_text())
    del record["config"]["split"]["exclude_locked"], record["config"]["evaluation"]["allow_unmapped"]
    path.write_text(yaml.safe_dump(_with_digest({k: v for k, v in record.items() if k != "digest"}), sort_keys=False))
    _, result = run_test(cfg, "old-keys")
    assert result.info["questions"] == 5
