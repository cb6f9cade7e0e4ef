"""Sphinx configuration of the course site (``make site``; scripts/site.py stages the sources beside it).

The site is built from what the repository stores: README.md becomes the front page, the lessons are rendered
with their stored outputs (nothing is executed), and every asset, MathJax included, is served from the site
itself, so it reads the same offline as online.
"""
project = "gpuedu"
author = "the gpuedu authors"
copyright = "gpuedu authors, MIT licence"
# version, release and html_title come from gpuedu.__version__ on sphinx-build's command line (scripts/site.py).

extensions = ["myst_nb"]
root_doc = "index"
exclude_patterns = ["_build", "**.ipynb_checkpoints"]

# Notebooks are shown with the outputs the lessons store: the emulator's, checked by nbval in CI.
nb_execution_mode = "off"
nb_merge_streams = True
myst_enable_extensions = ["dollarmath", "amsmath"]
myst_heading_anchors = 3   # README's "#using-a-gpu" style links resolve to headings

html_theme = "furo"
html_static_path = ["_static"]
html_show_sourcelink = False
# MathJax 3 (SVG output, one file) from _static: scripts/site.py fetches it, checksum verified.
mathjax_path = "mathjax/tex-svg.js"
