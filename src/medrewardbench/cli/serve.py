"""``medrewardbench serve``: a local model behind an OpenAI-compatible endpoint."""

from __future__ import annotations

from typing import Annotated

import typer

from medrewardbench.cli.options import VerboseOpt
from medrewardbench.cli.support import err_console, terminal_safe
from medrewardbench.cli.support import fail as _fail
from medrewardbench.cli.support import setup_logging as _setup_logging
from medrewardbench.errors import MedRewardBenchError
from medrewardbench.models.options import JudgeOptions, LocalSettings


def serve_command(
    model: Annotated[str, typer.Argument(help="hf:MODEL_OR_PATH (append #constrained for verdict-only output)")],
    host: Annotated[str, typer.Option("--host", help="interface to bind")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port")] = 8000,
    device: Annotated[str, typer.Option("--device", help="auto | cpu | cuda | cuda:N")] = "auto",
    dtype: Annotated[str, typer.Option("--dtype", help="auto | float32 | bfloat16 | float16")] = "auto",
    adapter: Annotated[str | None, typer.Option("--adapter", help="LoRA adapter directory")] = None,
    max_tokens: Annotated[int | None, typer.Option("--max-tokens", help="default max new tokens")] = None,
    verbose: VerboseOpt = False,
) -> None:
    """Serve a local transformers vision-language model as an OpenAI-compatible endpoint.

    Needs the serve extra (FastAPI, uvicorn) and the hf extra (torch, transformers); both are
    checked before the model loads.
    """
    from medrewardbench.serve import check_server_requirements, run_server

    _setup_logging(verbose)
    try:
        options = JudgeOptions(max_tokens=max_tokens, local=LocalSettings(device=device, dtype=dtype, adapter=adapter))
        check_server_requirements(adapter=adapter is not None)
    except MedRewardBenchError as exc:
        raise _fail(str(exc)) from exc
    shown = terminal_safe(model)
    served = terminal_safe(model.removeprefix("hf:").removesuffix("#constrained"))
    err_console.print(f"loading {shown} ...", highlight=False, markup=False)

    def say_ready(base_url: str) -> None:
        err_console.print(
            f"serving {shown} on {base_url} (Ctrl-C to stop); judge it with --judge api:{served} --base-url {base_url}",
            highlight=False,
            markup=False,
        )

    try:
        run_server(model, host=host, port=port, options=options, on_ready=say_ready)
    except MedRewardBenchError as exc:
        raise _fail(str(exc)) from exc
