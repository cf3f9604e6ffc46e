"""A scenario: the tokens, their embeddings and the layer's weights, validated and frozen.

The loader (load.py) is the only way in from a file; `attnwalk model` builds one from a real
layer. Every array is float64 and read-only. What a feature adds (RoPE's settings, a mask's kind,
a norm's γ and β) is kept under its name in `settings` and `params`, read by that feature's module
(attnwalk/features/) and nowhere else; `graph` is the layer those features make.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

import numpy as np

from attnwalk.scenario import lesson


@dataclass(frozen=True, eq=False)  # no __eq__: == on numpy fields can only raise; defines faster
class Sequence:
    """A run of tokens and their embeddings: the main sequence, or a cross-attention source."""

    tokens: tuple[str, ...]
    E: np.ndarray  # (n, d_model)
    positional: str  # "none" | "sinusoidal" | "explicit" | "rope" (P = 0; q and k are rotated)
    P_given: np.ndarray | None = None  # (n, d_model) when positional is explicit
    ids: tuple[int, ...] | None = None

    @property
    def n(self) -> int:
        return len(self.tokens)

    @property
    def d_model(self) -> int:
        return self.E.shape[1]


class LayerShape:
    """The sizes a layer's shape derives from its sequences, heads and weights: the one
    definition for a Scenario and for the Draft a file is read into (scenario/load.py)."""

    @property
    def m(self) -> int:
        """Number of keys: the source's tokens, or the sequence's own."""
        return (self.source or self.main).n

    @property
    def groups(self) -> int:
        """g, the number of K/V heads: heads (ordinary multi-head), fewer with GQA, 1 with MQA."""
        return self.kv_heads or self.heads

    @property
    def d_k(self) -> int:
        """Width of one head's queries and keys."""
        return self.W_Q.shape[1] // self.heads

    @property
    def d_v(self) -> int:
        return self.W_V.shape[1] // self.groups


