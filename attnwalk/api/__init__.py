"""attnwalk as a Python library, for notebooks and scripts: `attnwalk.walk`, `model`, `grad`,
`train` and `quiz` (calls.py), the scenario given as a built-in name, a path, YAML text or a dict
(source.py), what they return (result.py: a walk's matrices by stage key, per head, its worked
cells and its export; runs.py: a gradient walk and a training run), how a result shows itself in
Jupyter (display.py: the walk's own heat tables as HTML; stepper.py: an ipywidgets stepper where
`attnwalk[notebook]` is installed).

Nothing here prints or exits: errors are raised as the CLI's AttnwalkErrors, with its messages.
It sits beside commands/, under the CLI: it may import every package but `cli`, `commands`,
`serve` and `app` (the Textual apps), and never typer or Textual; ipywidgets and matplotlib only
inside the functions that draw with them. `attnwalk/__init__.py` imports this package lazily, so
`import attnwalk` and `attnwalk --help` stay light.
"""
