"""The terminal attnwalk writes to (console.py): one Console factory with the guards every
command's output passes (escaped control characters, an encoding that cannot hold the text), and
whether the terminal can run the interactive walk at all (NO_COLOR, FORCE_COLOR, TERM=dumb).
The interactive walk itself is the Textual app in attnwalk/app/.

May import the layer, text and render; nothing imports it but the commands (and app/).
"""
