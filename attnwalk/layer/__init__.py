"""The math of one attention layer: the stages, the modes and scores, and the walk that computes
every stage's matrix in float64.

Pure: numpy and the standard library, plus the Scenario it is given and attnwalk.errors. Nothing
here prints, reads a file, or imports text or rendering (attnwalk.text, attnwalk.render, rich). A
stage's definition (stages.py) is the one place that says how it is computed, when it applies, its
formula, its text keys and how one of its cells is worked out; everything else reads that list.
Its backward (graph.Backward) sits beside it too: backward.py walks the same graph in reverse for
the gradients, gradwalk.py and gradscreens.py make the backward walk's screens (gradcells.py the
base stages' chain-rule cells), train.py descends.
"""
