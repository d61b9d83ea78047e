"""Obtain help pages shipped in a Debian package: from the installed path, else from the .deb.

The snapshot copied into the data folder is deterministic for a given package version (only the
pages and the XML they include, plus SOURCE.json with package and version), so `data.dvc` can pin
it and two machines that fetch the same version get the same hash.
"""

from __future__ import annotations

import fnmatch
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from fixgraph.io import atomic_dir, write_json

SNAPSHOT_PATTERNS = ("*.page", "*.xml")


class FetchError(RuntimeError):
    pass


@dataclass(frozen=True)
class DebianSource:
    package: str
    # pinned version, e.g. "43.0-2"; a glob ("3.46.4-2+deb12u*") accepts stable point releases, which
    # replace the previous build on the mirrors; "" accepts whatever apt offers
    version: str
    package_path: str  # folder inside the package, e.g. usr/share/help/C/gnome-help
    license: str = ""

    @property
    def installed_path(self) -> Path:
        return Path("/") / self.package_path


def version_matches(version: str, spec: str) -> bool:
    return not spec or fnmatch.fnmatchcase(version, spec)


def _is_glob(spec: str) -> bool:
    return any(c in spec for c in "*?[")


def _run(cmd: list[str], cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, check=False)


def installed_version(package: str) -> str | None:
    if shutil.which("dpkg-query") is None:
        return None
    result = _run(["dpkg-query", "-W", "-f=${Status} ${Version}", package])
    if result.returncode != 0 or "install ok installed" not in result.stdout:
        return None
    return result.stdout.rsplit(" ", 1)[-1].strip()


def download_deb(source: DebianSource, dest: Path) -> Path:
    """`apt-get download` the package into `dest`; refresh empty package lists once if root."""
    if shutil.which("apt-get") is None:
        raise FetchError("apt-get not found: this connector needs a Debian-based machine")
    pinned = source.version and not _is_glob(source.version)
    spec = f"{source.package}={source.version}" if pinned else source.package
    result = _run(["apt-get", "download", spec], cwd=dest)
    if result.returncode != 0 and os.geteuid() == 0:
        # A fresh machine has empty package lists; apt cannot locate anything until an update.
        _run(["apt-get", "update"])
        result = _run(["apt-get", "download", spec], cwd=dest)
    if result.returncode != 0:
        hint = "" if os.geteuid() == 0 else " (as root, run `apt-get update` first)"
        raise FetchError(f"apt-get download {spec} failed{hint}: {result.stderr.strip()}")
    debs = sorted(dest.glob(f"{source.package}_*.deb"))
    if not debs:
        raise FetchError(f"apt-get download {spec} produced no .deb in {dest}")
    version = deb_version(debs[-1])
    if not version_matches(version, source.version):
        raise FetchError(f"{source.package}: apt offers version {version}, which does not match {source.version!r}")
    return debs[-1]


def deb_version(deb: Path) -> str:
    result = _run(["dpkg-deb", "-f", str(deb), "Version"])
    if result.returncode != 0:
        raise FetchError(f"{deb}: cannot read its version: {result.stderr.strip()}")
    return result.stdout.strip()


def copy_snapshot(src: Path, dest: Path, source_info: dict[str, str]) -> int:
    """Copy the text files of a help folder and SOURCE.json into `dest` atomically (via a temp folder)."""
    files = sorted({p for pattern in SNAPSHOT_PATTERNS for p in src.glob(pattern) if p.is_file()})
    if not files:
        raise FetchError(f"{src}: no help pages ({', '.join(SNAPSHOT_PATTERNS)}) found")
    with atomic_dir(dest) as tmp:
        for path in files:
            shutil.copyfile(path, tmp / path.name)
        write_json(tmp / "SOURCE.json", source_info)
    return len(files)


def fetch_debian_snapshot(source: DebianSource, dest: Path) -> dict[str, str]:
    """Fill `dest` with the package's pages; returns what was fetched and how."""
    info = {"package": source.package, "package_path": source.package_path, "license": source.license}
    version = installed_version(source.package)
    if version is not None and source.installed_path.is_dir() and version_matches(version, source.version):
        copy_snapshot(source.installed_path, dest, {**info, "version": version})
        origin = str(source.installed_path)
    else:
        with tempfile.TemporaryDirectory(prefix="fixgraph-deb-") as tmpdir:
            tmp = Path(tmpdir)
            deb = download_deb(source, tmp)
            version = deb_version(deb)
            result = _run(["dpkg-deb", "-x", str(deb), str(tmp / "root")])
            if result.returncode != 0:
                raise FetchError(f"dpkg-deb -x {deb.name} failed: {result.stderr.strip()}")
            copy_snapshot(tmp / "root" / source.package_path, dest, {**info, "version": version})
            origin = deb.name
    return {**info, "version": version, "origin": origin}
