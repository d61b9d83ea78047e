"""The QLoRA generator path (training/generator.py, llm/hf_export.py, the transformers backend's adapter):
a tiny random Qwen2 is really loaded 4-bit, only its LoRA adapters change while it learns a toy reply,
the data are the answerer's own prompt and citation format, and the backend serves the adapter."""

from __future__ import annotations

import json
from pathlib import Path
from string import Template
from typing import Any

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("bitsandbytes")
pytest.importorskip("peft")

WORDS = [
    "question",
    "reply",
    "sky",
    "grass",
    "colour",
    "blue",
    "green",
    "sources",
    "json",
    "abstain",
    "the",
    "of",
    "is",
]
CHAT = (
    "{% for m in messages %}<|im_start|> {{ m['role'] }} {{ m['content'] }} <|im_end|> {% endfor %}"
    "{% if add_generation_prompt %}<|im_start|> assistant {% endif %}"
)


def tiny_qwen(folder: Path) -> Path:
    """A 2-layer, 64-wide random decoder (bitsandbytes quantises layers >= 64 wide) with Qwen's module
    names (q/k/v/o, gate/up/down projections), a word-level tokenizer and a chat template of the same
    shape as Qwen's. OLMo 2's architecture: transformers maps its model type to a plain tokenizers
    backend, where a Qwen2 config would force Qwen's byte-level tokenizer class onto the toy vocabulary."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import Olmo2Config, Olmo2ForCausalLM, PreTrainedTokenizerFast

    specials = ["<pad>", "<unk>", "<|im_start|>", "<|im_end|>", "user", "assistant"]
    vocab = {w: i for i, w in enumerate([*specials, *WORDS, "{", "}", ":", "[", "]", "1", '"'])}
    core = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=core, pad_token="<pad>", unk_token="<unk>", eos_token="<|im_end|>", chat_template=CHAT
    )
    torch.manual_seed(0)
    config = Olmo2Config(
        vocab_size=len(vocab),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=128,
        tie_word_embeddings=False,
        # a wide init: behind the final norm, default-size (0.02) output rows cap the logits near ±1, so
        # no adapter could make one reply likely; frozen, the head must already be able to express one
        initializer_range=0.5,
    )
    Olmo2ForCausalLM(config).save_pretrained(str(folder))
    tokenizer.save_pretrained(str(folder))
    return folder


def _rows(n: int) -> list[dict[str, Any]]:
    pairs = [("question colour of the sky", "blue"), ("question colour of the grass", "green")]
    return [
        {"doc_id": f"d{i % 2}", "chunk_id": "c", "question": q, "kind": "answer", "prompt": q, "completion": a}
        for i in range(n)
        for q, a in [pairs[i % 2]]
    ]


def _trainer(tmp_path: Path, base: Path, data: Path, **fit: Any) -> Any:
    from fixgraph.training.generator import QLoRATrainer

    return QLoRATrainer(
        name="tiny",
        data_dir=str(data),
        output=str(tmp_path / "adapter"),
        base_model=str(base),
        data={"qa_pairs": "unused.jsonl"},
        lora={
            "r": 4,
            "lora_alpha": 8,
            "lora_dropout": 0.0,
            "target_modules": ["q_proj", "v_proj", "up_proj", "down_proj"],
        },
        max_length=64,
        batch_size=2,
        learning_rate=3e-2,
        optimizer="paged_adamw_8bit",
        fit={"epochs": 10, "patience": 10, "threads": 1, **fit},
    )


def test_qlora_quantises_and_trains_only_the_adapters(tmp_path: Path) -> None:
    from torch.utils.data import DataLoader

    from fixgraph.llm.hf_export import count_4bit_layers
    from fixgraph.training.fit import fit
    from fixgraph.training.nets.generator import ChatCollator, GeneratorModule
    from fixgraph.training.settings import FitSettings
    from tests.training_helpers import save_rows

    data = save_rows(tmp_path / "data", _rows(8), _rows(2))
    trainer = _trainer(tmp_path, tiny_qwen(tmp_path / "base"), data)
    tokenizer, model, quantized = trainer.load_model()
    assert quantized == count_4bit_layers(model) == 2 * 7  # q k v o gate up down in both layers
    before = {k: v.detach().clone() for k, v in model.state_dict().items()}
    rows, dropped = trainer.tokenized(tokenizer, _rows(8))
    assert tokenizer.unk_token_id not in rows[0]["input_ids"]  # every token of the toy chat is known
    assert not dropped and all(r["prompt_tokens"] < len(r["input_ids"]) for r in rows)
    loader = DataLoader(rows, batch_size=2, shuffle=False, collate_fn=ChatCollator(tokenizer))  # type: ignore[arg-type]
    module = GeneratorModule(model, 3e-2, 0.0, "paged_adamw_8bit")
    result = fit(module, loader, loader, FitSettings(epochs=10, patience=10, threads=1), tmp_path / "work")
    assert result.val_losses[-1] < 0.5 * result.first_val_loss  # it learns the two replies
    after = module.model.state_dict()
    changed = {k for k, v in before.items() if not torch.equal(v, after[k])}
    assert changed and all("lora_" in k for k in changed)  # 4-bit base, norms, embeddings untouched
    assert {k for k in before if "lora_" in k and "weight" in k} >= {k for k in changed if "lora_B" in k}
    ckpt = torch.load(tmp_path / "work" / "checkpoints" / "last.ckpt", weights_only=False)["state_dict"]
    assert ckpt and all("lora_" in k for k in ckpt)  # checkpoints hold the adapters only


def test_trainer_saves_the_adapter_and_the_backend_serves_it(tmp_path: Path) -> None:
    from fixgraph.llm.backends.transformers_local import TransformersLLM
    from tests.training_helpers import save_rows

    data = save_rows(tmp_path / "data", _rows(8), _rows(2))
    base = tiny_qwen(tmp_path / "base")
    trainer = _trainer(tmp_path, base, data, epochs=4)
    out = tmp_path / "adapter"
    out.mkdir()
    facts = trainer.train(None, data, out, tmp_path / "work", None)  # type: ignore[arg-type]
    assert facts["quantized_layers"] == 14 and facts["examples"] == {"train": 8, "validation": 2}
    assert set(facts["weights_sha256"]) == {"adapter_model.safetensors"}
    assert json.loads((out / "adapter_config.json").read_text())["r"] == 4
    served = TransformersLLM(name="tiny", model=str(base), dtype="float32", quantization="nf4", adapter=str(out))
    plain = TransformersLLM(name="tiny", model=str(base), dtype="float32")
    assert served.identity() != plain.identity()
    assert not list(out.glob("*.sha256"))  # identity hashes the adapter without writing into its folder
    completion = served.complete("question colour of the sky", max_tokens=3)
    assert completion.output_tokens >= 1 and isinstance(completion.text, str)
    with pytest.raises(Exception, match="no adapter"):
        TransformersLLM(name="tiny", model=str(base), quantization="nf4", adapter=str(tmp_path / "none")).identity()


def test_examples_are_the_answerers_prompt_with_a_citation_of_the_gold_chunk() -> None:
    from fixgraph.answer.prompts import PROMPTS
    from fixgraph.training.corpus_qa import QAPair
    from fixgraph.training.generator import QAData, build_examples, prompt_path
    from tests.unit.test_distill import _toy_corpus

    _, chunks = _toy_corpus()
    assert prompt_path("answer_grounded_v1") == PROMPTS.folder / "answer_grounded_v1.txt"
    template = Template(prompt_path("answer_grounded_v1").read_text(encoding="utf-8"))
    pair = QAPair("hub-0", "hub", "My hub froze. What now?", "Hold the reset button. Use a paper clip.", 1.0, "p", "m")
    data = QAData(qa_pairs="x", distractors=2, abstain_fraction=1.0, seed=0)
    answer, abstain = build_examples(chunks, [pair], template, data)
    reply = json.loads(answer["completion"])
    assert reply["abstain"] is False and [s["text"] for s in reply["sentences"]] == [
        "Hold the reset button.",
        "Use a paper clip.",
    ]
    cited = reply["sentences"][0]["citations"][0]
    assert f"[{cited}] (Reset the hub)\nHold the reset button" in answer["prompt"]
    assert "My hub froze. What now?" in answer["prompt"] and answer["prompt"].count("\n[") == 3  # gold + 2 others
    assert json.loads(abstain["completion"]) == {"abstain": True, "sentences": []}
    assert "Hold the reset button" not in abstain["prompt"]  # the gold chunk is not in its context


def test_the_backend_device_is_checked_and_cached_apart(tmp_path: Path) -> None:
    from fixgraph.llm.backends.transformers_local import TransformersLLM
    from fixgraph.llm.base import LLMUnavailableError
    from fixgraph.training.settings import FitSettings

    base = tiny_qwen(tmp_path / "base")
    with pytest.raises(ValueError, match="unknown device 'tpu'"):
        TransformersLLM(name="tiny", model=str(base), device="tpu")
    cpu = TransformersLLM(name="tiny", model=str(base), dtype="float32")
    gpu = TransformersLLM(name="tiny", model=str(base), dtype="float32", device="cuda")
    assert cpu.identity() != gpu.identity()  # GPU replies never answer a CPU run from the cache
    assert FitSettings(epochs=1, accelerator="cpu").device() == "cpu"
    if not torch.cuda.is_available():
        assert FitSettings(epochs=1, accelerator="gpu").device() == "cpu"  # lightning then names the problem
        with pytest.raises(LLMUnavailableError, match="torch sees no GPU"):
            gpu.complete("question", max_tokens=1)
