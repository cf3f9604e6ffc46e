"""The interactive walk and quiz as Textual apps (walk.py, quiz.py): the matrix with a cell cursor
(grid.py), the panes built from the render package's renderables (panes.py), the help (help.py).

May import the layer, text and render packages, Textual and Rich (the quiz's loop and the
predictions are handed in by the commands); only the commands import it, and only for a terminal:
the piped walk never loads Textual.
"""
