"""The induction lesson's training written apart from attnwalk, in plain numpy: the reference
tests/test_induction.py checks `attnwalk train induction`'s first steps against.

Read from the scenario file's own YAML (its seeds, shapes and settings), not through attnwalk's
loader: every random matrix is numpy's PCG64 normal(0, scale) at its seed; the model is

    X = E_table[ids] + P (sinusoidal);  per block: Q, K, V = X W_Q, X W_K, X W_V, split into heads,
    A = softmax(Q Kᵀ / √d_k + causal mask), O = concat(A V) W_O, X ← X + O;  logits = X W_U;
    L = mean over positions i < n − 1 of −log softmax(logits)[i, token i+1]

batched over a step's sequences (einsum, a different summation order from attnwalk's one walk per
sequence), with the gradients worked out by hand below and Adam (Kingma & Ba 2015, torch's
defaults). A step's sequences are drawn as the lesson says: numpy's PCG64 seeded with [seed, step],
for each sequence R from the range, then the filler words, then the R words (ids of the vocabulary
without the start token), the R words written twice.
"""

from __future__ import annotations

import numpy as np
import yaml


def sinusoidal(n: int, d: int) -> np.ndarray:
    pos = np.arange(n, dtype=float)[:, None]
    i = np.arange(d) // 2
    angle = pos / np.power(10000.0, 2.0 * i / d)
    return np.where(np.arange(d) % 2 == 0, np.sin(angle), np.cos(angle))


def softmax(S: np.ndarray) -> np.ndarray:
    S = S - S.max(-1, keepdims=True)
    e = np.exp(S)
    return e / e.sum(-1, keepdims=True)


def seeded(spec: dict) -> np.ndarray:
    r = spec["random"]
    return np.random.default_rng(r["seed"]).normal(0.0, r.get("scale", 1.0), (r["rows"], r["cols"]))


