"""Mallard rendering: what Yelp shows, with typed spans, links and exact offsets."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from omegaconf import DictConfig

from fixgraph.config import ConfigError
from fixgraph.corpus.debian import DebianSource
from fixgraph.corpus.mallard import MallardError, MallardOptions, collect_titles, condition_holds, parse_page
from fixgraph.corpus.models import Document
from fixgraph.corpus.sources import MallardCorpus, MissingCorpusError


def parse(mallard_dir: Path, page: str) -> Document:
    paths = sorted(mallard_dir.glob("*.page"))
    return parse_page(mallard_dir / f"{page}.page", mallard_dir, "test", collect_titles(paths), MallardOptions())


def test_comment_dropped_and_classic_branch_not_rendered(mallard_dir: Path) -> None:
    doc = parse(mallard_dir, "wifi-trouble")
    assert "TODO" not in doc.text
    assert "Classic-only" not in doc.text
    assert "Only 2.4 GHz networks are supported" in doc.text  # unknown token (ubuntu) keeps content


def test_guiseq_and_keyseq_render_as_yelp_shows_them(mallard_dir: Path) -> None:
    doc = parse(mallard_dir, "wifi-trouble")
    assert "Open Settings ▸ Network and press Ctrl+R to rescan." in doc.text


def test_empty_link_displays_target_title(mallard_dir: Path) -> None:
    doc = parse(mallard_dir, "wifi-trouble")
    assert "See Reset the hub for a last resort." in doc.text


def test_inline_spans_point_at_their_text(mallard_dir: Path) -> None:
    doc = parse(mallard_dir, "reset-hub")
    kinds = {(s.kind, s.text) for s in doc.spans}
    assert ("gui", "Reset") in kinds
    assert ("cmd", "hubctl pair --all") in kinds
    for span in doc.spans:
        assert doc.text[span.start : span.end] == span.text


def test_links_carry_anchor_text_sentence_and_offsets(mallard_dir: Path) -> None:
    doc = parse(mallard_dir, "wifi-trouble")
    inline = [link for link in doc.links if link.link_type == "inline"]
    reset = next(link for link in inline if link.anchor_text == "reset the hub")
    assert (reset.target_doc, reset.target_section) == ("reset-hub", "factory")
    assert reset.sentence == "If the light stays amber, reset the hub."
    assert reset.start is not None and reset.end is not None
    assert doc.text[reset.start : reset.end] == "reset the hub"
    kinds = {(link.link_type, link.target_doc) for link in doc.links}
    assert ("guide", "index") in kinds and ("seealso", "reset-hub") in kinds


def test_sections_blocks_and_units(mallard_dir: Path) -> None:
    doc = parse(mallard_dir, "wifi-trouble")
    section = next(s for s in doc.sections if s.id == "interference")
    assert section.heading_path == ["Interference"]
    assert doc.text[section.start : section.end].startswith("Interference\n")
    steps = [b for b in doc.blocks if b.kind == "step"]
    # the second step has two paragraphs: they share one unit, which chunking never splits
    assert len(steps) == 4 and steps[1].unit == steps[2].unit != steps[0].unit
    for block in doc.blocks:
        assert doc.text[block.start : block.end].strip() == doc.text[block.start : block.end]


def test_license_from_xinclude_and_attribution(mallard_dir: Path) -> None:
    doc = parse(mallard_dir, "wifi-trouble")
    assert doc.license == "https://creativecommons.org/licenses/by-sa/3.0/"
    assert doc.attribution == "Test Writer"
    assert doc.summary == "What to do when the hub will not join your wireless network."


@pytest.mark.parametrize(
    ("expr", "expected"),
    [
        ("platform:gnome-classic", False),
        ("!platform:gnome-classic", True),
        ("!platform:gnome-classic !platform:ubuntu", True),
        ("platform:gnome-classic, platform:gnome", True),
        ("platform:gnome-classic target:html", False),
        ("!platform:gnome", False),
        (None, True),
    ],
)
def test_condition_semantics(expr: str | None, expected: bool) -> None:
    assert condition_holds(expr, MallardOptions()) is expected


def test_malformed_page_is_reported_not_fatal(mallard_dir: Path) -> None:
    result = MallardCorpus(name="t", snapshot_dir=str(mallard_dir)).parse()
    assert {d.id for d in result.documents} == {"index", "wifi-trouble", "reset-hub", "battery"}
    assert len(result.problems) == 1
    assert result.problems[0].path == "broken.page" and "not well-formed" in result.problems[0].reason


def test_malformed_page_error_names_the_file(mallard_dir: Path) -> None:
    with pytest.raises(MallardError, match=r"broken\.page"):
        parse_page(mallard_dir / "broken.page", mallard_dir, "t", {}, MallardOptions())


def test_missing_corpus_names_the_folder_and_the_fetch_command(tmp_path: Path) -> None:
    corpus = MallardCorpus(name="gnome_help", snapshot_dir=str(tmp_path / "absent"), package="gnome-user-docs")
    with pytest.raises(
        MissingCorpusError, match=rf"folder {tmp_path}/absent does not exist.*fixgraph fetch corpus=gnome_help"
    ):
        corpus.parse()


def test_missing_local_folder_names_the_setting_not_fetch(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    corpus = MallardCorpus(name="mallard_folder", snapshot_dir=str(tmp_path / "empty"))
    with pytest.raises(MissingCorpusError) as err:
        corpus.parse()
    message = str(err.value)
    assert f"folder {tmp_path}/empty has no Mallard pages (*.page)" in message
    assert "fixgraph ingest corpus=mallard_folder corpus.snapshot_dir=" in message and "fetch" not in message


def test_ingest_fetches_a_missing_pinned_corpus_only_when_told(
    fixture_config: Callable[..., DictConfig], mallard_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from fixgraph.pipeline.stages import ingest

    fetched: list[Path] = []

    def fake_fetch(source: DebianSource, dest: Path) -> dict[str, str]:  # the package's pages, no network
        fetched.append(dest)
        shutil.copytree(mallard_dir, dest)
        return {"package": source.package}

    monkeypatch.setattr("fixgraph.corpus.sources.fetch_debian_snapshot", fake_fetch)
    absent = tmp_path / "data" / "pinned"
    pinned = [f"corpus.snapshot_dir={absent}", "+corpus.package=some-help", "+corpus.version=1.0"]
    with pytest.raises(MissingCorpusError, match="fixgraph fetch corpus=mallard_folder"):
        ingest(fixture_config(pinned))
    assert not fetched and not absent.exists()
    done = ingest(fixture_config([*pinned, "+corpus.auto_fetch=true"]))
    assert fetched == [absent] and done.status == "built" and done.info["corpus_hash"]
    # auto_fetch says how to get the pages, not what they are: the same stage key without it
    assert ingest(fixture_config(pinned)).status == "cached"
    # a corpus read in place is never fetched (its folder is the user's data), and a value must be a bool
    (tmp_path / "empty").mkdir()
    with pytest.raises(ConfigError, match="auto_fetch is only for a corpus pinned to a package"):
        ingest(fixture_config([f"corpus.snapshot_dir={tmp_path / 'empty'}", "+corpus.auto_fetch=true"]))
    with pytest.raises(ConfigError, match="auto_fetch must be true or false, got 'false'"):
        ingest(fixture_config([*pinned, "+corpus.auto_fetch='false'"]))
    assert fetched == [absent]
