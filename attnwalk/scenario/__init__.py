"""Reading scenario files: YAML with line numbers, the checks that name file, line and field, matrix
files and seeded random matrices, the built-in lessons, and `attnwalk init`'s commented template.

May import numpy, PyYAML, attnwalk.errors and the names the layer defines (score kinds, stage
keys); never text or rendering. lesson.py reads what the scenario says to the learner (dimension
names, stage notes). Its product is a
frozen, validated Scenario (model.py) that the layer computes.
"""
