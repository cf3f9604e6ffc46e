"""Reading scenario files: the loader (load.py) that reads a file's YAML with attnwalk.reading's
primitives and hands each feature (attnwalk/features/) its keys, matrix files and seeded random
matrices (handed to the fields as their readers), the built-in lessons, and `attnwalk init`'s
commented template.

May import numpy, PyYAML, attnwalk.errors, attnwalk.atomic (init writes its file whole),
attnwalk.reading, the features (a Scenario's graph is its features'; a what-if sets a feature
through its module) and the layer below them; never text or rendering. Nothing under it is
imported back by the features or the layer at run time (tests/test_architecture.py checks the
whole import graph for a circle). lesson.py reads what the scenario says to the learner
(dimension names, stage notes). files.py and numpyfile.py open only regular files and read a
.npy's or .npz member's header before its data; limits.py refuses, from the shapes, a walk or an
export too big to compute; blame.py names the input behind a numeric overflow. Its product is a
frozen, validated Scenario (scenario.py) that the layer computes. trained.py goes the other way:
the trained layer written back as a scenario file (`train -o`), its text edited in place by
yamledit.py.
"""
