"""`attnwalk serve`: the interactive walk and quiz in a browser, for a room of students, through
textual-serve (Textual's own web server; `pip install 'attnwalk[serve]'`).

Each browser tab gets one session process (session.py, the server's fixed command), which relays
the page to one activity process at a time (activity.py): the lesson picker (app/picker.py), then
the walk or the quiz of the lesson picked (app/walk.py, app/quiz.py as the terminal runs them),
then the picker again. Nothing the browser sends reaches a command line: it only types keys into
those apps, and the lessons offered are the built-ins and a folder's scenario files (lessons.py).

May import every package but cli (it runs the apps of app/ and the quiz's loop of commands/quiz);
textual_serve and aiohttp only inside server.py and session.py, which only `serve` runs.
"""
