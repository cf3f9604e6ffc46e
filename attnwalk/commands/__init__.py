"""The body of every command, between cli.py's option parsing and the packages that do the work,
one module a command: run and step (walk.py: the Textual app in a terminal, the whole walk when
piped, --save), decode (decode.py: the KV cache, stepped in the same Textual app; decodepages.py its
pages), quiz (quiz.py: ask, read an answer, reveal, score), export (export.py), compare (compare.py),
explain (explain.py), model (model.py: a real layer turned into the Scenario the others take),
grad (grad.py: the backward walk, stepped in the walk's app), train (train.py: gradient descent,
live in a terminal),
progress and reset (progress.py), list (lessons.py), init (init.py), and the shell-completion
callbacks (complete.py).

May import every package but cli.py, which alone imports this package, and api/ (the Python
API, which sits beside the commands and calls their steps); Textual only through app/. A command returns its exit code or raises an AttnwalkError; terminal/streams.py turns
errors into one line and an exit code.
"""
