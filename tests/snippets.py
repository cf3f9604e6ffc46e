"""Small scenario texts shared by several test modules."""

# three tokens, d_model = d_k = d_v = 2, no positions, no mask: a base to add one key to
SMALL = """\
tokens: [a, b, c]
embeddings: [[1, 0], [0, 1], [1, 1]]
W_Q: [[1, 0], [0, 1]]
W_K: [[1, 0.5], [0, 1]]
W_V: [[1, 0], [0, 1]]
"""
