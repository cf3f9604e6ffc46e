"""The bodies of the CLI's larger commands (run and step), between cli.py's option parsing and the
packages that do the work. cli.py is the only module that turns errors into exit codes.
"""
