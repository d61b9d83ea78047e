"""QLoRA fine-tuning of the answer generator on grounded corpus Q/A pairs (trainer kind `qlora`).

Base: Qwen2.5-Coder-0.5B-Instruct from the GGUF the project assembles, exported once to safetensors
(fixgraph/llm/hf_export.py), loaded 4-bit NF4 by bitsandbytes (its CPU backend works here), with peft
LoRA adapters on the attention and MLP projections; only the adapters train. Optimiser: bitsandbytes'
paged 8-bit AdamW (`optimizer`), which runs on CPU too; `adamw` for torch's.

Data (`train-data`): each generated pair (`fixgraph corpus-qa`: a question and an answer from one chunk,
never a benchmark question) becomes the exact prompt the grounded answerer sends (`data.prompt`, the
answer prompt file; its numbered context = the pair's chunk + `distractors` BM25 neighbours from other
pages, random other-page chunks when BM25 finds too few, in a seeded random order) and the reply it
should give: every answer sentence citing the chunk's number, as the JSON the answer prompt asks for.
`abstain_fraction` of the pairs also give an abstention example: the same question over unrelated chunks
only, reply {"abstain": true, "sentences": []}. The loss covers the reply tokens only.
`llm=qwen_coder_05b_qlora` serves the adapter (llm/backends/transformers_local.py).
"""

from __future__ import annotations

import json
import random
import re
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from string import Template
from typing import Any

from omegaconf import DictConfig

from fixgraph.corpus.models import Chunk, numbered_sources
from fixgraph.io import sha256_file
from fixgraph.training.base import Trainer
from fixgraph.training.data import TRAIN, VALIDATION, load_splits, save_splits, settings_from, split_rows
from fixgraph.training.kinds import TRAINERS
from fixgraph.training.settings import FitResult, Tracking

OPTIMIZERS = ("paged_adamw_8bit", "adamw_8bit", "adamw")
SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(])")


@dataclass(frozen=True)
class QAData:
    """`data:` of a QLoRA generator trainer."""

    qa_pairs: str
    prompt: str = "answer_grounded_v1"  # the grounded answerer's prompt (a name in answer/prompts, or a .txt)
    distractors: int = 2
    abstain_fraction: float = 0.15
    max_examples: int = 0  # 0: all pairs
    validation_fraction: float = 0.1
    seed: int = 0
    bm25: Mapping[str, Any] = field(default_factory=lambda: {"name": "bm25", "k1": 0.9, "b": 0.4})


def prompt_path(prompt: str) -> Path:
    """The answer prompt file the model is trained on: the very file the answerer fills at serving time.
    Read as data (not imported): the training layer does not depend on the answering one."""
    if prompt.endswith(".txt"):
        return Path(prompt)
    return Path(__file__).resolve().parents[1] / "answer" / "prompts" / f"{prompt}.txt"


def sentences(text: str) -> list[str]:
    return [s.strip() for s in SENTENCE.split(text.strip()) if s.strip()]


def reply(answer: str, citation: int | None) -> str:
    """The answer prompt's JSON reply: each sentence cites the source; None: an abstention."""
    if citation is None:
        return json.dumps({"abstain": True, "sentences": []})
    return json.dumps(
        {"abstain": False, "sentences": [{"text": s, "citations": [citation]} for s in sentences(answer)]}
    )


def build_examples(
    chunks: Sequence[Chunk], pairs: Sequence[Any], template: Template, data: QAData
) -> list[dict[str, Any]]:
    from fixgraph.retrieval.bm25 import BM25Retriever

    rng = random.Random(data.seed)
    by_id = {c.id: c for c in chunks}
    usable = [p for p in pairs if p.chunk_id in by_id]
    rng.shuffle(usable)
    if data.max_examples > 0:
        usable = usable[: data.max_examples]
    retriever = BM25Retriever(**{**dict(data.bm25), "backend": "bm25s"})
    with tempfile.TemporaryDirectory() as tmp:
        retriever.build(chunks, Path(tmp))
    rows = []
    for pair in usable:
        gold = by_id[pair.chunk_id]
        near = [
            h.chunk_id
            for h in retriever.search(pair.question, data.distractors + 30)
            if by_id[h.chunk_id].doc_id != gold.doc_id
        ]
        near = near[: data.distractors]
        if len(near) < data.distractors:  # BM25 finds too few: random chunks of other pages fill in
            others = [c.id for c in chunks if c.doc_id != gold.doc_id and c.id not in near]
            near += rng.sample(others, min(data.distractors - len(near), len(others)))
        context = [gold, *(by_id[c] for c in near)]
        rng.shuffle(context)
        blocks = numbered_sources(context)
        base = {"doc_id": gold.doc_id, "chunk_id": gold.id, "question": pair.question}
        rows.append(
            {
                **base,
                "kind": "answer",
                "prompt": template.substitute(context=blocks, question=pair.question),
                "completion": reply(pair.answer, 1 + context.index(gold)),
            }
        )
        if rng.random() < data.abstain_fraction:
            unrelated = [c for c in chunks if c.doc_id != gold.doc_id and c.id not in near]
            picked = rng.sample(unrelated, min(len(context), len(unrelated)))
            blocks = numbered_sources(picked)
            rows.append(
                {
                    **base,
                    "kind": "abstain",
                    "prompt": template.substitute(context=blocks, question=pair.question),
                    "completion": reply("", None),
                }
            )
    return rows


