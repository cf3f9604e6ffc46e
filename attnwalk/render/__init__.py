"""Rich renderables for attnwalk's screens: matrices as heat tables, a stage's screen, worked cells,
the compare view, the lessons and progress tables. Nothing here prints: callers decide where output
goes (the terminal, a --save recording, a test's console).

May import the layer, the scenario's data and attnwalk.text; never the terminal, tutor or commands.
"""
