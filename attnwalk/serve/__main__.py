"""`python -m attnwalk.serve`: one browser tab's session (session.py), as textual-serve runs it."""

import sys

from attnwalk.serve.session import main

sys.exit(main())
