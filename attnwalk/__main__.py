from attnwalk.cli import run

run()
