"""A tiny causal LM and a tokenizer built on the spot (nothing is downloaded).

The tokenizer is a byte-level BPE trained here on a small corpus, with a ChatML chat template that
renders tools, assistant tool calls and tool results; the model is a 2-layer Qwen2 with seeded
random weights. Both are real: the ids, logprobs and text that the test model server returns come
from them, so a gateway test can compare what it captured with what the engine computed.
"""

from __future__ import annotations

from typing import Any

__all__ = ["CHAT_TEMPLATE", "SPECIAL_TOKENS", "build_model", "build_tokenizer"]

SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<tool_call>", "</tool_call>",
                  "<tool_response>", "</tool_response>"]

#: ChatML, with tools in the system turn and tool calls/results as tagged JSON (Qwen's convention).
CHAT_TEMPLATE = (
    "{%- if tools %}<|im_start|>system\n"
    "{%- if messages[0]['role'] == 'system' %}{{ messages[0]['content'] }}\n{% endif -%}"
    "# Tools\n{%- for tool in tools %}\n{{ tool | tojson }}{%- endfor %}<|im_end|>\n"
    "{%- endif %}"
    "{%- for message in messages %}"
    "{%- if not (tools and loop.first and message['role'] == 'system') %}"
    "<|im_start|>{{ message['role'] }}\n"
    "{%- if message['role'] == 'tool' %}<tool_response>{{ message['content'] }}</tool_response>"
    "{%- else %}{{ message['content'] if message['content'] is string else '' }}{%- endif %}"
    "{%- if message.get('tool_calls') %}{%- for call in message['tool_calls'] %}"
    "<tool_call>{\"name\": \"{{ call['function']['name'] }}\", \"arguments\": "
    "{{ call['function']['arguments'] }}}</tool_call>"
    "{%- endfor %}{%- endif %}"
    "<|im_end|>\n"
    "{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}<|im_start|>assistant\n{%- endif %}"
)

_CORPUS = [
    "user assistant system tool the answer is 42",
    "Write a function that adds two numbers. def add(a, b): return a + b",
    '{"name": "run", "arguments": {"command": "ls -la"}}',
    "hello world, how are you today? I am fine, thank you.",
    "The quick brown fox jumps over the lazy dog 0123456789",
]


def build_tokenizer(vocab_size: int = 512) -> Any:
    """A ``PreTrainedTokenizerFast`` trained here, with ``CHAT_TEMPLATE``; ``eos`` is ``<|im_end|>``."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(_CORPUS * 20, trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=SPECIAL_TOKENS, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>")
    fast.chat_template = CHAT_TEMPLATE
    return fast


def build_model(tokenizer: Any, seed: int = 0, hidden_size: int = 64, layers: int = 2) -> Any:
    """A fresh Qwen2 causal LM with seeded random weights for ``tokenizer``'s vocabulary (eval mode)."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(seed)
    config = Qwen2Config(vocab_size=len(tokenizer), hidden_size=hidden_size, intermediate_size=2 * hidden_size,
                         num_hidden_layers=layers, num_attention_heads=2, num_key_value_heads=1,
                         max_position_embeddings=4096, eos_token_id=tokenizer.eos_token_id,
                         pad_token_id=tokenizer.pad_token_id, tie_word_embeddings=False)
    model = Qwen2ForCausalLM(config)
    model.eval()
    return model
