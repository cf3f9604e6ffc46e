"""`attnwalk init`: a commented scenario file for a learner to edit, written without overwriting."""

from __future__ import annotations

from pathlib import Path

from attnwalk.scenario.builtins import builtin_path
from attnwalk.errors import UsageError
from attnwalk.atomic import write_whole

TEMPLATE = """\
# An attnwalk scenario: everything one self-attention layer needs, written out by hand.
# 一个 attnwalk 场景：一个自注意力层需要的全部输入，全部手写。
#
# The layer computes / 计算流程:
#   X = E + P;   Q = X·W_Q;   K = X·W_K;   V = X·W_V
#   S = Q·Kᵀ / √d_k;   masked cells → −∞;   A = softmax(S), row by row;   Z = A·V
# Shapes / 形状: n tokens; d_model numbers per token; d_k per query and key; d_v per value.
# Write a matrix as a list of rows, one row per line: "  - [1, 0.5]". Big ones need not be typed:
#   {file: wq.npy}                                    a .npy, .npz or .csv file beside this one
#   {random: {seed: 1, rows: 512, cols: 512, scale: 0.0442}}   seeded normal(0, scale) numbers
# 矩阵逐行写成列表；大矩阵可以写 {file: wq.npy}（同目录的 .npy/.npz/.csv），或 {random: {...}}（按种子生成的随机数）。
# No YAML anchors (&), aliases (*) or tags (!).
# Try it: attnwalk step --scenario THIS_FILE

# name: a short name (optional; the default is the file name without .yaml).
# name：场景名（可省略，默认取文件名）。
name: my_scenario

# title, description: one text, or one per language as {en: ..., zh: ...}.
# title、description：一段文字，或按语言分别写 en 和 zh。
title:
  en: "A cat chases a ball"
  zh: "猫追球"
description:
  en: "Three tokens in two dimensions. Change one number and watch A and Z move."
  zh: "三个 token，两维向量。改一个数字，看 A 和 Z 怎么变。"

# tokens: the n tokens of the sentence, in order: rows 1, 2, 3, ... (pos = 0, 1, 2, ... in P's formula).
# tokens：句子切出的 n 个 token，按顺序排：第 1, 2, 3, ... 行（位置编码公式里是 pos = 0, 1, 2, ...）。
tokens: [猫, 追, 球]

# ids: optional, one whole number per token, its row in the vocabulary (shown, not computed with).
# ids：可省略，每个 token 在词表里的编号（只显示，不参与计算）。
ids: [101, 202, 303]

# embeddings: E, n rows × d_model columns; row i is token i's vector.
# d_model is the number of columns, and every matrix below must agree with it.
# embeddings：词嵌入矩阵 E，n 行 × d_model 列，第 i 行是第 i 个 token 的向量。
embeddings:
  - [1, 0]      # 猫
  - [0.5, 0.5]  # 追
  - [0, 1]      # 球

# dimensions: optional names for the columns (d_model; also d_k and d_v), one list or one per language.
# The tables and worked cells are labelled with them instead of 1, 2, ...
# dimensions：可省略，给各列起名字（d_model，也可以给 d_k、d_v），一个列表，或按语言分别写。
dimensions:
  d_model: {en: [animal, object], zh: [动物, 物体]}

# notes: optional, what to notice at a stage (E, X, Q, QK^T, S, A, Z, ...), shown on its screen.
# notes：可省略，在某一阶段提示学习者该留意什么，显示在那一步的屏幕上。
notes:
  A: {en: "Which token does 追 look at most, and why?", zh: "追 最关注哪个 token？为什么？"}

# positional: P, added to E (X = E + P). One of four forms:
#   none         no positions, P = 0 (the default)
#   sinusoidal   P[pos, 2i] = sin(pos / 10000^(2i/d_model)), P[pos, 2i+1] = cos(same), pos from 0
#   rope         P = 0; each head's queries and keys are rotated by their positions instead
#                (d_k even; optional rope: {base: 10000, pairing: half | interleaved})
#   a matrix     your own P, n × d_model like the embeddings, for example
#                  positional:
#                    - [0, 0.1]
#                    - [0, 0.2]
#                    - [0, 0.3]
# positional：位置编码 P。none = 不加；sinusoidal = 正弦余弦公式；rope = 不加 P，改为按位置旋转每个头的
# query 和 key（d_k 须为偶数）；或直接写一个 n × d_model 矩阵。
positional: none

# W_Q, W_K: d_model rows × d_k columns, the same d_k for both. Q = X·W_Q, K = X·W_K.
# W_Q、W_K：d_model 行 × d_k 列，两者的 d_k 必须相同。
W_Q:
  - [1, 0]
  - [0, 1]
W_K:
  - [1, 0.5]
  - [0, 1]

# W_V: d_model rows × d_v columns (d_v may differ from d_k). V = X·W_V; Z has d_v columns.
# W_V：d_model 行 × d_v 列（d_v 可以不等于 d_k）。
W_V:
  - [1, 0]
  - [0, 2]

# mask: which keys each query may attend to. One of four forms:
#   none       every token sees every token (the default)
#   causal     the token in row i sees rows 1..i only, as in a decoder: no looking ahead
#   {causal: true, window: 3}   a sliding window: the token in row i sees rows i-2..i only
#              (without causal: every token within 2 places, before or after)
#   a matrix   n × n of true/false; row = query, column = key, true = may attend;
#              every row needs at least one true. For example
#                mask:
#                  - [true, false, false]
#                  - [true, true, false]
#                  - [true, true, true]
# mask：每个 query 能看哪些 key。none = 全部可见；causal = 只看自己和前面；{causal: true, window: 3} = 只看自己和前面两个；或写 n × n 的 true/false 矩阵。
mask: none
"""

