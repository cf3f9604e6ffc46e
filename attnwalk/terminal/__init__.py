"""The interactive walk in a terminal: reading keys (keys.py), the console as the environment asks
for it (console.py: NO_COLOR, FORCE_COLOR, TERM=dumb), the window on a screen taller than the
terminal (viewport.py) and the stepper that moves between the walk's screens (stepper.py).

May import the layer, text and render; nothing imports it but the commands.
"""