def encode(tokenizer: Any, prompt: str, completion: str) -> tuple[list[int], int]:
    """Token ids of the chat (user prompt, assistant reply) as the serving backend formats it, and the
    number of prompt tokens (their labels are masked)."""
    from fixgraph.llm.base import chat_messages

    messages = chat_messages(prompt, None)
    prompt_ids = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
    full = tokenizer.apply_chat_template([*messages, {"role": "assistant", "content": completion}], tokenize=True)
    prompt_ids, full = list(_ids(prompt_ids)), list(_ids(full))
    if full[: len(prompt_ids)] != prompt_ids:
        raise ValueError("chat template: the reply does not extend the prompt; cannot mask the prompt tokens")
    return full, len(prompt_ids)


def _ids(value: Any) -> list[int]:
    ids = value["input_ids"] if isinstance(value, Mapping) else value
    return [int(i) for i in ids]


def _export_marker(folder: Path) -> dict[str, Any]:
    marker = folder / "fixgraph_export.json"  # a GGUF exported by fixgraph; absent for a plain folder
    return dict(json.loads(marker.read_text(encoding="utf-8"))) if marker.exists() else {"folder": str(folder)}


def training_mode_4bit(model: Any) -> int:
    """bitsandbytes repacks 4-bit weights for fast CPU inference on the first forward in eval mode, and
    the repacked layout has no backward: a training run that validates would then fail on its next step.
    Keep the trainable layout throughout (validation runs a little slower). Returns the 4-bit layers."""
    import bitsandbytes as bnb

    layers = [m for m in model.modules() if isinstance(m, bnb.nn.Linear4bit)]
    for layer in layers:
        layer.support_avx512bf16_for_cpu = False
    return len(layers)


