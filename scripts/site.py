"""Build the course site from what the repository stores, and check every page in a real browser.

    python scripts/site.py build [--out build/site]   # stage README, docs and lessons, then sphinx-build them
    python scripts/site.py check [--out build/site]   # open every page in headless Chromium and check it
    python scripts/site.py all   [--out build/site]   # both: what `make site` runs

The build executes nothing: the lessons are shown with the outputs they store (the emulator's, which nbval checks),
README.md becomes the front page, ``docs/pictures.md`` gathers the figures. Staging rewrites what only makes sense
in the repository: a link to a file that is not a page of the site (``LICENSE``, ``gpuedu/launch.py``) points at the
repository on GitHub, the lessons' SVG attachments become files, and the Colab and Binder badges (images from other
sites) become plain links, so the site needs nothing from the network to be read. MathJax 3 is fetched once from
npm (`npm pack`, its checksum pinned below) and served from the site itself.

The check opens every page with Playwright driving Chromium (Debian's ``chromium``, or any Chromium-based browser
named by ``GPUEDU_CHROMIUM``) and fails on: a page that does not load or has no heading and text, a JavaScript error,
a request that fails or leaves the site, an image that does not decode, a formula MathJax did not typeset (or
typeset as an error), a docutils error left in the page, or a link to a page, file or ``#anchor`` that does not
exist. Links to other sites are counted, not followed (the check runs offline).
"""
import argparse
import base64
import glob
import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from urllib.parse import unquote, urlsplit

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from gpuedu import __version__  # noqa: E402
from gpuedu.tools.course import REPOSITORY  # noqa: E402

#: MathJax 3.2.2 as npm fetches it, and the integrity hash npm publishes for it.
MATHJAX_VERSION = "3.2.2"
MATHJAX_PACKAGE = f"mathjax@{MATHJAX_VERSION}"   # fetched by name with npm, never by a registry's address
MATHJAX_SHA512 = "Bt+SSVU8eBG27zChVewOicYs7Xsdt40qm4+UpHyX7k0/O9NliPc+x77k1/FEsPsjKPZGJvtRZM1vO+geW0OhGw=="

#: The pages besides the lessons: repository path -> path in the site's sources.
PAGES = {"README.md": "index.md", "ARCHITECTURE.md": "ARCHITECTURE.md",
         "docs/INSTRUCTORS.md": "docs/INSTRUCTORS.md", "docs/pictures.md": "docs/pictures.md"}
TOC = ["lessons/*", "docs/pictures", "docs/INSTRUCTORS", "ARCHITECTURE"]

_BADGE = re.compile(r"\[!\[([^\]]*)\]\((?:https?://[^)\s]+)\)\]\(([^)\s]+)\)")
_LINK = re.compile(r"(!?\[[^\]]*\])\(([^)\s]+)\)")
_FENCE = re.compile(r"^(```|~~~).*?^\1[ \t]*$", re.S | re.M)


class SiteError(Exception):
    """What went wrong, in words that say how to fix it."""


def lesson_files():
    return sorted(os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, "lessons", "[0-9][0-9]_*.ipynb")))


def site_paths():
    """Every repository file the site carries, mapped to its path in the site's sources."""
    paths = dict(PAGES)
    paths.update({p: p for p in lesson_files()})
    paths.update({os.path.relpath(p, ROOT): os.path.relpath(p, ROOT)
                  for p in glob.glob(os.path.join(ROOT, "docs", "figures", "*.svg"))})
    return paths


def _rewrite_target(target, source, paths):
    if target.startswith(("http://", "https://", "mailto:", "#", "attachment:")):
        return target
    path, _, fragment = target.partition("#")
    in_repo = os.path.normpath(os.path.join(os.path.dirname(source), unquote(path)))
    anchor = "#" + fragment if fragment else ""
    if in_repo in paths:
        staged = os.path.relpath(paths[in_repo], os.path.dirname(paths[source]) or ".")
        return staged + anchor
    if os.path.exists(os.path.join(ROOT, in_repo)):
        kind = "tree" if os.path.isdir(os.path.join(ROOT, in_repo)) else "blob"
        return f"{REPOSITORY}/{kind}/main/{in_repo}{anchor}"
    raise SiteError(f"{source} links to {target!r}, which is not in the repository: fix the link")


