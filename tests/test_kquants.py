"""K-quants worked: Q8_0, Q5_0, Q4_K and Q6_K blocks read apart by attnwalk (models/kquants.py)
give gguf.quants.dequantize's numbers bit for bit over random blocks; the 6-bit scales unpack as
ggml packs them (packed here by hand from the layout); a weight's block (quantblock.StoredWeight)
names fields whose formula, in float32 as the library computes it, is the weight; and the worked
cell's line is true for its digits."""

from __future__ import annotations

import numpy as np
import pytest

gguf = pytest.importorskip("gguf", reason="the gguf extra is not installed: pip install 'attnwalk[gguf]'")

from attnwalk.models import kquants  # noqa: E402
from attnwalk.models.ggufile import TensorInfo  # noqa: E402
from attnwalk.models.quantblock import StoredWeight  # noqa: E402

KINDS = ("Q8_0", "Q5_0", "Q4_K", "Q6_K")


def random_blocks(kind: str, n: int, seed: int, finite: bool = True) -> np.ndarray:
    """n blocks of random bytes; with `finite`, every float16 scale a modest normal number (as a
    model's are: random bits would give inf and NaN scales)."""
    qtype = gguf.GGMLQuantizationType[kind]
    _, size = gguf.GGML_QUANT_SIZES[qtype]
    rng = np.random.default_rng(seed)
    raw = rng.integers(0, 256, (n, size), dtype=np.uint8)
    if finite:
        where = {"Q8_0": (0,), "Q5_0": (0,), "Q4_K": (0, 2), "Q6_K": (208,)}[kind]
        for at in where:
            halves = rng.uniform(-0.05, 0.05, n).astype(np.float16)
            raw[:, at:at + 2] = halves.view(np.uint8).reshape(n, 2)
    return raw


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("finite", [True, False])
def test_dequantization_is_gguf_pys_bit_for_bit(kind: str, finite: bool) -> None:
    raw = random_blocks(kind, 400, seed=len(kind) + finite)
    qtype = gguf.GGMLQuantizationType[kind]
    block, _ = gguf.GGML_QUANT_SIZES[qtype]
    with np.errstate(invalid="ignore", over="ignore"):
        ours = kquants.READERS[kind](raw)["w"]
        theirs = np.asarray(gguf.quants.dequantize(raw, qtype)).reshape(400, block)
    assert ours.dtype == np.float32 and ours.shape == theirs.shape
    # the same bits, NaN included (a NaN's payload aside: compare NaN-ness, then every other bit)
    nan = np.isnan(theirs)
    assert np.array_equal(np.isnan(ours), nan)
    assert np.array_equal(ours[~nan].view(np.uint32), theirs[~nan].view(np.uint32))


def test_k_scales_unpack_as_ggml_packs_them() -> None:
    """Pack eight 6-bit scales and minimums by ggml's layout (get_scale_min_k4 read backwards):
    j < 4 in the low 6 bits of bytes j (scale) and j + 4 (min); j ≥ 4 split, low 4 bits in byte
    j + 4's nibbles, high 2 bits in the top of bytes j − 4 and j."""
    rng = np.random.default_rng(3)
    sc, m = rng.integers(0, 64, 8), rng.integers(0, 64, 8)
    packed = np.zeros(12, dtype=np.int64)
    for j in range(4):
        packed[j] = sc[j] | ((sc[j + 4] >> 4) << 6)
        packed[j + 4] = m[j] | ((m[j + 4] >> 4) << 6)
        packed[j + 8] = (sc[j + 4] & 0x0F) | ((m[j + 4] & 0x0F) << 4)
    got_sc, got_m = kquants.k_scales(packed.astype(np.uint8)[None, :])
    assert got_sc.ravel().tolist() == sc.tolist() and got_m.ravel().tolist() == m.tolist()


def test_q4_k_places_each_weight_by_the_layout() -> None:
    """Weight 32·j + t of a Q4_K super-block is byte 32·(j // 2) + t's low nibble for even j, its
    high nibble for odd j, written by hand into one block with d = 1, dmin = 0.5, every sc 1, m 2."""
    raw = np.zeros((1, 144), dtype=np.uint8)
    raw[0, 0:2] = np.array([1.0], dtype=np.float16).view(np.uint8)
    raw[0, 2:4] = np.array([0.5], dtype=np.float16).view(np.uint8)
    raw[0, 4:8], raw[0, 8:12] = 1, 2  # sub-blocks 0–3: sc 1, m 2; 4–7: sc 1 (low nibble), m 2 (high)
    raw[0, 12:16] = 1 | (2 << 4)
    q = np.arange(256) % 16  # weight i stores q = i mod 16
    for i in range(256):
        j, t = divmod(i, 32)
        at = 16 + 32 * (j // 2) + t
        raw[0, at] |= q[i] << (4 * (j % 2))
    read = kquants.q4_k(raw)
    assert read["q"].ravel().tolist() == q.tolist()
    assert read["w"].ravel().tolist() == (q * 1.0 - 0.5 * 2).tolist()


def stored(kind: str, raw: np.ndarray) -> StoredWeight:
    qtype = gguf.GGMLQuantizationType[kind]
    block, size = gguf.GGML_QUANT_SIZES[qtype]
    rows = raw.shape[0]
    info = TensorInfo(name="w", kind=kind, type_id=int(qtype), shape=(rows, block), offset=0,
                      nbytes=raw.nbytes, block_size=block, type_size=size)
    return StoredWeight(info=info, raw=raw, rows=np.arange(rows))


@pytest.mark.parametrize("kind", KINDS)
def test_a_weights_block_names_the_fields_that_make_it(kind: str) -> None:
    raw = random_blocks(kind, 3, seed=11)
    weight = stored(kind, raw)
    whole = np.asarray(gguf.quants.dequantize(raw, gguf.GGMLQuantizationType[kind]), dtype=np.float64)
    f32 = np.float32
    for j in range(3):
        for i in range(weight.info.block_size):
            block = weight.block(i, j)
            f, q = block.fields, block.q
            assert block.formula is not None and q is not None, (kind, i, j)
            if kind == "Q8_0":
                assert -128 <= q <= 127 and f32(f["d"]) * f32(q) == whole[j, i]
            elif kind == "Q5_0":
                assert 0 <= q <= 31 and f32(f["d"]) * f32(q - 16) == whole[j, i]
            elif kind == "Q4_K":
                assert 0 <= q <= 15 and 0 <= f["sc"] <= 63 and 0 <= f["m"] <= 63
                assert block.sub == i // 32 and block.sub_size == 32 and len(block.qs) == 32
                assert f32(f32(f["d"]) * f32(f["sc"])) * f32(q) - f32(f["dmin"]) * f32(f["m"]) == whole[j, i]
            else:
                assert 0 <= q <= 63 and -128 <= f["sc"] <= 127
                assert block.sub == i // 16 and block.sub_size == 16 and len(block.qs) == 16
                assert f32(f32(f["d"]) * f32(f["sc"])) * f32(q - 32) == whole[j, i]
            assert block.value == whole[j, i]