@TRAINERS.register("qlora")
class QLoRATrainer(Trainer):
    kind = "qlora"
    code_modules = ("fixgraph.training.nets.generator", "fixgraph.llm.hf_export")  # the base model it quantises

    def __init__(
        self,
        name: str,
        data_dir: str,
        output: str,
        data: Mapping[str, Any],
        fit: Mapping[str, Any] | None = None,
        base_model: str = "qwen2.5-coder-0.5b-instruct-q4_k_m",
        model_dir: str = "models",
        dtype: str = "float32",
        quantization: str = "nf4",
        lora: Mapping[str, Any] | None = None,
        max_length: int = 768,
        batch_size: int = 1,
        learning_rate: float = 2e-4,
        warmup_ratio: float = 0.05,
        optimizer: str = "paged_adamw_8bit",
        gradient_checkpointing: bool = False,
    ) -> None:
        super().__init__(name, data_dir, output, data, fit)
        self.data = settings_from(QAData, data, f"trainer {name}: data")
        if optimizer not in OPTIMIZERS:
            raise ValueError(f"trainer {name}: unknown optimizer {optimizer!r}; valid: {', '.join(OPTIMIZERS)}")
        self.base_model, self.model_dir, self.dtype, self.quantization = base_model, model_dir, dtype, quantization
        self.lora = dict(
            lora or {"r": 16, "lora_alpha": 32, "lora_dropout": 0.05, "target_modules": ["q_proj", "v_proj"]}
        )
        self.max_length, self.batch_size, self.learning_rate = max_length, batch_size, learning_rate
        self.warmup_ratio, self.optimizer, self.gradient_checkpointing = warmup_ratio, optimizer, gradient_checkpointing

    def model_config(self) -> dict[str, Any]:
        return {
            "base_model": self.base_model,
            "dtype": self.dtype,
            "quantization": self.quantization,
            "lora": self.lora,
            "max_length": self.max_length,
            "batch_size": self.batch_size,
            "learning_rate": self.learning_rate,
            "warmup_ratio": self.warmup_ratio,
            "optimizer": self.optimizer,
            "gradient_checkpointing": self.gradient_checkpointing,
        }

    def prepare(self, cfg: DictConfig) -> None:
        from fixgraph.training.stages import corpus_qa

        corpus_qa(cfg)

    def data_inputs(self, cfg: DictConfig) -> dict[str, str]:
        from fixgraph.pipeline.layout import Layout

        return {
            "chunks": sha256_file(Layout.from_config(cfg).chunks),
            "qa_pairs": sha256_file(Path(self.data.qa_pairs)),
            "prompt": sha256_file(prompt_path(self.data.prompt)),
        }

    def build_data(self, cfg: DictConfig, out: Path) -> dict[str, Any]:
        from fixgraph.pipeline.stages import load_chunks
        from fixgraph.training.corpus_qa import read_pairs

        path = prompt_path(self.data.prompt)
        if not path.exists():
            raise FileNotFoundError(f"trainer {self.name}: data.prompt {self.data.prompt!r}: no file {path}")
        template = Template(path.read_text(encoding="utf-8"))
        rows = build_examples(load_chunks(cfg), read_pairs(Path(self.data.qa_pairs)), template, self.data)
        if not rows:
            raise ValueError(f"trainer {self.name}: no examples (is {self.data.qa_pairs} empty?)")
        counts = save_splits(
            split_rows(rows, "doc_id", self.data.validation_fraction, f"{self.name}|{self.data.seed}"), out
        )
        return {"examples": len(rows), "splits": counts, "abstain": sum(r["kind"] == "abstain" for r in rows)}

    def base_folder(self) -> Path:
        from fixgraph.llm.hf_export import hf_folder

        return hf_folder(self.base_model, Path(self.model_dir), "bfloat16")

    def load_model(self) -> tuple[Any, Any, int]:
        """(tokenizer, peft model with only the adapters trainable, number of 4-bit layers)."""
        from peft import LoraConfig, get_peft_model, prepare_model_for_kbit_training

        from fixgraph.llm.hf_export import load_causal_lm

        device = self.fit_settings.device()
        tokenizer, model = load_causal_lm(self.base_folder(), self.dtype, self.quantization, device)
        model = prepare_model_for_kbit_training(model, use_gradient_checkpointing=self.gradient_checkpointing)
        model = get_peft_model(model, LoraConfig(task_type="CAUSAL_LM", **self.lora))
        return tokenizer, model, training_mode_4bit(model)

    def tokenized(self, tokenizer: Any, split: Any) -> tuple[list[dict[str, Any]], int]:
        rows, dropped = [], 0
        for r in split:
            ids, prompt_tokens = encode(tokenizer, r["prompt"], r["completion"])
            if len(ids) > self.max_length:
                dropped += 1  # cutting the prompt would cut sources the reply cites
                continue
            rows.append({"input_ids": ids, "prompt_tokens": prompt_tokens})
        return rows, dropped

    def train(
        self, cfg: DictConfig, data: Path, out: Path, work_dir: Path, tracking: Tracking | None
    ) -> dict[str, Any]:
        import torch
        from torch.utils.data import DataLoader

        from fixgraph.training.fit import fit
        from fixgraph.training.nets.generator import ChatCollator, GeneratorModule

        splits = load_splits(data)
        torch.manual_seed(self.fit_settings.seed)  # LoRA's random A matrices
        tokenizer, model, quantized = self.load_model()
        train_rows, dropped_train = self.tokenized(tokenizer, splits[TRAIN])
        val_rows, dropped_val = self.tokenized(tokenizer, splits[VALIDATION])
        if not train_rows or not val_rows:
            raise ValueError(f"trainer {self.name}: every example is longer than max_length={self.max_length}")
        collate = ChatCollator(tokenizer)
        generator = torch.Generator().manual_seed(self.fit_settings.seed)
        train: DataLoader[Any] = DataLoader(
            train_rows,  # type: ignore[arg-type]
            self.batch_size,
            shuffle=True,
            collate_fn=collate,
            generator=generator,
        )
        validation: DataLoader[Any] = DataLoader(val_rows, self.batch_size, collate_fn=collate)  # type: ignore[arg-type]
        module = GeneratorModule(model, self.learning_rate, self.warmup_ratio, self.optimizer)
        result: FitResult = fit(module, train, validation, self.fit_settings, work_dir, tracking)
        module.model.save_pretrained(str(out))  # the adapters and their config only
        tokenizer.save_pretrained(str(out))
        return {
            **result.summary(),
            "base_model": self.base_model,
            "base_export": _export_marker(self.base_folder()),
            "quantized_layers": quantized,
            "device": self.fit_settings.device(),
            "examples": {"train": len(train_rows), "validation": len(val_rows)},
            "dropped_too_long": dropped_train + dropped_val,
            "weights_sha256": {w.name: sha256_file(w) for w in sorted(out.glob("*.safetensors"))},
        }
