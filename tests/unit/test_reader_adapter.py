"""The reader adapter: its training loop, resume, example encoding, conversion and checks.

Training runs on a tiny randomly initialised model of the local model's architecture
(Qwen2: 2 layers, width 32), so every test takes seconds and downloads nothing.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from mindscape.errors import ModelError
from mindscape.models import adapter, lora

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
pytest.importorskip("peft")

VOCAB = 64


def tiny_model() -> Any:
    """A Qwen2 model of two layers with fixed random weights."""
    config = transformers.Qwen2Config(
        vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
        tie_word_embeddings=True, initializer_range=0.5,
    )  # fmt: skip
    torch.manual_seed(1)
    return transformers.Qwen2ForCausalLM(config)


def examples(n: int = 8) -> list[lora.Example]:
    return [lora.Example(f"q{i}", "sys", f"passage {i} question", f"answer {i}") for i in range(n)]


class Recorder:
    """An encoder over byte values that records which examples it was asked for."""

    def __init__(self, fail_at: int | None = None) -> None:
        self.seen: list[str] = []
        self.fail_at = fail_at

    def __call__(self, tokenizer: Any, ex: lora.Example, limit: int) -> tuple[list[int], int]:
        if self.fail_at is not None and len(self.seen) == self.fail_at:
            raise KeyboardInterrupt  # the run is killed here
        self.seen.append(ex.qid)
        prompt = [b % VOCAB for b in (ex.system + ex.user).encode()][-limit:]
        return prompt + [b % VOCAB for b in ex.answer.encode()], len(prompt)


SETTINGS = lora.LoraSettings(
    rank=4, alpha=8, layers=1, accumulate=2, checkpoint_every=1, lr=1e-2, warmup=1
)


def adapter_weights(peft_model: Any) -> dict[str, Any]:
    from peft import get_peft_model_state_dict

    return {k: v.detach().clone() for k, v in get_peft_model_state_dict(peft_model).items()}


def test_training_lowers_the_answer_loss_and_adapts_only_the_top_layers(tmp_path: Path) -> None:
    exs = [lora.Example(f"q{i}", "s", "same question", "same answer") for i in range(16)]
    _, result = lora.train(
        tiny_model(), None, exs, replace(SETTINGS, layers=0, lr=5e-2), tmp_path / "all",
        encoder=Recorder(), show_progress=False,
    )  # fmt: skip
    assert result.steps == 8 and result.examples_seen == 16
    assert result.losses[-1] < result.losses[0] * 0.5
    model, _ = lora.train(
        tiny_model(), None, exs, SETTINGS, tmp_path / "top", encoder=Recorder(),
        show_progress=False,
    )  # fmt: skip
    names = list(adapter_weights(model))
    assert names and all(".layers.1." in n for n in names)  # layers=1: the top layer only


def test_a_killed_run_resumes_where_it_stopped_and_ends_as_an_unbroken_run(
    tmp_path: Path,
) -> None:
    straight = Recorder()
    whole, _ = lora.train(
        tiny_model(), None, examples(), SETTINGS, tmp_path / "a", encoder=straight,
        show_progress=False,
    )  # fmt: skip
    assert sorted(straight.seen) == sorted(e.qid for e in examples())  # each once
    assert straight.seen == [f"q{i}" for i in lora.order(8, SETTINGS.seed)]

    killed = Recorder(fail_at=5)  # killed inside the third step (examples 5 and 6)
    with pytest.raises(KeyboardInterrupt):
        lora.train(
            tiny_model(), None, examples(), SETTINGS, tmp_path / "b", encoder=killed,
            show_progress=False,
        )  # fmt: skip
    info = json.loads((tmp_path / "b" / "run.json").read_text())
    assert info["seen"] == 4 and info["steps"] == 2
    again = Recorder()
    resumed, result = lora.train(
        tiny_model(), None, examples(), SETTINGS, tmp_path / "b", encoder=again,
        show_progress=False,
    )  # fmt: skip
    assert result.resumed_from == 4 and result.examples_seen == 8
    assert again.seen == straight.seen[4:]  # no example of a finished step read again
    a, b = adapter_weights(whole), adapter_weights(resumed)
    assert a.keys() == b.keys()
    assert all(torch.allclose(a[k], b[k], atol=1e-6) for k in a)


def test_max_examples_stops_a_run_and_a_later_call_continues_it(tmp_path: Path) -> None:
    first = Recorder()
    _, r1 = lora.train(
        tiny_model(), None, examples(), SETTINGS, tmp_path, max_examples=4, encoder=first,
        show_progress=False,
    )  # fmt: skip
    second = Recorder()
    _, r2 = lora.train(
        tiny_model(), None, examples(), SETTINGS, tmp_path, encoder=second, show_progress=False
    )
    assert (r1.examples_seen, r2.resumed_from, r2.examples_seen) == (4, 4, 8)
    assert not set(first.seen) & set(second.seen)


def test_a_damaged_checkpoint_is_a_one_line_error(tmp_path: Path) -> None:
    (tmp_path / "state.pt").write_bytes(b"not a checkpoint")
    with pytest.raises(ModelError, match="cannot be read") as err:
        lora.train(tiny_model(), None, examples(), SETTINGS, tmp_path, encoder=Recorder())
    assert "\n" not in str(err.value)


def test_the_run_key_changes_with_settings_examples_and_model() -> None:
    key = lora.run_key(SETTINGS, examples(), "abc")
    assert key == lora.run_key(SETTINGS, examples(), "abc")
    assert key != lora.run_key(SETTINGS, examples(7), "abc")
    assert key != lora.run_key(lora.LoraSettings(rank=8), examples(), "abc")
    assert key != lora.run_key(SETTINGS, examples(), "abd")


class ChatmlTokenizer:
    """A word-level stand-in for the model's tokenizer: the Qwen chat template, whitespace
    words, and the end-of-turn token as its own id."""

    unk_token_id = 0
    eos_token_id = 1

    def __init__(self) -> None:
        self.vocab: dict[str, int] = {"<unk>": 0, "<|endoftext|>": 1, "<|im_end|>": 2}

    def apply_chat_template(self, messages: list[dict[str, str]], **kw: Any) -> str:
        assert kw == {"add_generation_prompt": True, "tokenize": False}
        turns = "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in messages)
        return turns + "<|im_start|>assistant\n"

    def __call__(self, text: str, add_special_tokens: bool) -> dict[str, list[int]]:
        assert not add_special_tokens
        words = text.replace("<|im_end|>", " <|im_end|> ").replace("\n", " \n ").split(" ")
        return {"input_ids": [self.vocab.setdefault(w, len(self.vocab)) for w in words if w]}

    def convert_tokens_to_ids(self, token: str) -> int:
        return self.vocab.get(token, 0)

    def words(self, ids: list[int]) -> list[str]:
        back = {i: w for w, i in self.vocab.items()}
        return [back[i] for i in ids]


def test_encode_reads_the_chat_template_and_ends_the_answer_with_the_turn_end() -> None:
    tok = ChatmlTokenizer()
    ex = lora.Example("q", "a passage", "who ran ?", "the fox")
    ids, n_prompt = lora.encode(tok, ex, max_prompt_tokens=100)
    words = tok.words(ids)
    assert words[:n_prompt][-2:] == ["<|im_start|>assistant", "\n"]
    assert words[n_prompt:] == ["the", "fox", "<|im_end|>"]  # the answer, then the turn's end
    assert "who" in words[:n_prompt] and "passage" in words[:n_prompt]
    short, n_short = lora.encode(tok, ex, max_prompt_tokens=5)
    assert n_short == 5 and short[:5] == ids[n_prompt - 5 : n_prompt]  # keeps the prompt's end
    assert short[5:] == ids[n_prompt:]


# ---- the shipped adapter's checks ---------------------------------------------------------


def shipped_like(tmp_path: Path, base: str = "base-sha") -> Path:
    (tmp_path / adapter.ADAPTER_FILE).write_bytes(b"GGUF" + b"\0" * 60)
    adapter.write_manifest(tmp_path, base_sha256=base, provenance="test", training={})
    return tmp_path


def test_a_matching_adapter_passes_its_checks(tmp_path: Path) -> None:
    folder = shipped_like(tmp_path)
    assert adapter.check_adapter(folder, "base-sha") == folder / adapter.ADAPTER_FILE


@pytest.mark.parametrize(
    ("damage", "words"),
    [
        (lambda f: (f / adapter.ADAPTER_FILE).write_bytes(b"GGUF" + b"\1" * 60), "manifest"),
        (lambda f: (f / adapter.ADAPTER_FILE).unlink(), "no reader adapter"),
        (lambda f: (f / adapter.MANIFEST).write_text("{"), "cannot be read"),
    ],
)
def test_a_damaged_adapter_is_one_line_naming_the_make_target(
    tmp_path: Path, damage: Any, words: str
) -> None:
    folder = shipped_like(tmp_path)
    damage(folder)
    with pytest.raises(ModelError, match=words) as err:
        adapter.check_adapter(folder, "base-sha")
    assert "\n" not in str(err.value) and "make reader-adapter" in str(err.value)


def test_an_adapter_for_another_model_is_refused(tmp_path: Path) -> None:
    folder = shipped_like(tmp_path, base="other-model")
    with pytest.raises(ModelError, match="another model"):
        adapter.check_adapter(folder, "base-sha")
    with pytest.raises(ModelError, match="another model"):
        adapter.check_adapter(folder, None)  # a model of the user's own


def test_resolve_adapter_turns_it_off_or_takes_a_gguf(tmp_path: Path) -> None:
    model = tmp_path / "m.gguf"
    for off in ("none", "off", "0", None):
        assert adapter.resolve_adapter(off, model) is None  # the default is off
    folder = shipped_like(tmp_path)
    assert adapter.resolve_adapter(str(folder), model) == folder / adapter.ADAPTER_FILE
    (tmp_path / "bad.gguf").write_bytes(b"nope")
    with pytest.raises(ModelError, match="not a GGUF"):
        adapter.resolve_adapter(str(tmp_path / "bad.gguf"), model)
    with pytest.raises(ModelError, match="no reader adapter"):
        adapter.resolve_adapter(str(tmp_path / "missing.gguf"), model)


def test_the_server_loads_the_adapter_beside_the_model(tmp_path: Path) -> None:
    from mindscape.models.server import llama_server_args

    plain = llama_server_args(Path("m.gguf"), 1, threads=1, n_ctx=64)
    with_lora = llama_server_args(Path("m.gguf"), 1, threads=1, n_ctx=64, adapter=Path("a.gguf"))
    assert "--lora_path" not in plain
    assert with_lora[with_lora.index("--lora_path") + 1] == "a.gguf"


def test_the_setting_comes_from_the_environment_and_the_cli(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from mindscape.llm import LLMSettings

    assert LLMSettings().reader_adapter == "none"
    monkeypatch.setenv("MINDSCAPE_READER_ADAPTER", "shipped")
    assert LLMSettings.from_env().reader_adapter == "shipped"
    assert LLMSettings.from_env(reader_adapter="none").reader_adapter == "none"


# ---- conversion for llama.cpp ---------------------------------------------------------------


def test_conversion_writes_a_lora_gguf_llama_cpp_reads(tmp_path: Path) -> None:
    from tests.conftest import require

    tools = lora.llama_cpp_tools_path()
    require(tools.joinpath("convert_lora_to_gguf.py").is_file(), "no llama.cpp converter", "model")
    gguf = pytest.importorskip("gguf")
    model, _ = lora.train(
        tiny_model(), None, examples(4), SETTINGS, tmp_path / "run", encoder=Recorder(),
        show_progress=False,
    )  # fmt: skip
    out = lora.convert_to_gguf(model, tmp_path / "a.gguf")
    reader = gguf.GGUFReader(out)
    names = {t.name for t in reader.tensors}
    assert "blk.1.attn_q.weight.lora_a" in names and "blk.1.ffn_down.weight.lora_b" in names
    assert not any(n.startswith("blk.0.") for n in names)  # the bottom layer is not adapted
    kind = reader.fields["general.type"]
    assert bytes(kind.parts[kind.data[0]]).decode() == "adapter"
    alpha = reader.fields["adapter.lora.alpha"]
    assert float(alpha.parts[alpha.data[0]][0]) == SETTINGS.alpha
