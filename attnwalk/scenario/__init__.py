"""Reading scenario files: YAML with line numbers, the checks that name file, line and field, matrix
files and seeded random matrices, the built-in lessons, and `attnwalk init`'s commented template.

May import numpy, PyYAML, attnwalk.errors, attnwalk.atomic (init writes its file whole) and the
names the layer defines (score kinds, RoPE pairings, stage keys); never text or rendering. lesson.py reads what the scenario says to the learner (dimension
names, stage notes). files.py and numpyfile.py open only regular files and read a .npy's or .npz
member's header before its data; limits.py refuses, from the shapes, a walk or an export too big
to compute; blame.py names the input behind a numeric overflow. Its product is a frozen, validated
Scenario (model.py) that the layer computes.
"""
