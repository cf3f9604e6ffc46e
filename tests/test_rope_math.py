"""layer/rope.py against RoPE written here from the formulas, in another form: each pair as one
complex number z = x_a + i·x_b multiplied by e^(i·pos·θ_i), θ_i = 1 / base^(2i/d) (the RoFormer
paper's eq. 34, and Meta's original Llama code with torch.polar)."""

from __future__ import annotations

import numpy as np
import pytest

from attnwalk.layer import rope


def reference(x: np.ndarray, positions: np.ndarray, base: float, pairing: str) -> np.ndarray:
    n, d = x.shape
    inv_freq = 1.0 / base ** (np.arange(0, d, 2) / d)  # (d/2,) Hugging Face's inv_freq
    turn = np.exp(1j * np.outer(positions, inv_freq))  # (n, d/2) unit complex numbers
    if pairing == "half":  # dimension i with i + d/2
        z = (x[:, : d // 2] + 1j * x[:, d // 2:]) * turn
        return np.concatenate([z.real, z.imag], axis=1)
    z = (x[:, 0::2] + 1j * x[:, 1::2]) * turn  # 2i with 2i + 1
    out = np.empty_like(x)
    out[:, 0::2], out[:, 1::2] = z.real, z.imag
    return out


def rotate_half_reference(x: np.ndarray, positions: np.ndarray, base: float) -> np.ndarray:
    """Hugging Face's apply_rotary_pos_emb, written out: x·cos + rotate_half(x)·sin."""
    d = x.shape[1]
    inv_freq = 1.0 / base ** (np.arange(0, d, 2) / d)
    freqs = np.outer(positions, inv_freq)
    emb = np.concatenate([freqs, freqs], axis=1)  # (n, d)
    x1, x2 = x[:, : d // 2], x[:, d // 2:]
    return x * np.cos(emb) + np.concatenate([-x2, x1], axis=1) * np.sin(emb)


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("pairing", rope.PAIRINGS)
def test_rotate_matches_the_complex_form(seed: int, pairing: str) -> None:
    rng = np.random.default_rng(seed)
    n, d = int(rng.integers(1, 9)), 2 * int(rng.integers(1, 9))
    base = float(rng.choice([10000.0, 500000.0, 100.0, 10.0]))
    x = rng.normal(size=(n, d))
    positions = rng.integers(0, 50, size=n).astype(float)
    np.testing.assert_allclose(rope.rotate(x, positions, base, pairing),
                               reference(x, positions, base, pairing), atol=1e-12)


@pytest.mark.parametrize("seed", range(4))
def test_half_pairing_is_hugging_faces_rotate_half(seed: int) -> None:
    rng = np.random.default_rng(100 + seed)
    x = rng.normal(size=(5, 8))
    positions = np.arange(5.0)
    np.testing.assert_allclose(rope.rotate(x, positions, 10000.0, "half"),
                               rotate_half_reference(x, positions, 10000.0), atol=1e-12)


def test_a_hand_worked_pair() -> None:
    # d = 2: one pair, θ_0 = 1; position 1 turns (1, 0) by one radian to (cos 1, sin 1)
    out = rope.rotate(np.array([[1.0, 0.0], [1.0, 0.0]]), np.array([0.0, 1.0]))
    np.testing.assert_allclose(out, [[1.0, 0.0], [np.cos(1.0), np.sin(1.0)]], atol=1e-15)
    # d = 4, half: dims (0, 2) turn by pos·1, dims (1, 3) by pos·10000^(-1/2) = pos/100
    out = rope.rotate(np.array([[0.0, 1.0, 0.0, 0.0]]), np.array([3.0]))
    np.testing.assert_allclose(out, [[0.0, np.cos(0.03), 0.0, np.sin(0.03)]], atol=1e-15)


@pytest.mark.parametrize("pairing", rope.PAIRINGS)
@pytest.mark.parametrize("shift", [1, 3, 17])
def test_scores_depend_only_on_the_offset(pairing: str, shift: int) -> None:
    rng = np.random.default_rng(shift)
    q, k = rng.normal(size=(6, 8)), rng.normal(size=(6, 8))
    pos = np.arange(6.0)
    before = rope.rotate(q, pos, pairing=pairing) @ rope.rotate(k, pos, pairing=pairing).T
    after = rope.rotate(q, pos + shift, pairing=pairing) @ rope.rotate(k, pos + shift, pairing=pairing).T
    np.testing.assert_allclose(after, before, atol=1e-12)
    # ...and on the offset they do depend: position 0 is the unrotated vector
    assert not np.allclose(before, q @ k.T)


def test_pair_of_names_both_members() -> None:
    assert rope.pair_of(5, 8, "half") == (1, 1, 5)
    assert rope.pair_of(1, 8, "half") == (1, 1, 5)
    assert rope.pair_of(5, 8, "interleaved") == (2, 4, 5)
    assert rope.pair_of(4, 8, "interleaved") == (2, 4, 5)


def test_odd_width_is_refused() -> None:
    with pytest.raises(ValueError, match="even"):
        rope.rotate(np.ones((2, 3)), np.arange(2.0))
