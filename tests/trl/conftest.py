"""Fixtures of the TRL tests: a tokenizer trained here and tiny random Qwen2 models built from a config
(nothing is downloaded). Used where trl and torch are installed (``nox -s trl``)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest


@pytest.fixture(scope="session")
def tiny_tokenizer() -> Any:
    """A byte-level BPE tokenizer trained on a few grid_world strings, with TRL's Qwen3 chat template."""
    trl = pytest.importorskip("trl")
    pytest.importorskip("tokenizers", reason="training the tiny tokenizer needs tokenizers (nox -s trl)")
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<tool_call>", "</tool_call>", "<think>",
                "</think>", "<tool_response>", "</tool_response>"]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    corpus = ['{"name": "step", "arguments": {"move": "down"}}', "user assistant system tool reach the goal",
              '{"position":[0,0],"goal":[4,4],"legal_actions":["down","right"]}', "up down left right"] * 20
    tok.train_from_iterator(corpus, trainers.BpeTrainer(vocab_size=400, special_tokens=specials,
                                                        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>",
                                   padding_side="left")
    fast.chat_template = (Path(trl.__file__).parent / "chat_templates" / "qwen3.jinja").read_text()
    return fast


@pytest.fixture(scope="session")
def tiny_model() -> Callable[[Any], Any]:
    """``tiny_model(tokenizer)``: a fresh 2-layer Qwen2 with random weights (seeded) for that vocabulary."""
    torch = pytest.importorskip("torch")
    from transformers import Qwen2Config, Qwen2ForCausalLM

    def build(tokenizer: Any) -> Any:
        torch.manual_seed(0)
        config = Qwen2Config(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                             num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=1024,
                             eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id)
        return Qwen2ForCausalLM(config)

    return build
