"""Rich renderables for attnwalk's screens. Nothing here prints: callers decide where output goes."""