def rewrite_markdown(text, source, paths):
    """``text`` of the repository file ``source`` as the site shows it: badges as links, links that resolve."""
    def rewrite(chunk):
        chunk = _BADGE.sub(lambda m: f"[{m.group(1)}]({m.group(2)})", chunk)
        return _LINK.sub(lambda m: f"{m.group(1)}({_rewrite_target(m.group(2), source, paths)})", chunk)
    out, last = [], 0
    for fence in _FENCE.finditer(text):   # code blocks are shown as they are
        out += [rewrite(text[last:fence.start()]), fence.group(0)]
        last = fence.end()
    return "".join(out + [rewrite(text[last:])])


def stage_notebook(path, paths, dest):
    """Copy a lesson into the site's sources: links rewritten, attachments written out as files beside it."""
    with open(os.path.join(ROOT, path), encoding="utf-8") as f:
        nb = json.load(f)
    folder = os.path.join(dest, os.path.dirname(paths[path]), "figures")
    for cell in nb["cells"]:
        if cell["cell_type"] != "markdown":
            continue
        text = rewrite_markdown("".join(cell["source"]), path, paths)
        for name, bundle in cell.pop("attachments", {}).items():
            mime, data = next(iter(bundle.items()))
            data = "".join(data) if isinstance(data, list) else data
            if not mime.startswith("image/"):
                raise SiteError(f"{path}: attachment {name} is {mime}, not an image")
            os.makedirs(folder, exist_ok=True)
            with open(os.path.join(folder, name), "wb") as out:
                out.write(base64.b64decode(data))
            text = text.replace(f"(attachment:{name})", f"(figures/{name})")
        if "(attachment:" in text:
            raise SiteError(f"{path}: a markdown cell shows an attachment the cell does not carry")
        cell["source"] = text
    with open(os.path.join(dest, paths[path]), "w", encoding="utf-8") as f:
        json.dump(nb, f, indent=1, ensure_ascii=False)


def _npm_pack(cache):
    """``npm pack mathjax@VERSION`` into ``cache``: the package's tarball, as npm fetches it; its bytes."""
    npm = shutil.which("npm")
    if npm is None:
        raise OSError("npm is not installed (apt install npm)")
    with tempfile.TemporaryDirectory(dir=cache) as folder:
        done = subprocess.run([npm, "pack", MATHJAX_PACKAGE, "--pack-destination", folder, "--silent"],
                              capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL, cwd=folder)
        packed = os.path.join(folder, f"mathjax-{MATHJAX_VERSION}.tgz")
        if done.returncode != 0 or not os.path.isfile(packed):
            last = (done.stderr or done.stdout).strip().splitlines()
            raise OSError(last[-1] if last else f"npm pack exited with {done.returncode}")
        with open(packed, "rb") as f:
            return f.read()


def fetch_mathjax(cache):
    """The MathJax tarball, from ``cache`` or npm, checked against the pinned hash."""
    os.makedirs(cache, exist_ok=True)
    tarball = os.path.join(cache, f"mathjax-{MATHJAX_VERSION}.tgz")

    def good(data):
        return base64.b64encode(hashlib.sha512(data).digest()).decode() == MATHJAX_SHA512
    if os.path.exists(tarball):
        with open(tarball, "rb") as f:
            data = f.read()
        if good(data):
            return data
    try:
        data = _npm_pack(cache)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise SiteError(f"could not fetch MathJax {MATHJAX_VERSION} with npm ({e}); the site serves its "
                        f"own copy: put that file (`npm pack {MATHJAX_PACKAGE}`) at {tarball}") from None
    if not good(data):
        raise SiteError(f"npm's {MATHJAX_PACKAGE} did not match the pinned sha512 ({MATHJAX_SHA512}): "
                        "refusing to serve it")
    with open(tarball + ".part", "wb") as f:
        f.write(data)
    os.replace(tarball + ".part", tarball)
    return data


