"""scripts/site.py: the course site is built from the stored sources and every page passes a browser check.

The browser check needs Chromium; CI installs Debian's (.ci/run), and there a missing browser is a failure,
not a skip. The check's own failure modes are tested on small hand-made sites.
"""
import json
import os
import shutil

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CACHE = os.path.join(REPO, "build", "site-cache")   # the MathJax download, shared with `make site`


def _need_browser(site):
    pytest.importorskip("sphinx") if not os.environ.get("CI") else None
    pytest.importorskip("playwright") if not os.environ.get("CI") else None
    if site.find_browser() is None and not os.environ.get("CI"):
        pytest.skip("no Chromium here (apt-get install chromium, or set GPUEDU_CHROMIUM); CI runs this check")


# --------------------------------------------------------------------------------------------- staging, no browser

def test_badges_become_links_and_links_resolve_inside_the_site_or_to_the_repository(site):
    paths = site.site_paths()
    text = ("[![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.example/x) "
            "see [lesson 01](lessons/01_first_kernel.ipynb#the-kernel), [the guide](docs/INSTRUCTORS.md), "
            "[licence](LICENSE), [tests](tests), [GPU](#using-a-gpu) and ![a figure](docs/figures/grid.svg)\n"
            "```\nliteral [x](not/a/file) stays\n```\n")
    out = site.rewrite_markdown(text, "README.md", paths)
    assert "[Open In Colab](https://colab.example/x)" in out and "colab-badge.svg" not in out
    assert "(lessons/01_first_kernel.ipynb#the-kernel)" in out and "(docs/INSTRUCTORS.md)" in out
    assert f"({site.REPOSITORY}/blob/main/LICENSE)" in out and f"({site.REPOSITORY}/tree/main/tests)" in out
    assert "(#using-a-gpu)" in out and "(docs/figures/grid.svg)" in out
    assert "literal [x](not/a/file) stays" in out
    # seen from docs/, the front page is index.md and the lessons are one folder up
    assert site.rewrite_markdown("[home](../README.md)", "docs/INSTRUCTORS.md", paths) == "[home](../index.md)"


def test_a_link_to_nothing_stops_the_build_with_the_file_and_the_link(site):
    with pytest.raises(site.SiteError, match=r"README.md links to 'lessons/99_missing.ipynb'.*fix the link"):
        site.rewrite_markdown("[x](lessons/99_missing.ipynb)", "README.md", site.site_paths())


def test_a_staged_lesson_shows_its_figures_as_files(site, tmp_path):
    paths = site.site_paths()
    lesson = "lessons/01_first_kernel.ipynb"
    (tmp_path / "lessons").mkdir()
    site.stage_notebook(lesson, paths, str(tmp_path))
    nb = json.loads((tmp_path / lesson).read_text(encoding="utf-8"))
    markdown = "".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown")
    assert "(figures/grid.svg)" in markdown and "attachment:" not in markdown
    assert not any("attachments" in c for c in nb["cells"])
    assert (tmp_path / "lessons" / "figures" / "grid.svg").read_text().startswith("<svg")


def test_mathjax_that_does_not_match_the_pinned_hash_is_refused(site, tmp_path, monkeypatch):
    (tmp_path / f"mathjax-{site.MATHJAX_VERSION}.tgz").write_bytes(b"not mathjax")
    monkeypatch.setattr(site, "_npm_pack", lambda cache: b"tampered")
    with pytest.raises(site.SiteError, match="did not match the pinned sha512"):
        site.fetch_mathjax(str(tmp_path))


def test_no_network_and_no_cached_copy_says_where_to_put_mathjax(site, tmp_path, monkeypatch):
    def offline(cache):
        raise OSError("npm ERR! network unreachable")
    monkeypatch.setattr(site, "_npm_pack", offline)
    with pytest.raises(site.SiteError, match=r"npm pack mathjax@3\.2\.2.*mathjax-3\.2\.2\.tgz"):
        site.fetch_mathjax(str(tmp_path))
    monkeypatch.undo()                                          # no npm at all: the same advice, and why
    monkeypatch.setenv("PATH", str(tmp_path / "nowhere"))
    with pytest.raises(site.SiteError, match=r"npm is not installed \(apt install npm\).*npm pack mathjax@3\.2\.2"):
        site.fetch_mathjax(str(tmp_path))


def test_mathjax_is_fetched_by_its_name_with_npm_and_matches_the_pin(site, tmp_path):
    if shutil.which("npm") is None:
        pytest.skip("npm is not installed")
    data = site.fetch_mathjax(str(tmp_path))            # nothing cached: npm pack mathjax@3.2.2
    assert (tmp_path / f"mathjax-{site.MATHJAX_VERSION}.tgz").read_bytes() == data
    assert not [p for p in tmp_path.iterdir() if p.is_dir()]   # npm's own folder went


# ------------------------------------------------------------------------------------------------ the whole site

@pytest.fixture(scope="module")
def built(site, tmp_path_factory):
    _need_browser(site)
    out = str(tmp_path_factory.mktemp("site") / "html")
    site.build(out, CACHE)
    return out


@pytest.mark.slow
def test_the_course_site_builds_and_every_page_passes_the_browser_check(site, built):
    summary, problems = site.check(built)
    assert problems == []
    lessons = [p for p in site.pages_of(built) if p.startswith("lessons/")]
    assert len(lessons) == len(site.lesson_files())
    for page in ("index.html", "docs/pictures.html", "docs/INSTRUCTORS.html", "ARCHITECTURE.html"):
        assert os.path.exists(os.path.join(built, page)), page
    assert summary["pages"] >= len(lessons) + 4
    assert summary["formulas"] > 100          # the lessons' math, typeset by the site's own MathJax
    assert summary["images"] >= 12            # the figures twice (lessons and pictures page) and the plots
    assert summary["internal_links"] > 100


@pytest.mark.slow
def test_the_check_finds_what_is_broken(site, built, tmp_path):
    bad = tmp_path / "bad"
    bad.mkdir()
    shutil.copytree(os.path.join(built, "_static", "mathjax"), bad / "_static" / "mathjax")
    body = "<p>" + "words " * 60 + "</p>"
    (bad / "index.html").write_text(
        "<html><head><script src='_static/mathjax/tex-svg.js'></script></head><body><h1>Home</h1>" + body +
        "<a href='missing.html'>gone</a> <a href='other.html#nowhere'>no anchor</a> <a href='other.html#here'>ok</a>"
        "<img src='nothing.png'><img src='https://example.com/badge.svg'>"
        "<span class='math'>\\(\\frac{x}\\)</span>"
        "<script>undefinedFunction()</script></body></html>")
    (bad / "other.html").write_text("<html><body><h1 id='here'>Other</h1>" + body +
                                    "<span class='math'>\\(x^2\\)</span></body></html>")
    summary, problems = site.check(str(bad))
    text = "\n".join(problems)
    assert "index.html: broken link to missing.html" in text
    assert "link to other.html#nowhere, an anchor that page does not have" in text
    assert "other.html#here" not in text
    assert "index.html: image did not load: nothing.png" in text
    assert "requested https://example.com/badge.svg, outside the site" in text
    assert "formulas typeset as TeX errors" in text
    assert "other.html: MathJax typeset 0 of 1 formulas" in text
    assert "JavaScript error" in text and "undefinedFunction" in text
    assert summary["pages"] == 2


def test_checking_a_folder_with_no_site_says_to_build_it_first(site, tmp_path):
    with pytest.raises(site.SiteError, match="no index.html: build the site first"):
        site.check(str(tmp_path))
