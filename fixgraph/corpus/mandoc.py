"""mandoc, the roff renderer we parse man pages with: find it, or unpack Debian's package without root.

We never parse raw roff ourselves: mandoc (the BSD man page toolkit, Debian package `mandoc`) renders
each page to semantic HTML (sections, subsections, tagged lists, cross references), and that HTML is
what the man page connector reads. CI installs the package with apt; elsewhere `ensure_mandoc()`
extracts the same package from its .deb into a cache folder (`apt-get download` needs no root).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from fixgraph.corpus.debian import DebianSource, FetchError, download_deb

MANDOC_PACKAGE = DebianSource(package="mandoc", version="1.14.*", package_path="usr/bin")


def default_tools_dir() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "fixgraph" / "tools"


def find_mandoc(configured: str = "", tools_dir: Path | None = None) -> Path | None:
    """The configured binary, else `mandoc` on PATH, else one unpacked earlier into `tools_dir`."""
    if configured:
        return Path(configured) if Path(configured).is_file() else None
    on_path = shutil.which("mandoc")
    if on_path:
        return Path(on_path)
    unpacked = (tools_dir or default_tools_dir()) / "mandoc" / "usr" / "bin" / "mandoc"
    return unpacked if unpacked.is_file() else None


def ensure_mandoc(configured: str = "", tools_dir: Path | None = None) -> Path:
    """Find mandoc, or unpack it from Debian's package into `tools_dir`; raise FetchError naming the fix."""
    found = find_mandoc(configured, tools_dir)
    if found is not None:
        return found
    if configured:
        raise FetchError(f"mandoc not found at {configured} (corpus.mandoc)")
    target = (tools_dir or default_tools_dir()) / "mandoc"
    with tempfile.TemporaryDirectory(prefix="fixgraph-mandoc-") as tmpdir:
        tmp = Path(tmpdir)
        try:
            deb = download_deb(MANDOC_PACKAGE, tmp)
        except FetchError as exc:
            raise FetchError(f"mandoc is needed to read man pages: install it (apt-get install mandoc); {exc}") from exc
        unpacked = tmp / "root"
        done = subprocess.run(["dpkg-deb", "-x", str(deb), str(unpacked)], capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise FetchError(f"dpkg-deb -x {deb.name} failed: {done.stderr.strip()}")
        target.parent.mkdir(parents=True, exist_ok=True)
        if target.exists():
            shutil.rmtree(target)
        shutil.move(str(unpacked), target)
    binary = target / "usr" / "bin" / "mandoc"
    if not binary.is_file():
        raise FetchError(f"{deb.name} holds no usr/bin/mandoc")
    return binary


@dataclass
class Rendered:
    html: bytes
    messages: list[str]  # mandoc's own diagnostics (ERROR / UNSUPP level) about the page
    status: int


def render_html(mandoc: Path, page: Path, cwd: Path) -> Rendered:
    """Render one page (plain or .gz) to an HTML fragment. `cwd` is the manual root, for `.so` requests.

    Exit status 0-4 means rendered (3: roff errors mandoc recovered from; 4: unsupported requests it
    skipped); 5 and up means mandoc could not run on it.
    """
    done = subprocess.run(
        [str(mandoc), "-T", "html", "-O", "fragment", "-W", "error", str(page.resolve())],
        cwd=cwd,
        capture_output=True,
        check=False,
        timeout=60,
    )
    prefix = f"mandoc: {page.resolve()}:"
    messages = [
        line.removeprefix(prefix).strip()  # "546:2: UNSUPP: ignoring macro in table: BR ..."
        for line in done.stderr.decode("utf-8", "replace").splitlines()
        if line.strip() and "see above the output" not in line
    ]
    return Rendered(done.stdout, messages, done.returncode)
