"""scripts/figures.py: the diagrams are drawn from code, stored as SVG files and carried by the lessons."""
import base64
import glob
import json
import os
import xml.etree.ElementTree as ET

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

SVG = "{http://www.w3.org/2000/svg}"


def test_files_and_lessons_are_in_step_with_the_code(figures):
    assert figures.main(["--check"]) == 0, "run python scripts/figures.py"


def test_every_figure_is_an_svg_with_a_title_and_a_size(figures):
    for name, text in figures.render().items():
        root = ET.fromstring(text)
        assert root.tag == SVG + "svg", name
        assert int(root.get("width")) > 300 and int(root.get("height")) > 150, name
        assert root.find(SVG + "title").text.strip(), f"{name} has no title for screen readers"
        assert len(root.findall(f".//{SVG}text")) >= 5, f"{name} says almost nothing"


def _attachments():
    shown = {}
    for path in sorted(glob.glob(os.path.join(REPO, "lessons", "[0-9][0-9]_*.ipynb"))):
        with open(path, encoding="utf-8") as f:
            nb = json.load(f)
        for cell in nb["cells"]:
            for name, bundle in cell.get("attachments", {}).items():
                shown.setdefault(name, []).append((os.path.basename(path), bundle))
    return shown


def test_every_figure_is_shown_by_a_lesson_and_the_pictures_page(figures):
    shown = _attachments()
    with open(os.path.join(REPO, "docs", "pictures.md"), encoding="utf-8") as f:
        pictures = f.read()
    for name in figures.ALL:
        assert name in shown, f"no lesson shows {name}"
        assert f"(figures/{name})" in pictures, f"docs/pictures.md does not show {name}"


def test_a_lesson_carries_the_figure_as_the_code_draws_it(figures):
    drawn = figures.render()
    for name, uses in _attachments().items():
        for lesson, bundle in uses:
            data = "".join(bundle["image/svg+xml"])
            assert base64.b64decode(data).decode() == drawn[name], f"{lesson} carries an old {name}"


def test_a_markdown_cell_that_shows_an_unknown_figure_is_refused(figures):
    nb = {"cells": [{"cell_type": "markdown", "metadata": {}, "source": "![x](attachment:nowhere.svg)"}]}
    with pytest.raises(ValueError, match="nowhere.svg.*does not draw"):
        figures.embed(nb, figures.render())


def test_embedding_adds_and_removes_attachments(figures):
    drawn = figures.render()
    nb = {"cells": [{"cell_type": "markdown", "metadata": {}, "source": ["see\n", "![g](attachment:grid.svg)"]},
                    {"cell_type": "markdown", "metadata": {}, "source": "no figure now",
                     "attachments": {"warps.svg": figures.attachment(drawn["warps.svg"])}}]}
    assert figures.embed(nb, drawn) == ["grid.svg"]
    assert set(nb["cells"][0]["attachments"]) == {"grid.svg"}
    assert "attachments" not in nb["cells"][1]


def test_the_occupancy_figure_states_what_the_library_computes(figures):
    from gpuedu.profiler.occupancy import theoretical_occupancy
    occ = theoretical_occupancy("H100", **figures.OCCUPANCY_EXAMPLE)
    text = figures.occupancy()
    assert f"{occ.percent:.0f}% theoretical occupancy, limited by {occ.limiter}" in text
    for limit, blocks in occ.limits.items():
        assert f"{blocks} blocks" in text, limit
