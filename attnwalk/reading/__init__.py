"""Reading YAML as a scenario file is written: the strict parser that keeps every value's line
(yamltree.py), its syntax errors in plain words (yamlerrors.py), and one field at a time checked
into a Python or numpy value, each mistake naming file, line and field (fields.py).

The lowest of the reading packages: the loader (scenario/) and every feature's `read`
(features/) use these primitives, so that the features read their keys without importing the
scenario package above them. May import numpy, PyYAML, attnwalk.errors and attnwalk.numbering;
no other attnwalk package.
"""
