"""Training throughput per method, and the time from ``cv`` start to the held-out report.

1. Throughput: SFT, DPO and reward-model (Bradley-Terry) training on the demo set, in a fresh
   subprocess per method, on a tiny random Qwen2-VL built offline (or on ``--base MODEL``).
   Prints examples per second of the training loop (examples = SFT/DPO prompts in both orders,
   RM preference pairs; the loop's wall time, model loading excluded), the whole call's wall time
   (model loading and saving included) and, on a GPU, the peak memory.
2. ``cv``: the whole command (``cv --method M --folds 5 --data demo``) in a fresh subprocess, from
   the start of the process to the printed held-out report, with its phases (training, judging the
   held-out folds, the untuned baseline) from ``cv.json``.

Each measurement runs with ``--threads`` torch threads (default: 1, then torch's default). On small
shared CPUs one thread is often much faster for tiny models, because thread synchronisation costs
more than these small matrix products; the figures show by how much on the machine at hand.

Usage:
    python benchmarks/bench_train.py [--steps 8] [--threads 1 0] [--cv-methods rm sft] [--workdir DIR]
    # GPU, 2B class, no download: the Qwen2-VL-2B architecture with random weights (docs/gpu_recipes.md)
    python benchmarks/bench_train.py --random-arch qwen2-vl-2b --device cuda --threads 0 --steps 20 \\
        --batch-size 2 --grad-accum 4 --cv-methods --json results.json
    # GPU with real cached weights
    python benchmarks/bench_train.py --base Qwen/Qwen2-VL-2B-Instruct --device cuda --threads 0 --cv-methods
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

TRAIN_CHILD = r"""
import json, os, sys, time
import torch
threads = int(sys.argv[5])
if threads > 0:
    torch.set_num_threads(threads)
from medrewardbench.data import load_benchmark
from medrewardbench.train import TrainConfig, train
method, base, out, settings = sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4])
benchmark = load_benchmark("demo").labeled()
config = TrainConfig(**settings)
started = time.perf_counter()
result = train(method, base, benchmark, out, config)
call_s = time.perf_counter() - started
perf = dict(result.card.performance)
print(json.dumps({"method": method, "call_s": call_s, "threads": torch.get_num_threads(),
                  "examples": result.card.data["n_train_examples"], **perf,
                  "loss_first": result.card.losses["first"], "loss_final": result.card.losses["final"]}))
"""

CV_CHILD = r"""
import os, sys
import torch
threads = int(sys.argv[1])
if threads > 0:
    torch.set_num_threads(threads)
import typer
from medrewardbench import cli
registered = {command.name for command in cli.app.registered_commands}
if "cv" in registered:
    app = cli.app
else:  # the main CLI does not register the training commands yet: do it on a private app
    from medrewardbench.cli.train import register_commands
    app = typer.Typer()
    @app.callback()
    def main() -> None:
        pass
    register_commands(app)
