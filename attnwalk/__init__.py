"""attnwalk: a terminal tutor for the self-attention mechanism of Transformers."""

__version__ = "0.1.0"
