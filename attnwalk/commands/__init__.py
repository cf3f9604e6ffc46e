"""The bodies of the CLI's larger commands, between cli.py's option parsing and the packages that
do the work: run and step (walk.py: a stepper in a terminal, the whole walk when piped, --save),
decode (decode.py: the KV cache, stepped with the walk's stepper), quiz (quiz.py: ask, read an
answer, reveal, score), and the shell-completion callbacks (complete.py). cli.py is the only module that turns errors into exit codes; nothing but cli.py
imports this package.
"""