@dataclass(frozen=True, eq=False)  # no __eq__, as Sequence
class Scenario(LayerShape):
    """A validated scenario: one sequence (and a source for cross-attention), the layer's weights,
    the mask, and what its features add."""

    name: str
    main: Sequence
    W_Q: np.ndarray  # (d_model, h·d_k)
    W_K: np.ndarray  # (d_model, g·d_k)
    W_V: np.ndarray  # (d_model, g·d_v)
    allowed: np.ndarray  # (n, m) bool: may query i attend to key j
    title: str | dict[str, str] = ""  # one text, or language -> text ({en: ..., zh: ...})
    description: str | dict[str, str] = ""
    path: str | None = None  # the file it came from
    builtin: bool = False
    label: str = "<scenario>"  # how messages name it: the path as given, or "name (built-in)"
    heads: int = 1
    kv_heads: int = 0  # g: K and V have g heads, each shared by heads/g query heads (0: g = heads)
    W_O: np.ndarray | None = None  # (h·d_v, d_model)
    source: Sequence | None = None  # keys and values come from here (cross-attention)
    focus: int | None = None  # the query row whose cells the walk works through (0-based)
    dimensions: dict = field(default_factory=dict)  # "d_model" | "d_k" | "d_v" -> {lang: names}
    notes: dict = field(default_factory=dict)  # stage key -> what to notice there (text or {lang: text})
    lines: dict = field(default_factory=dict)  # field ("tokens", "source.tokens") -> its line in the file
    settings: Mapping[str, Any] = field(default_factory=dict)  # feature name -> what its keys said (features/)
    params: Mapping[str, np.ndarray] = field(default_factory=dict)  # learned parameters a feature adds

    @functools.cached_property
    def graph(self):  # -> layer.graph.Graph
        """The layer's stages for this scenario: the base layer's, with its features' (features/)."""
        from attnwalk.features import graph_of

        return graph_of(self)

    @property
    def features(self) -> tuple:
        """The feature modules this scenario uses (features/), in the order they are applied: for
        what a feature adds beyond its stages (its export fields, why it cannot be decoded)."""
        from attnwalk.features import FEATURES

        return tuple(feature for feature in FEATURES if feature.active(self))

    def setting(self, feature: str) -> Any:
        """What feature `feature`'s keys said (None: the scenario does not use it). For the
        feature's own module: code elsewhere asks the graph."""
        return self.settings.get(feature)

    def with_setting(self, feature: str, value: Any) -> Scenario:
        """This scenario with feature `feature` set to `value` (None: without it)."""
        settings = {k: v for k, v in self.settings.items() if k != feature}
        if value is not None:
            settings[feature] = value
        return replace(self, settings=MappingProxyType(settings))

    def param(self, name: str) -> Any:
        """A learned parameter by the name a stage reads it by: W_Q, W_K, W_V, W_O, or a feature's."""
        if name in ("W_Q", "W_K", "W_V", "W_O"):
            return getattr(self, name)
        if name in self.params:
            return self.params[name]
        raise KeyError(f"no parameter or stage named {name!r} in this layer")

    @property
    def tokens(self) -> tuple[str, ...]:
        return self.main.tokens

    @property
    def key_tokens(self) -> tuple[str, ...]:
        """The tokens the keys and values belong to: the source's, or the sequence's own."""
        return (self.source or self.main).tokens

    @property
    def n(self) -> int:
        return self.main.n

    @property
    def d_model(self) -> int:
        return self.main.d_model

    def kv_head(self, head: int) -> int:
        """The K/V head query head `head` reads (0-based): heads/g consecutive query heads share one."""
        from attnwalk.layer.gqa import kv_head_of

        return kv_head_of(self.heads, self.groups)[head]

    @property
    def masked(self) -> bool:
        """Has the layer a mask (M of −∞ where a query may not attend)?"""
        return "mask" in self.settings

    def dimension_names(self, dim: str, lang: str) -> tuple[str, ...] | None:
        """The names the scenario gives the columns of `dim` ("d_model", "d_k", "d_v") in `lang`
        (else in the language it gives), or None."""
        names = self.dimensions.get(dim)
        if names is None:  # a feature's own (the unembedding's columns: its vocabulary)
            for feature in self.features:
                if hasattr(feature, "dimension_names") and feature.dimension_names(self, dim) is not None:
                    return feature.dimension_names(self, dim)
        return None if names is None else lesson.in_language(names, lang)

    def overflow_where(self, stage: str) -> str:
        """`file:line: field` of the input to make smaller when `stage` overflows float64 (the
        largest of those it is made from; blame.py), else the file alone."""
        from attnwalk.scenario.blame import overflow_where

        return overflow_where(self, stage)

    @property
    def scorer(self):  # -> layer.scores.Score
        """How this scenario's queries and keys make a score (dot or additive)."""
        from attnwalk.layer.scores import DOT

        scoring = self.settings.get("score")
        return DOT if scoring is None else scoring.score

    # -- what the features' settings say, for the screens not yet asking the graph ----------------

    @property
    def mask_kind(self) -> str:
        mask = self.settings.get("mask")
        return "none" if mask is None else mask.kind

    @property
    def window(self) -> int | None:
        mask = self.settings.get("mask")
        return None if mask is None else mask.window

    @property
    def window_causal(self) -> bool:
        mask = self.settings.get("mask")
        return True if mask is None else mask.causal

    @property
    def bias(self) -> str:
        return "alibi" if self.settings.get("alibi") else "none"

    @property
    def score(self) -> str:
        return self.scorer.name

    @property
    def w_a(self) -> np.ndarray | None:
        return self.params.get("w_a")

    @property
    def qk_norm(self) -> bool:
        scoring = self.settings.get("score")
        return scoring is not None and scoring.qk_norm

    @property
    def qk_scale(self) -> float:
        scoring = self.settings.get("score")
        return 1.0 if scoring is None else scoring.qk_scale

    @property
    def tiles(self) -> int | None:
        return self.settings.get("tiles")

    @property
    def rope(self):  # -> layer.rope.Rope | None
        return self.settings.get("rope")

    @property
    def model(self):  # -> models.data.ModelLayer | None
        return self.settings.get("model")

    def bias_after(self, weight: str) -> np.ndarray | None:
        """The bias a real model adds after `weight` ("W_Q" -> b_Q), or None."""
        return self.params.get("b_" + weight[2:])

    @property
    def b_O(self) -> np.ndarray | None:
        return self.params.get("b_O")

    @property
    def b_Q(self) -> np.ndarray | None:
        return self.params.get("b_Q")