def stage(dest, cache):
    """Write the site's sources to ``dest``: pages, lessons, figures, conf.py and MathJax."""
    if os.path.exists(dest):
        shutil.rmtree(dest)
    paths = site_paths()
    for path, staged in paths.items():
        os.makedirs(os.path.join(dest, os.path.dirname(staged)), exist_ok=True)
        if path.endswith(".ipynb"):
            stage_notebook(path, paths, dest)
        elif path.endswith(".md"):
            with open(os.path.join(ROOT, path), encoding="utf-8") as f:
                text = rewrite_markdown(f.read(), path, paths)
            if staged == "index.md":   # the front page carries the site's table of contents
                text += "\n```{toctree}\n:hidden:\n:glob:\n:maxdepth: 1\n\n" + "\n".join(TOC) + "\n```\n"
            with open(os.path.join(dest, staged), "w", encoding="utf-8") as f:
                f.write(text)
        else:
            shutil.copyfile(os.path.join(ROOT, path), os.path.join(dest, staged))
    shutil.copyfile(os.path.join(ROOT, "docs", "conf.py"), os.path.join(dest, "conf.py"))
    static = os.path.join(dest, "_static", "mathjax")
    os.makedirs(static)
    with tarfile.open(fileobj=io.BytesIO(fetch_mathjax(cache)), mode="r:gz") as tar:
        for member, name in (("package/es5/tex-svg.js", "tex-svg.js"), ("package/LICENSE", "LICENSE")):
            with open(os.path.join(static, name), "wb") as f:
                f.write(tar.extractfile(member).read())


def build(out, cache, jobs="1"):
    """Stage the sources beside ``out`` and build the HTML site into ``out``; returns ``out``."""
    sources = out.rstrip("/") + "-src"
    stage(sources, cache)
    command = [sys.executable, "-m", "sphinx", "-b", "html", "-q", "-W", "--keep-going", "-j", str(jobs),
               "-D", f"version={__version__}", "-D", f"release={__version__}", "-D", f"html_title=gpuedu {__version__}",
               "-d", sources + "-doctrees", sources, out]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode:
        raise SiteError("sphinx-build failed (warnings count as errors):\n" + (done.stderr or done.stdout).strip())
    return out


# ---------------------------------------------------------------------------------------------------- the check

_PAGE_STATE = """() => {
  const text = (document.querySelector('article') || document.body).innerText || '';
  const img = [...document.images].filter(i => !(i.complete && i.naturalWidth > 0)).map(i => i.getAttribute('src'));
  const math = document.querySelectorAll('span.math, div.math').length;
  const typeset = document.querySelectorAll('mjx-container').length;
  const mathErrors = document.querySelectorAll('mjx-merror, [data-mml-node="merror"]').length;
  const problems = [...document.querySelectorAll('.system-message, .problematic')].map(e => e.innerText.slice(0, 120));
  const links = [...document.querySelectorAll('a[href]')].map(a => a.href);
  const ids = [...document.querySelectorAll('[id]')].map(e => e.id);
  const heading = !!document.querySelector('h1');
  return {text: text.length, img, images: document.images.length, math, typeset, mathErrors, problems, links, ids,
          heading};
}"""


def find_browser():
    """A Chromium-based browser to drive: GPUEDU_CHROMIUM, or one on PATH; None lets Playwright use its own."""
    named = os.environ.get("GPUEDU_CHROMIUM")
    if named:
        if not (os.path.isfile(named) and os.access(named, os.X_OK)):
            raise SiteError(f"GPUEDU_CHROMIUM={named!r} is not an executable file: point it at chromium's binary")
        return named
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        found = shutil.which(name)
        if found:
            return found
    return None


def pages_of(site):
    skip = ("_static", "_sources", "_images", "_downloads")
    return sorted(os.path.relpath(p, site) for p in glob.glob(os.path.join(site, "**", "*.html"), recursive=True)
                  if not os.path.relpath(p, site).startswith(skip))


