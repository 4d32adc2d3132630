"""A second sentence-transformers model, built and saved by the test itself (never fetched).

A tiny randomly initialised BERT (one layer, 48 dimensions instead of MiniLM's 384) with a
word-level vocabulary of the corpus's commonest words, mean pooling and e5-style prompts: enough
to exercise every mechanism of ``SIDECAR_EMBED_MODEL`` (dimension, max sequence length, slug,
prompts, a reindex to it and back), not to rank well.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

TINY_DIM = 48
TINY_MAX_SEQ = 64
SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def build_tiny_model(root: Path, texts: Iterable[str], name: str = "tiny-bert-e5") -> Path:
    """Save the model under ``root/name`` and return that directory."""
    import torch
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer import modules as st_models
    from transformers import BertConfig, BertModel, BertTokenizerFast

    torch.manual_seed(17)
    words = Counter(w for t in texts for w in re.findall(r"[a-z0-9]+", t.lower()))
    vocab = SPECIAL + ["query", ":", "passage"] + [w for w, _ in words.most_common(2000)]
    raw = root / f"{name}-raw"
    raw.mkdir(parents=True, exist_ok=True)
    ids = {w: i for i, w in enumerate(dict.fromkeys(vocab))}
    tokenizer = BertTokenizerFast(vocab=ids, do_lower_case=True)
    config = BertConfig(
        vocab_size=tokenizer.vocab_size, hidden_size=TINY_DIM, num_hidden_layers=1,
        num_attention_heads=2, intermediate_size=96, max_position_embeddings=128,
    )
    BertModel(config).save_pretrained(raw)
    tokenizer.save_pretrained(raw)
    transformer = st_models.Transformer(str(raw), max_seq_length=TINY_MAX_SEQ)
    pooling = st_models.Pooling(TINY_DIM, pooling_mode="mean")
    model = SentenceTransformer(
        modules=[transformer, pooling], device="cpu",
        prompts={"query": "query: ", "document": "passage: "},
    )
    out = root / name
    model.save(str(out))
    return out
