"""Teach the local reader: a LoRA adapter trained on the CPU, resumable, converted for llama.cpp.

The reader's weights are the GGUF file llama.cpp serves. transformers reads that file
(de-quantised to float32), PEFT puts low-rank adapters on the top decoder layers, and torch
trains them on the CPU with the loss on the answer tokens only:

* **examples** are ``(system, user, answer)`` triples in the exact prompt the pipeline's
  reader sends (``benchmarks/reader/adapter.py`` builds them from ``../shared/train``);
  :func:`encode` renders them with the model's own chat template, so training reads the
  tokens llama.cpp reads;
* **order** is fixed: the examples are shuffled once with the run's seed and read once each,
  ``accumulate`` examples to an optimizer step;
* **checkpoints** (:class:`Checkpoints`) go under the model cache (``<cache>/reader-adapter/
  <run>``), never into git: adapter and optimizer state, the next example's index and the
  random state, written atomically every ``checkpoint_every`` optimizer steps. A killed run
  started again with the same settings and examples goes on from its last checkpoint, and
  no example is seen twice;
* the loss needs the logits of the answer tokens only, so the language-model head (151,936
  rows) is applied to those positions, not to the ~500 prompt positions;
* :func:`convert_to_gguf` turns the PEFT adapter into llama.cpp's LoRA GGUF with llama.cpp's
  own ``convert_lora_to_gguf.py``, taken from the llama-cpp-python source distribution that
  ``make model`` builds from (:func:`llama_cpp_tools`).

torch, transformers and PEFT are imported inside the functions that need them: the rest of
mindscape never loads them for this module.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import random
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from mindscape.errors import ModelError
from mindscape.models.cache import cache_root, progress_bar

__all__ = [
    "Checkpoints",
    "Example",
    "LoraSettings",
    "TrainResult",
    "convert_to_gguf",
    "encode",
    "llama_cpp_tools",
    "load_base",
    "run_key",
    "train",
]

TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
"""Every linear map of a decoder layer: attention and MLP."""
LLAMA_CPP_VERSION = "0.3.36"
"""The llama-cpp-python release whose source distribution holds the converter (the one
``make model`` builds; pinned in pyproject's ``local`` extra)."""


@dataclass(frozen=True)
class Example:
    """One training example: the reader's prompt and the reply it should give."""

    qid: str
    system: str
    user: str
    answer: str


@dataclass(frozen=True)
class LoraSettings:
    """What a training run is: the adapter's shape, the schedule and the order."""

    rank: int = 16
    alpha: int = 32
    layers: int = 8
    """Adapters on the top ``layers`` decoder layers (0: every layer)."""
    targets: tuple[str, ...] = TARGETS
    lr: float = 2e-4
    warmup: int = 4
    """Optimizer steps of linear warm-up; the rate is constant after it, so a longer run is
    the shorter one continued."""
    accumulate: int = 2
    """Examples per optimizer step (their gradients summed, then averaged)."""
    max_prompt_tokens: int = 1536
    """A longer prompt keeps its last tokens (the question and the passage's end)."""
    seed: int = 0
    checkpoint_every: int = 5
    """Optimizer steps between checkpoints."""
    threads: int = 2

    def describe(self) -> dict[str, Any]:
        return {**asdict(self), "targets": list(self.targets)}


@dataclass
class TrainResult:
    """What a call of :func:`train` did."""

    examples_seen: int
    """Examples trained on by the run so far (this call and the earlier ones it resumed)."""
    steps: int
    resumed_from: int
    """Examples already seen when this call started (0: a fresh run)."""
    seconds: float
    losses: list[float] = field(default_factory=list)
    """This call's loss per optimizer step (mean over its examples)."""


def run_key(settings: LoraSettings, examples: Sequence[Example], base_id: str) -> str:
    """A short name for a run: the same settings, examples and base model give the same key,
    so a restarted run finds its checkpoints and a changed one starts afresh."""
    digest = hashlib.sha256()
    digest.update(json.dumps(settings.describe(), sort_keys=True).encode())
    digest.update(base_id.encode())
    for ex in examples:
        digest.update(json.dumps(asdict(ex), sort_keys=True).encode())
    return digest.hexdigest()[:16]


def default_run_dir(key: str) -> Path:
    """Where a run's checkpoints live (the model cache, never the repository)."""
    return cache_root() / "reader-adapter" / key


# ---- the model ------------------------------------------------------------------------------


def load_base(model_file: Path, threads: int = 2) -> tuple[Any, Any]:
    """The GGUF model de-quantised to float32 for training, and its tokenizer (transformers
    reads the GGUF directly; about 90 s and 7 GB for the 1.5B model)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.set_num_threads(threads)
    folder, name = str(model_file.parent), model_file.name
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    if not tokenizer.chat_template:  # the template llama.cpp applies is the file's own
        tokenizer.chat_template = gguf_chat_template(model_file)
    model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.float32)
    return model, tokenizer


def gguf_chat_template(model_file: Path) -> str:
    """The chat template a GGUF file carries (``tokenizer.chat_template``)."""
    from gguf import GGUFReader

    field = GGUFReader(model_file).fields.get("tokenizer.chat_template")
    if field is None:
        raise ModelError(f"{model_file} carries no chat template")
    return bytes(field.parts[field.data[0]]).decode()


def encode(tokenizer: Any, ex: Example, max_prompt_tokens: int) -> tuple[list[int], int]:
    """``(token ids, prompt length)``: the prompt as the chat template renders it for a reply
    (what llama.cpp's chat completion reads), then the answer and the end-of-turn token."""
    messages = [{"role": "system", "content": ex.system}, {"role": "user", "content": ex.user}]
    prompt = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    prompt_ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
    end = tokenizer.convert_tokens_to_ids("<|im_end|>")
    if not isinstance(end, int) or end < 0 or end == tokenizer.unk_token_id:
        end = tokenizer.eos_token_id
    answer_ids = tokenizer(ex.answer, add_special_tokens=False)["input_ids"] + [end]
    prompt_ids = prompt_ids[-max_prompt_tokens:]
    return prompt_ids + answer_ids, len(prompt_ids)


def with_adapter(model: Any, settings: LoraSettings) -> Any:
    """``model`` wrapped by PEFT with fresh LoRA weights (seeded) on the chosen layers."""
    import torch
    from peft import LoraConfig, get_peft_model

    n_layers = model.config.num_hidden_layers
    top = settings.layers or n_layers
    config = LoraConfig(
        r=settings.rank,
        lora_alpha=settings.alpha,
        lora_dropout=0.0,
        target_modules=list(settings.targets),
        layers_to_transform=list(range(n_layers - top, n_layers)),
        task_type="CAUSAL_LM",
    )
    torch.manual_seed(settings.seed)
    return get_peft_model(model, config)


def answer_loss(peft_model: Any, ids: list[int], n_prompt: int) -> Any:
    """Mean cross-entropy of the answer tokens given the prompt; the head sees only the
    positions that predict them."""
    import torch
    import torch.nn.functional as F

    inner = peft_model.get_base_model()
    x = torch.tensor([ids])
    hidden = inner.model(input_ids=x).last_hidden_state[0]
    targets = x[0, n_prompt:]
    logits = inner.lm_head(hidden[n_prompt - 1 : len(ids) - 1])
    return F.cross_entropy(logits.float(), targets)


# ---- checkpoints ----------------------------------------------------------------------------


class Checkpoints:
    """A run's folder: ``state.pt`` (adapter weights, optimizer, next example, random state)
    and ``run.json`` (settings and progress, for people). Written atomically."""

    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder)

    @property
    def state_file(self) -> Path:
        return self.folder / "state.pt"

    def load(self) -> dict[str, Any] | None:
        import torch

        if not self.state_file.is_file():
            return None
        try:
            state: dict[str, Any] = torch.load(self.state_file, weights_only=False)
        except Exception as exc:  # a damaged checkpoint: say so, never train over it silently
            raise ModelError(
                f"the reader adapter's checkpoint {self.state_file} cannot be read ({exc}); "
                "delete that folder to start the run again"
            ) from exc
        return state

    def restore(self, peft_model: Any, opt: Any) -> tuple[int, int]:
        """(examples seen, steps taken) by the run saved here, its adapter, optimizer and
        torch RNG restored into ``peft_model`` and ``opt``; (0, 0) when none was saved."""
        import torch

        state = self.load()
        if state is None:
            return 0, 0
        from peft import set_peft_model_state_dict

        set_peft_model_state_dict(peft_model, state["adapter"])
        opt.load_state_dict(state["optimizer"])
        torch.set_rng_state(state["torch_rng"])
        return state["seen"], state["step"]

    def keep(self, peft_model: Any, opt: Any, info: dict[str, Any]) -> None:
        """Save the run so far: the adapter, the optimizer and torch's RNG in ``state.pt``,
        ``info`` (settings and progress, ``seen`` and ``steps`` among them) in ``run.json``."""
        import torch
        from peft import get_peft_model_state_dict

        state = {"adapter": get_peft_model_state_dict(peft_model), "optimizer": opt.state_dict()}
        state |= {"seen": info["seen"], "step": info["steps"], "torch_rng": torch.get_rng_state()}
        self.folder.mkdir(parents=True, exist_ok=True)
        tmp = self.state_file.with_suffix(".tmp")
        torch.save(state, tmp)
        os.replace(tmp, self.state_file)
        info_tmp = self.folder / "run.json.tmp"
        info = {**info, "updated": time.strftime("%Y-%m-%dT%H:%M:%S")}
        info_tmp.write_text(json.dumps(info, indent=1) + "\n")
        os.replace(info_tmp, self.folder / "run.json")


def _lr_at(step: int, settings: LoraSettings) -> float:
    """The learning rate of optimizer step ``step`` (0-based): linear warm-up, then constant."""
    if step < settings.warmup:
        return settings.lr * (step + 1) / settings.warmup
    return settings.lr


def order(n: int, seed: int) -> list[int]:
    """The fixed order a run reads its ``n`` examples in."""
    idx = list(range(n))
    random.Random(seed).shuffle(idx)
    return idx


def train(
    model: Any,
    tokenizer: Any,
    examples: Sequence[Example],
    settings: LoraSettings,
    run_dir: Path,
    *,
    max_examples: int | None = None,
    show_progress: bool = True,
    encoder: Callable[[Any, Example, int], tuple[list[int], int]] = encode,
    on_step: Callable[[int, float], None] | None = None,
) -> tuple[Any, TrainResult]:
    """Train (or go on training) the adapter on ``examples`` in their fixed order, up to
    ``max_examples`` examples in all (None: every example, once); returns the PEFT model
    and what was done. Checkpoints are written to ``run_dir`` every
    ``settings.checkpoint_every`` optimizer steps and at the end."""
    import torch

    torch.set_num_threads(settings.threads)
    peft_model = with_adapter(model, settings)
    params = [p for p in peft_model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=settings.lr, weight_decay=0.0)
    ckpt = Checkpoints(run_dir)
    seen, step = ckpt.restore(peft_model, opt)
    ids_order = order(len(examples), settings.seed)
    end = min(len(examples), max_examples if max_examples is not None else len(examples))
    result = TrainResult(seen, step, seen, 0.0)
    t0 = time.perf_counter()
    bar = progress_bar(show_progress, end, "reader adapter", "example")
    bar.update(seen)

    def checkpoint() -> None:
        info = {"settings": settings.describe(), "examples": len(examples), "seen": seen}
        ckpt.keep(peft_model, opt, {**info, "steps": step, "losses": result.losses[-50:]})

    peft_model.train()
    try:
        while seen < end:
            rows = ids_order[seen : min(seen + settings.accumulate, end)]
            batch = [encoder(tokenizer, examples[i], settings.max_prompt_tokens) for i in rows]
            total = _step(peft_model, opt, batch, _lr_at(step, settings), bar)
            if not math.isfinite(total):
                raise ModelError(f"the reader adapter's loss is {total} at step {step}")
            seen += len(batch)
            step += 1
            result.losses.append(total)
            bar.set_postfix(loss=f"{total:.3f}")
            if on_step is not None:
                on_step(step, total)
            if step % settings.checkpoint_every == 0:
                checkpoint()
    finally:
        bar.close()
    checkpoint()
    result.examples_seen, result.steps = seen, step
    result.seconds = time.perf_counter() - t0
    return peft_model, result


def _step(
    peft_model: Any, opt: Any, batch: list[tuple[list[int], int]], lr: float, bar: Any
) -> float:
    """One optimizer step at learning rate ``lr`` over ``batch`` (each example's token ids
    and prompt length): the batch's mean answer loss, its gradient accumulated example by
    example; returns that loss (a loss that is not finite takes no step)."""
    for group in opt.param_groups:
        group["lr"] = lr
    opt.zero_grad(set_to_none=True)
    total = 0.0
    for ids, n_prompt in batch:
        loss = answer_loss(peft_model, ids, n_prompt) / len(batch)
        loss.backward()
        total += float(loss.detach())
        bar.update(1)
    if math.isfinite(total):
        opt.step()
    return total


# ---- conversion for llama.cpp ---------------------------------------------------------------


def llama_cpp_tools_path() -> Path:
    """Where :func:`llama_cpp_tools` keeps llama.cpp's conversion scripts."""
    return cache_root() / "tools" / f"llama.cpp-{LLAMA_CPP_VERSION}"


def llama_cpp_tools(sdist: Path | None = None) -> Path:
    """llama.cpp's conversion scripts (``convert_lora_to_gguf.py`` and what it imports), taken
    out of the llama-cpp-python source distribution into the model cache once (``make
    model`` does it). ``sdist`` is that archive; without it pip downloads it from the
    registry ``make model`` builds from."""
    root = llama_cpp_tools_path()
    script = root / "convert_lora_to_gguf.py"
    if script.is_file():
        return root
    with tempfile.TemporaryDirectory() as tmp:
        if sdist is None:
            got = subprocess.run(
                [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-binary",
                 ":all:", f"llama-cpp-python=={LLAMA_CPP_VERSION}", "-d", tmp],
                capture_output=True, text=True,
            )  # fmt: skip
            found = sorted(Path(tmp).glob("llama_cpp_python-*.tar.gz"))
            if got.returncode != 0 or not found:
                last = (got.stderr.strip().splitlines() or ["no archive"])[-1]
                raise ModelError(
                    f"could not fetch llama-cpp-python {LLAMA_CPP_VERSION}'s source for its "
                    f"LoRA converter: {last}"
                )
            sdist = found[0]
        prefix = f"llama_cpp_python-{LLAMA_CPP_VERSION}/vendor/llama.cpp/"
        wanted = ("convert_lora_to_gguf.py", "convert_hf_to_gguf.py", "conversion/", "gguf-py/")
        staging = Path(tmp) / "out"
        with tarfile.open(sdist) as tar:
            members = [
                m
                for m in tar.getmembers()
                if m.name.startswith(prefix) and m.name[len(prefix) :].startswith(wanted)
            ]
            for m in members:
                m.name = m.name[len(prefix) :]
            tar.extractall(staging, members=members, filter="data")
        if not (staging / "convert_lora_to_gguf.py").is_file():
            raise ModelError(f"{sdist} holds no convert_lora_to_gguf.py")
        root.parent.mkdir(parents=True, exist_ok=True)
        shutil.rmtree(root, ignore_errors=True)
        shutil.move(str(staging), root)
    return root


def convert_to_gguf(
    peft_model: Any, out: Path, *, tools: Path | None = None, outtype: str = "f16"
) -> Path:
    """Write the adapter as llama.cpp's LoRA GGUF at ``out`` with llama.cpp's converter (the
    base model's config, which names its architecture, is all it reads of the base); a
    failure is one line naming the converter's last words."""
    import copy

    tools = tools or llama_cpp_tools()
    base = peft_model.get_base_model()
    config = copy.deepcopy(base.config)
    config.architectures = [type(base).__name__]
    if hasattr(config, "quantization_config"):  # read from a GGUF: the adapter is float
        del config.quantization_config
    with tempfile.TemporaryDirectory() as tmp:
        adapter_dir, base_dir = Path(tmp) / "adapter", Path(tmp) / "base"
        peft_model.save_pretrained(adapter_dir)
        config.save_pretrained(base_dir)
        out.parent.mkdir(parents=True, exist_ok=True)
        part = out.with_name(out.name + ".part")
        got = subprocess.run(
            [sys.executable, str(tools / "convert_lora_to_gguf.py"), "--base", str(base_dir),
             "--outtype", outtype, "--outfile", str(part), str(adapter_dir)],
            capture_output=True, text=True, env={**os.environ, "HF_HUB_OFFLINE": "1"},
        )  # fmt: skip
        if got.returncode != 0 or not part.is_file():
            last = (got.stderr.strip().splitlines() or ["no output"])[-1]
            raise ModelError(f"convert_lora_to_gguf.py failed: {last}")
        os.replace(part, out)
    return out


if __name__ == "__main__":  # `make model`: fetch the converter once, with the model
    sys.stdout.write(f"{llama_cpp_tools()}\n")