def check(site, timeout_ms=30000):
    """Open every page of the built ``site``; returns (summary dict, list of problems)."""
    site = os.path.abspath(site)
    pages = pages_of(site)
    if "index.html" not in pages:     # said first: without a site, installing Playwright would not help
        raise SiteError(f"{site} holds no index.html: build the site first (python scripts/site.py build)")
    try:
        from playwright.sync_api import Error as PlaywrightError
        from playwright.sync_api import sync_playwright
    except ImportError:
        raise SiteError("the browser check needs Playwright: pip install -e '.[site]'") from None
    problems, states, outside = [], {}, []
    browser_path = find_browser()
    with sync_playwright() as p:
        try:
            browser = p.chromium.launch(executable_path=browser_path, args=["--no-sandbox", "--disable-gpu"])
        except PlaywrightError as e:
            raise SiteError("could not start Chromium for the site check: install Debian's `chromium` "
                            "(apt-get install chromium), set GPUEDU_CHROMIUM to a Chromium binary, or run "
                            f"`python -m playwright install chromium` ({str(e).splitlines()[0]})") from None
        context = browser.new_context(viewport={"width": 1280, "height": 900})

        def route(r):
            url = r.request.url
            if url.startswith(("file://", "data:", "blob:")):
                r.continue_()
            else:
                outside.append((current[0], url))
                r.abort()
        current = [""]
        context.route("**/*", route)
        page = context.new_page()
        errors = []
        page.on("pageerror", lambda e: errors.append(f"JavaScript error: {e}"))
        page.on("console", lambda m: errors.append(f"console error: {m.text}") if m.type == "error" else None)
        page.on("requestfailed", lambda r: errors.append(f"request failed: {r.url} ({r.failure})"))
        for name in pages:
            current[0] = name
            errors.clear()
            url = "file://" + os.path.join(site, name)
            try:
                page.goto(url, wait_until="load", timeout=timeout_ms)
                if page.evaluate("() => !!(window.MathJax && MathJax.startup && MathJax.startup.promise)"):
                    page.evaluate("() => MathJax.startup.promise")
                state = page.evaluate(_PAGE_STATE)
            except PlaywrightError as e:
                problems.append(f"{name}: did not load ({str(e).splitlines()[0]})")
                continue
            states[name] = state
            problems += [f"{name}: {e}" for e in errors]
            if name not in ("search.html", "genindex.html") and (not state["heading"] or state["text"] < 200):
                problems.append(f"{name}: no heading or almost no text ({state['text']} characters)")
            problems += [f"{name}: image did not load: {src}" for src in state["img"]]
            if state["math"] and state["typeset"] < state["math"]:
                problems.append(f"{name}: MathJax typeset {state['typeset']} of {state['math']} formulas")
            if state["mathErrors"]:
                problems.append(f"{name}: {state['mathErrors']} formulas typeset as TeX errors")
            problems += [f"{name}: docutils error in the page: {text}" for text in state["problems"]]
        browser.close()
    problems += [f"{name}: requested {url}, outside the site (the site must read offline)" for name, url in outside]
    internal = external = 0
    for name, state in states.items():
        for href in state["links"]:
            parts = urlsplit(href)
            if parts.scheme in ("http", "https", "mailto"):
                external += 1
                continue
            if parts.scheme != "file":
                problems.append(f"{name}: link with an unexpected scheme: {href}")
                continue
            internal += 1
            target = unquote(parts.path)
            if not os.path.exists(target):
                problems.append(f"{name}: broken link to {os.path.relpath(target, site)}")
                continue
            rel = os.path.relpath(target, site)
            if parts.fragment and rel in states and unquote(parts.fragment) not in states[rel]["ids"]:
                problems.append(f"{name}: link to {rel}#{parts.fragment}, an anchor that page does not have")
    summary = {"pages": len(states), "images": sum(s["images"] for s in states.values()),
               "formulas": sum(s["typeset"] for s in states.values()), "internal_links": internal,
               "external_links": external, "browser": browser_path or "playwright's chromium"}
    return summary, problems


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python scripts/site.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("what", choices=("build", "check", "all"))
    parser.add_argument("--out", default=os.path.join(ROOT, "build", "site"), help="where the HTML goes")
    parser.add_argument("--cache", default=os.path.join(ROOT, "build", "site-cache"),
                        help="where the MathJax download is kept")
    parser.add_argument("--jobs", default="1", help="sphinx-build's -j")
    args = parser.parse_args(argv)
    try:
        if args.what in ("build", "all"):
            build(args.out, args.cache, args.jobs)
            print(f"site built: {os.path.join(args.out, 'index.html')}")
        if args.what in ("check", "all"):
            summary, problems = check(args.out)
            print(f"checked {summary['pages']} pages in {summary['browser']}: {summary['images']} images, "
                  f"{summary['formulas']} formulas typeset, {summary['internal_links']} links inside the site, "
                  f"{summary['external_links']} to other sites (not followed)")
            if problems:
                print(f"{len(problems)} problems:\n  " + "\n  ".join(problems), file=sys.stderr)
                return 1
    except SiteError as e:
        print(f"site: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
