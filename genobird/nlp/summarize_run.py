"""Fine-tuning and prediction of the summarisation head (paper section 4.1), through the
shared NLP fine-tuning machinery of genobird.nlp.finetune."""

from __future__ import annotations

from pathlib import Path

import torch

from genobird.nlp.finetune import (
    build_model,
    load_model,
    load_tokenizer,
    save_model,
    train,
    warn_truncated,
    write_report,
)
from genobird.nlp.recipe import NLPRecipe


def summarize_step(model, batch):
    out = model(
        batch["input_ids"],
        batch["attention_mask"],
        batch["target_ids"],
        batch["target_mask"],
        batch["labels"],
    )
    return out.loss, {}


def generate_summaries(
    model,
    tokenizer,
    documents: list[str],
    max_tokens: int,
    max_length: int,
    beams: int = 4,
    alpha: float = 0.6,
) -> list[str]:
    from genobird.nlp.seq2seq import beam_search
    from genobird.nlp.summarize import source_ids

    device = next(model.parameters()).device
    model.eval()
    summaries = []
    for document in documents:
        ids = torch.tensor([source_ids(document, tokenizer, max_tokens)], device=device)
        mask = torch.ones_like(ids, dtype=torch.bool)
        [tokens] = beam_search(
            model, ids, mask, tokenizer.cls_id, tokenizer.sep_id, max_length, beams, alpha
        )
        summaries.append(tokenizer.decode(tokens))
    return summaries


def finetune_summarize(
    train_path,
    output,
    spec: NLPRecipe,
    valid_path=None,
    pretrained=None,
    tokenizer_path=None,
    max_target_tokens: int = 128,
    decoder_layers: int = 2,
    share_weights: bool = False,
    beams: int = 4,
    alpha: float = 0.6,
) -> dict:
    """Fine-tune the encoder-decoder; ROUGE of beam-search summaries on `valid_path`."""
    from genobird.nlp.seq2seq import BigBirdForSummarization
    from genobird.nlp.summarize import SummaryDataset, read_summaries, rouge

    output = Path(output)
    tokenizer = load_tokenizer(pretrained, tokenizer_path)
    examples = read_summaries(train_path)
    dataset = SummaryDataset(examples, tokenizer, spec.data.max_tokens, max_target_tokens)
    warn_truncated(dataset, "training documents or summaries", "--max-(target-)tokens")
    model = build_model(
        BigBirdForSummarization,
        pretrained,
        spec,
        tokenizer.vocab_size,
        decoder_layers=decoder_layers,
        share_weights=share_weights,
        max_target_tokens=max_target_tokens,
    )
    trainer = train(model, dataset, spec, output, summarize_step)
    report = {
        "task": "summarize",
        "train_examples": len(examples),
        "train_truncated": dataset.truncated,
    }
    task = {
        "task": "summarize",
        "max_tokens": spec.data.max_tokens,
        "beams": beams,
        "alpha": alpha,
        "max_length": max_target_tokens,
    }
    if valid_path is not None:
        valid = read_summaries(valid_path)
        documents = [e.document for e in valid]
        predicted = generate_summaries(
            trainer.module,
            tokenizer,
            documents,
            spec.data.max_tokens,
            max_target_tokens,
            beams,
            alpha,
        )
        report.update(rouge(predicted, [e.summary or "" for e in valid]))
        report["valid_examples"] = len(valid)
    if trainer.is_main:
        save_model(trainer.module, tokenizer, output / "model", task)
        write_report(output, report)
    return report


def predict_summarize(model_dir, input_path, batch_size: int = 1, device: str = "auto"):
    """(rows of {"summary"}, ROUGE when the input has reference summaries)."""
    from genobird.nlp.summarize import read_summaries, rouge

    model, tokenizer, task = load_model(model_dir, device)
    examples = read_summaries(input_path)
    summaries = generate_summaries(
        model,
        tokenizer,
        [e.document for e in examples],
        task["max_tokens"],
        task["max_length"],
        task["beams"],
        task["alpha"],
    )
    metrics = {}
    if all(e.summary is not None for e in examples):
        metrics = rouge(summaries, [e.summary for e in examples])
    return [{"summary": s} for s in summaries], metrics