class Model:
    """The lesson's model from its file: its weights by name (block b's as W_Q.b), its table."""

    def __init__(self, path: str) -> None:
        with open(path, encoding="utf-8") as f:
            doc = yaml.safe_load(f)
        self.doc = doc
        self.vocab = doc["vocab"]
        self.tokens = doc["tokens"]
        self.H = doc["heads"]
        self.table = seeded(doc["vocab_embeddings"])
        self.p: dict[str, np.ndarray] = {}
        for b, block in enumerate(doc["blocks"]):
            for name, spec in block.items():
                self.p[name if b == 0 else f"{name}.{b + 1}"] = seeded(spec)
        self.p["W_U"] = seeded(doc["W_U"])
        self.L = len(doc["blocks"])
        self.n = len(self.tokens)
        self.d = self.table.shape[1]
        self.dk = self.p["W_Q"].shape[1] // self.H
        self.P = sinusoidal(self.n, self.d)
        self.mask = np.tril(np.ones((self.n, self.n), bool))
        seq = doc["sequences"]
        self.low, self.high = seq["repeat"]
        self.batch, self.seed = seq["batch"], seq["seed"]
        self.start = self.vocab.index(self.tokens[0])
        self.words = np.array([i for i, w in enumerate(self.vocab) if w != self.tokens[0]])
        train = doc["train"]
        self.lr = train["lr"]

    def name(self, w: str, l: int) -> str:
        return w if l == 0 else f"{w}.{l + 1}"

    def drawn(self, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Step k's sequences (B, n) and their second copies' weights (B, n): 1 at each position of
        a second copy whose next token is in it."""
        rng = np.random.default_rng([self.seed, k])
        ids = np.zeros((self.batch, self.n), int)
        rep = np.zeros((self.batch, self.n))
        for b in range(self.batch):
            R = int(rng.integers(self.low, self.high + 1))
            filler = self.n - 1 - 2 * R
            before = self.words[rng.integers(0, len(self.words), filler)]
            run = self.words[rng.integers(0, len(self.words), R)]
            ids[b] = np.concatenate([[self.start], before, run, run])
            rep[b, 1 + filler + R:self.n - 1] = 1
        return ids, rep

    def forward(self, ids: np.ndarray):
        B, n = ids.shape
        X = self.table[ids] + self.P[None]
        cache, As = [], []
        for l in range(self.L):
            heads = lambda M: M.reshape(B, n, self.H, self.dk).transpose(0, 2, 1, 3)  # noqa: E731
            Q, K, V = (heads(X @ self.p[self.name(w, l)]) for w in ("W_Q", "W_K", "W_V"))
            S = np.where(self.mask, np.einsum("bhik,bhjk->bhij", Q, K) / np.sqrt(self.dk), -np.inf)
            A = softmax(S)
            C = np.einsum("bhij,bhjk->bhik", A, V).transpose(0, 2, 1, 3).reshape(B, n, self.H * self.dk)
            cache.append((X, Q, K, V, A, C))
            As.append(A)
            X = X + C @ self.p[self.name("W_O", l)]
        return X, cache, As

    def losses(self, ids: np.ndarray, rep: np.ndarray):
        """L (mean over every sequence's positions but the last), L_rep, and what backward needs."""
        B, n = ids.shape
        X, cache, As = self.forward(ids)
        logits = X @ self.p["W_U"]
        z = logits - logits.max(-1, keepdims=True)
        logp = z - np.log(np.exp(z).sum(-1, keepdims=True))
        nxt = np.zeros_like(ids)
        nxt[:, :-1] = ids[:, 1:]
        picked = np.take_along_axis(logp, nxt[..., None], -1)[..., 0]  # (B, n)
        weight = np.ones((B, n))
        weight[:, -1] = 0
        L = float(-(picked * weight).sum() / weight.sum())
        L_rep = float(-(picked * rep).sum() / rep.sum())
        return L, L_rep, (X, cache, np.exp(logp), nxt, weight)

    def grads(self, ids: np.ndarray, rep: np.ndarray):
        B, n = ids.shape
        L, L_rep, (Xf, cache, p, nxt, weight) = self.losses(ids, rep)
        g: dict[str, np.ndarray] = {}
        dlog = p.copy()
        np.put_along_axis(dlog, nxt[..., None], np.take_along_axis(dlog, nxt[..., None], -1) - 1, -1)
        dlog *= (weight / weight.sum())[..., None]
        g["W_U"] = np.einsum("bnd,bnv->dv", Xf, dlog)
        dX = dlog @ self.p["W_U"].T
        for l in reversed(range(self.L)):
            X, Q, K, V, A, C = cache[l]
            W_O = self.p[self.name("W_O", l)]
            g[self.name("W_O", l)] = np.einsum("bnc,bnd->cd", C, dX)
            dZ = (dX @ W_O.T).reshape(B, n, self.H, self.dk).transpose(0, 2, 1, 3)
            dA = np.einsum("bhik,bhjk->bhij", dZ, V)
            dV = np.einsum("bhij,bhik->bhjk", A, dZ)
            dS = A * (dA - (dA * A).sum(-1, keepdims=True)) / np.sqrt(self.dk)
            dQ = np.einsum("bhij,bhjk->bhik", dS, K)
            dK = np.einsum("bhij,bhik->bhjk", dS, Q)
            back = dX.copy()  # the residual passes dX on unchanged
            for w, dM in (("W_Q", dQ), ("W_K", dK), ("W_V", dV)):
                dM = dM.transpose(0, 2, 1, 3).reshape(B, n, self.H * self.dk)
                g[self.name(w, l)] = np.einsum("bnd,bnc->dc", X, dM)
                back += dM @ self.p[self.name(w, l)].T
            dX = back
        return L, L_rep, g

    def probe_scores(self) -> list[dict]:
        """Each head's previous-token and induction score on the file's tokens: the mean of
        A[i, i − 1] over i ≥ 1, and of A[i, i − R + 1] over the second copy (Olsson et al.)."""
        ids = np.array([[self.vocab.index(t) for t in self.tokens]])
        _, _, As = self.forward(ids)
        R = (self.n - 1) // 2
        out = []
        for l, A in enumerate(As):
            for h in range(self.H):
                a = A[0, h]
                prev = np.mean([a[i, i - 1] for i in range(1, self.n)])
                ind = np.mean([a[i, i - R + 1] for i in range(1 + R, 1 + 2 * R)])
                out.append({"layer": l + 1, "head": h + 1, "previous_token": prev, "induction": ind})
        return out

    def train(self, steps: int):
        """Step 0 … `steps`: each step's (L, L_rep, the heads' scores), then Adam's update."""
        m = {k: np.zeros_like(v) for k, v in self.p.items()}
        v = {k: np.zeros_like(w) for k, w in self.p.items()}
        out = []
        for k in range(steps + 1):
            ids, rep = self.drawn(k)
            L, L_rep, g = self.grads(ids, rep)
            out.append((L, L_rep, self.probe_scores()))
            if k == steps:
                break
            for name in self.p:
                m[name] = 0.9 * m[name] + 0.1 * g[name]
                v[name] = 0.999 * v[name] + 0.001 * g[name] ** 2
                m_hat = m[name] / (1 - 0.9 ** (k + 1))
                v_hat = v[name] / (1 - 0.999 ** (k + 1))
                self.p[name] = self.p[name] - self.lr * m_hat / (np.sqrt(v_hat) + 1e-8)
        return out
