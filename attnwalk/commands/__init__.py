"""The bodies of the CLI's larger commands, between cli.py's option parsing and the packages that
do the work: run and step (walk.py: the Textual app in a terminal, the whole walk when piped, --save),
decode (decode.py: the KV cache, stepped in the same Textual app), quiz (quiz.py: ask, read an
answer, reveal, score), grad (grad.py: the backward walk, stepped in the walk's app), train
(train.py: gradient descent, live in a terminal), and the shell-completion callbacks (complete.py). cli.py is the only module
that turns errors into exit codes; nothing but cli.py
imports this package.
"""
