"""Turn nbval's comment markers in lesson notebooks into cell tags, in place.

    python scripts/nbval_tags.py lessons/*.ipynb

A first line ``# NBVAL_IGNORE_OUTPUT`` (or ``# NBVAL_SKIP``, ``# NBVAL_CHECK_OUTPUT``, ``# NBVAL_RAISES_EXCEPTION``)
is removed from the cell's code and the matching tag (``nbval-ignore-output``...) added to its metadata, so
learners' code carries no test machinery. tests/test_notebooks.py refuses comment markers in lessons.
"""
import sys

import nbformat

MARKERS = {"# NBVAL_IGNORE_OUTPUT": "nbval-ignore-output", "# NBVAL_SKIP": "nbval-skip",
           "# NBVAL_CHECK_OUTPUT": "nbval-check-output", "# NBVAL_RAISES_EXCEPTION": "raises-exception"}


def convert(nb):
    """Move the markers of ``nb`` into tags; returns how many cells changed."""
    changed = 0
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        first, _, rest = cell.source.partition("\n")
        tag = MARKERS.get(first.strip())
        if tag is None:
            continue
        cell.source = rest
        tags = cell.metadata.setdefault("tags", [])
        if tag not in tags:
            tags.append(tag)
        changed += 1
    return changed


def main(paths):
    for path in paths:
        nb = nbformat.read(path, as_version=4)
        n = convert(nb)
        if n:
            nbformat.write(nb, path)
        print(f"{path}: {n} cells")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