_SAID = ("name", "title", "description", "tokens", "ids", "embeddings", "positional", "W_Q", "W_K",
         "W_V", "mask")  # the keys keys_help explains one by one


def keys_help() -> str:
    """What a copied lesson's header says of the keys: the main ones, then every other key a
    scenario may have (the features' keys too, read from the loader)."""
    import textwrap

    from attnwalk.scenario.load import keys

    more = textwrap.wrap("more: " + ", ".join(k for k in keys() if k not in _SAID) + " (README.md);", 92,
                         initial_indent="#       ", subsequent_indent="#       ")
    return "\n".join([
        "# Keys: tokens; ids (optional); embeddings: n × d_model;",
        "#       positional: none | sinusoidal | rope | an n × d_model matrix;",
        "#       W_Q, W_K: d_model × d_k; W_V: d_model × d_v;",
        "#       mask: none | causal | {causal: true, window: w} | an n × n matrix of true/false "
        "(true = may attend);",
        *more,
        "#       any matrix: rows, {file: x.npy} or {random: {seed: 0, rows: R, cols: C, scale: S}}.",
        ""])


def scenario_text(from_name: str | None) -> str:
    """The text of a new scenario file: TEMPLATE, or a copy of built-in `from_name` under a header."""
    if from_name is None:
        return TEMPLATE
    path = builtin_path(from_name)
    if path is None:
        raise UsageError(f"--from: no built-in scenario '{from_name}' (see: attnwalk list)")
    header = (f"# Copied from the built-in scenario {from_name}; edit freely.\n"
              f"# 复制自内置场景 {from_name}，可随意修改。\n"
              f"{keys_help()}"
              f"# A blank template with every key explained: attnwalk init NEW_FILE.yaml\n\n")
    return header + path.read_text(encoding="utf-8")


def write_new_file(path: Path, text: str) -> None:
    """Write `text` to `path` whole or not at all, and never over an existing file.

    atomic.write_whole without replace: the text goes to a temporary file beside `path` first and
    is linked to its name, which fails instead of replacing when `path` appeared in the meantime.
    """
    path = Path(path)
    exists = UsageError(f"{path} already exists; choose another name or delete it first")
    if path.exists() or path.is_symlink():
        raise exists
    folder = path.parent
    if not folder.is_dir():
        raise UsageError(f"cannot write {path}: the folder {folder} does not exist")
    try:
        write_whole(path, text, replace=False, sync=True)  # a scenario someone will edit: on disk
    except FileExistsError:
        raise exists from None
    except OSError as exc:
        raise UsageError(f"cannot write {path}: {exc.strerror or exc}") from None
