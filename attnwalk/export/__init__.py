"""Exports of a computed walk: the JSON contract for scripts (data.py), and handouts in Markdown,
LaTeX and CSV for notes and slides (handout.py, latex.py); the gradients and a training run for
scripts (graddata.py).

Reads the layer's stage list for what to write; may import the layer, text and render's number
formatting, never the terminal.
"""