sys.argv = ["medrewardbench", *sys.argv[2:]]
app()
"""


#: architectures of real checkpoints, rebuilt with random weights (sizes as in their config.json)
RANDOM_ARCHITECTURES: dict[str, dict[str, Any]] = {
    "qwen2-vl-2b": {
        "family": "2",
        "text": {"hidden_size": 1536, "intermediate_size": 8960, "num_hidden_layers": 28, "num_attention_heads": 12,
                 "num_key_value_heads": 2, "vocab_size": 151936, "mrope_section": [16, 24, 24]},
        "vision": {"depth": 32, "embed_dim": 1280, "hidden_size": 1536, "mlp_ratio": 4, "num_heads": 16},
        "tie_word_embeddings": True,
    },
    "qwen2-vl-7b": {
        "family": "2",
        "text": {"hidden_size": 3584, "intermediate_size": 18944, "num_hidden_layers": 28, "num_attention_heads": 28,
                 "num_key_value_heads": 4, "vocab_size": 152064, "mrope_section": [16, 24, 24]},
        "vision": {"depth": 32, "embed_dim": 1280, "hidden_size": 3584, "mlp_ratio": 4, "num_heads": 16},
        "tie_word_embeddings": False,
    },
    "qwen2.5-vl-7b": {
        "family": "2.5",
        "text": {"hidden_size": 3584, "intermediate_size": 18944, "num_hidden_layers": 28, "num_attention_heads": 28,
                 "num_key_value_heads": 4, "vocab_size": 152064, "mrope_section": [16, 24, 24]},
        "vision": {"depth": 32, "hidden_size": 1280, "intermediate_size": 3420, "out_hidden_size": 3584,
                   "num_heads": 16, "window_size": 112, "fullatt_block_indexes": [7, 15, 23, 31]},
        "tie_word_embeddings": False,
    },
}  # fmt: skip


def build_random_architecture(path: Path, name: str, layers: int | None = None, device: str = "cpu") -> Path:
    """A real architecture (sizes of Qwen2-VL-2B/7B or Qwen2.5-VL-7B) with random bf16 weights.

    Memory and speed do not depend on weight values, so this measures a recipe where the real
    weights cannot be downloaded. The tokenizer is the tiny offline one: it splits text into more
    tokens than Qwen's, so compare tokens per second, not examples per second, with real runs.

    Args:
        path: output directory.
        name: a key of :data:`RANDOM_ARCHITECTURES`.
        layers: fewer language-model and vision layers (for a quick check of the builder).
        device: where to initialise the weights (``cuda`` is much faster for 7B).
    """
    import torch
    import transformers

    from medrewardbench.testing.tiny_models import QWEN_CHAT_TEMPLATE, QWEN_SPECIAL_TOKENS, train_tiny_tokenizer

    if (path / "config.json").is_file():
        return path
    spec = RANDOM_ARCHITECTURES[name]
    path.mkdir(parents=True, exist_ok=True)
    tokenizer = train_tiny_tokenizer(
        QWEN_SPECIAL_TOKENS, chat_template=QWEN_CHAT_TEMPLATE, eos_token="<|im_end|>", pad_token="<|endoftext|>"
    )
    ids = {token: tokenizer.convert_tokens_to_ids(token) for token in QWEN_SPECIAL_TOKENS}
    text = dict(spec["text"])
    mrope = text.pop("mrope_section")
    if layers:
        text["num_hidden_layers"] = layers
    text.update(
        max_position_embeddings=32768,
        rope_parameters={"rope_type": "default", "rope_theta": 1_000_000.0, "mrope_section": mrope},
        bos_token_id=ids["<|endoftext|>"],
        eos_token_id=ids["<|im_end|>"],
        pad_token_id=ids["<|endoftext|>"],
    )
    vision = {**spec["vision"], "patch_size": 14, "spatial_merge_size": 2, "temporal_patch_size": 2}
    if layers:
        vision["depth"] = layers
        if "fullatt_block_indexes" in vision:
            vision["fullatt_block_indexes"] = [layers - 1]
    common = {
        "image_token_id": ids["<|image_pad|>"],
        "video_token_id": ids["<|video_pad|>"],
        "vision_start_token_id": ids["<|vision_start|>"],
        "vision_end_token_id": ids["<|vision_end|>"],
        "tie_word_embeddings": spec["tie_word_embeddings"],
    }
    if spec["family"] == "2":
        config = transformers.Qwen2VLConfig(text_config=text, vision_config=vision, **common)
        model_class = transformers.Qwen2VLForConditionalGeneration
    else:
        config = transformers.Qwen2_5_VLConfig(text_config=text, vision_config=vision, **common)
        model_class = transformers.Qwen2_5_VLForConditionalGeneration
    torch.manual_seed(0)
    with torch.device(device):
        model = model_class._from_config(config, dtype=torch.bfloat16)
    model.generation_config.eos_token_id = ids["<|im_end|>"]
    model.generation_config.pad_token_id = ids["<|endoftext|>"]
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    # the pixel budget the GPU recipes recommend: at most 1280 visual tokens per image
    transformers.Qwen2VLImageProcessorPil(
        size={"shortest_edge": 56 * 56, "longest_edge": 1280 * 28 * 28},
        patch_size=14,
        temporal_patch_size=2,
        merge_size=2,
    ).save_pretrained(path)
    (path / "chat_template.jinja").write_text(QWEN_CHAT_TEMPLATE, encoding="utf-8")
    processor_class = "Qwen2VLProcessor" if spec["family"] == "2" else "Qwen2_5_VLProcessor"
    (path / "processor_config.json").write_text(json.dumps({"processor_class": processor_class}), encoding="utf-8")
    print(f"built {name} with random weights ({sum(p.numel() for p in model.parameters()) / 1e9:.2f} B parameters)")
    return path


def build_tiny(directory: Path) -> Path:
    from medrewardbench.testing.tiny_models import build_tiny_qwen2_vl

    path = directory / "tiny-qwen2-vl"
    if not (path / "config.json").is_file():
        build_tiny_qwen2_vl(path)
    return path


def run_json(args: list[str], env: dict[str, str]) -> dict[str, object]:
    done = subprocess.run(args, capture_output=True, text=True, env=env, check=False)
    if done.returncode != 0:
        raise SystemExit(f"child failed ({done.returncode}):\n{done.stderr[-4000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base", help="base model (default: a tiny random Qwen2-VL built offline)")
    parser.add_argument(
        "--random-arch",
        choices=sorted(RANDOM_ARCHITECTURES),
        help="build this real architecture with random weights and train it (no download needed)",
    )
    parser.add_argument("--layers", type=int, help="with --random-arch: fewer layers, for a quick check")
    parser.add_argument("--methods", nargs="*", default=["sft", "dpo", "rm"])
    parser.add_argument("--steps", type=int, default=8, help="optimizer steps per throughput run")
    parser.add_argument("--batch-size", type=int, default=2)
    parser.add_argument("--grad-accum", type=int, default=1)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, nargs="*", default=[1, 0], help="torch threads; 0 = torch default")
    parser.add_argument("--cv-methods", nargs="*", default=["rm", "sft"])
    parser.add_argument("--cv-steps", type=int, default=4, help="optimizer steps per fold in the cv runs")
    parser.add_argument("--gradient-checkpointing", action="store_true")
    parser.add_argument("--workdir", type=Path)
    parser.add_argument("--json", type=Path, help="also write the throughput rows to this JSON file")
    args = parser.parse_args()

    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    with tempfile.TemporaryDirectory() as tmp:
        work = args.workdir or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        if args.random_arch:
            init_device = "cuda" if args.device.startswith("cuda") else "cpu"
            built = build_random_architecture(work / args.random_arch, args.random_arch, args.layers, init_device)
            base = str(built)
        else:
            base = args.base or str(build_tiny(work))
        settings = {
            "max_steps": args.steps,
            "batch_size": args.batch_size,
            "grad_accum": args.grad_accum,
            "learning_rate": 1e-3,
            "warmup_ratio": 0.0,
            "device": args.device,
            "gradient_checkpointing": args.gradient_checkpointing,
            "train_accuracy": False,
        }
        results: list[dict[str, object]] = []
        print(f"base model: {base}; device {args.device}; {args.steps} steps of {args.batch_size} x {args.grad_accum}")
        print(
            f"{'method':<6} {'threads':>7} {'examples/s':>11} {'tokens/s':>9} {'steps':>6} {'loop s':>7} "
            f"{'call s':>7} {'loss first -> final':>20} {'peak GiB':>9}"
        )
        for threads in args.threads:
            for method in args.methods:
                out = work / f"train-{method}-{threads}"
                row = run_json(
                    [sys.executable, "-c", TRAIN_CHILD, method, base, str(out), json.dumps(settings), str(threads)],
                    env,
                )
                peak = row.get("peak_memory_gib")
                tokens = row.get("tokens_per_s")
                print(
                    f"{method:<6} {row['threads']:>7} {row['examples_per_s']:>11.2f} "
                    f"{'-' if tokens is None else f'{tokens:.0f}':>9} {row['steps']:>6} "
                    f"{row['wall_s']:>7.2f} {row['call_s']:>7.2f} "
                    f"{row['loss_first']:>9.4f} -> {row['loss_final']:<7.4f} {'-' if peak is None else peak:>9}"
                )
                results.append(row)
        if args.json:
            args.json.write_text(json.dumps(results, indent=2) + "\n")
        if not args.cv_methods:
            return
        print()
        print(f"cv on the demo set (34 cases, 5 folds, {args.cv_steps} steps per fold, baseline hf:BASE constrained)")
        print(f"{'method':<6} {'threads':>7} {'start -> report s':>18} {'train s':>8} {'eval s':>7} {'baseline s':>11}")
        for threads in args.threads:
            for method in args.cv_methods:
                out = work / f"cv-{method}-{threads}"
                cv_args = ["cv", "--method", method, "--base", base, "--folds", "5", "--data", "demo",
                           "--out", str(out), "--max-steps", str(args.cv_steps), "--batch-size", str(args.batch_size),
                           "--grad-accum", "1", "--lr", "1e-3", "--warmup-ratio", "0", "--device", args.device,
                           "--constrained", "--max-tokens", "64"]  # fmt: skip
                started = time.perf_counter()
                done = subprocess.run(
                    [sys.executable, "-c", CV_CHILD, str(threads), *cv_args],
                    capture_output=True,
                    text=True,
                    env=env,
                    check=False,
                )
                wall = time.perf_counter() - started
                if done.returncode != 0 or "held-out accuracy" not in done.stdout:
                    raise SystemExit(f"cv failed ({done.returncode}):\n{done.stderr[-4000:]}")
                timings = json.loads((out / "cv.json").read_text())["timings"]
                print(
                    f"{method:<6} {threads or 'default':>7} {wall:>18.1f} {timings['train_s']:>8.1f} "
                    f"{timings['eval_s']:>7.1f} {timings['baseline_s']:>11.1f}"
                )


if __name__ == "__main__":
    main()
