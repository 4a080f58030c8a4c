"""The options several commands share, declared once: the same flag, the same help, the same checks.

A command whose option only shares a flag's name with another's (``--seed`` of the bootstrap vs
``--seed`` of sampling, ``--out`` of a file vs a directory) declares its own beside the command.
Options that differ only in their help text here take it as an argument (:func:`ci_option`,
:func:`bootstrap_option`), so that their names, bounds and value names cannot drift apart.

How a command reaches its models (``--base-url``, ``--timeout``, ``--temperature``, ``--device``, ...) is
:class:`ModelFlags`: ``build filter`` and ``build responses`` take them with :func:`with_model_flags`
for the models that answer questions. The judge options are those and the judge's own (``--template``,
``--structured``, ``--adapter``, ...), the fields of :class:`JudgeFlags`; a command that judges takes
them all with :func:`with_judge_flags` and makes its
:class:`~medrewardbench.models.options.JudgeOptions` with :meth:`JudgeFlags.options`, so that eval and
the probes accept the same flags, with the same help, built into options the same way.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Annotated, Any, get_type_hints

import typer

from medrewardbench.models.options import ApiSettings, JudgeOptions, LocalSettings

__all__ = [
    "JUDGE_HELP",
    "BootstrapOpt",
    "DEFAULT_JUDGE_FLAGS",
    "DEFAULT_MODEL_FLAGS",
    "CiOpt",
    "DataOpt",
    "ExternalImagesOpt",
    "ForceReplaceOpt",
    "JudgeFlags",
    "JudgeSpecsOpt",
    "ModelFlags",
    "OrgansOpt",
    "OutDirOpt",
    "QuietOpt",
    "RecalibrateOpt",
    "RiskDeltaOpt",
    "RiskOpt",
    "VerboseOpt",
    "bootstrap_option",
    "ci_option",
    "judge_flag_names",
    "with_judge_flags",
    "with_model_flags",
]

DATA_HELP = (
    "demo | DIR in the reference layout | hf:[OWNER/NAME[@REV]] | canonical .jsonl/.json/.parquet file or directory"
    " | Hub dataset folder (build export --format hub)"
)
"""What ``--data`` accepts: every source :func:`medrewardbench.data.load_benchmark` reads."""
EXTERNAL_IMAGES_HELP = (
    "accept image paths outside the data's directory (or list directories in MEDREWARDBENCH_IMAGE_ROOTS)"
)
ORGANS_HELP = "organ systems to keep (repeat or comma-separate)"

DataOpt = Annotated[str, typer.Option("--data", "-d", metavar="SOURCE", help=DATA_HELP)]
"""The labelled data a command reads (eval, train, cv)."""
OrgansOpt = Annotated[list[str] | None, typer.Option("--organs", help=ORGANS_HELP)]
ExternalImagesOpt = Annotated[
    bool, typer.Option("--allow-external-images", help=EXTERNAL_IMAGES_HELP, show_default="off")
]
OutDirOpt = Annotated[Path, typer.Option("--out", "-o", help="output directory")]
ForceReplaceOpt = Annotated[
    bool, typer.Option("--force", help="replace the files (data and dataset.json) of an earlier export")
]
QuietOpt = Annotated[bool, typer.Option("--quiet", "-q", help="no progress bars or tables")]
VerboseOpt = Annotated[bool, typer.Option("--verbose", "-v")]


def ci_option(help: str = "interval coverage") -> Any:
    """``--ci LEVEL``: the coverage of every interval (0.5 to 0.999).

    Args:
        help: the help text (cv says that it is report's option).

    Returns:
        The typer option.
    """
    return typer.Option("--ci", min=0.5, max=0.999, metavar="LEVEL", help=help)


def bootstrap_option(help: str = "bootstrap resamples") -> Any:
    """``--bootstrap N``: how many bootstrap resamples (at least 100).

    Args:
        help: the help text (cv says that it is report's option).

    Returns:
        The typer option.
    """
    return typer.Option("--bootstrap", min=100, metavar="N", help=help)


CiOpt = Annotated[float, ci_option()]
BootstrapOpt = Annotated[int, bootstrap_option()]


RiskOpt = Annotated[
    float,
    typer.Option(
        "--risk",
        min=0.001,
        max=0.5,
        metavar="ALPHA",
        help="selective judging: the largest error rate among accepted verdicts (coverage at risk ALPHA)",
    ),
]
"""alpha of the abstention threshold (:mod:`medrewardbench.metrics.selective`)."""
RiskDeltaOpt = Annotated[
    float,
    typer.Option(
        "--risk-delta",
        min=0.001,
        max=0.5,
        metavar="DELTA",
        help="selective judging: the chance that the accepted verdicts' error rate exceeds ALPHA",
    ),
]
RecalibrateOpt = Annotated[
    str,
    typer.Option(
        "--recalibrate",
        metavar="none|isotonic|temperature",
        help="also show calibration after a cross-fitted recalibration (fitted on other folds of cases)",
    ),
]


# ------------------------------------------------------------------------------------ judge options

JUDGE_HELP = (
    "judge spec, repeatable: baseline:random|first|second|longer|shorter, api:MODEL (OpenAI-compatible "
    "endpoint), hf:MODEL_OR_PATH (local transformers model; append #constrained to decode only the verdict "
    "JSON, which a small or random-weight model needs), rm:MODEL_OR_PATH (reward model), reference:PATH "
    "(replayed reference outputs), instant: (harness benchmarks)"
)

JudgeSpecsOpt = Annotated[
    list[str] | None,
    typer.Option("--judge", "-j", metavar="SPEC", help=JUDGE_HELP, show_default="every baseline:"),
]
"""``--judge SPEC``, repeatable; none given: every ``baseline:`` judge."""


@dataclass(frozen=True)
class ModelFlags:
    """How a command reaches the models it asks, each field one flag (its type carries the typer option).

    The settings of :class:`~medrewardbench.models.options.JudgeOptions` that mean the same for a
    judge and for a model that answers questions (``build filter``, ``build responses``): the API
    endpoint and its retries, sampling, and the local device. What the prompt is and what ``--seed``
    seeds each command says itself.
    """

    concurrency: Annotated[
        int | None,
        typer.Option(
            "--concurrency", min=1, metavar="N", help="requests in flight (API models)", show_default="8 for api:"
        ),
    ] = None
    batch_size: Annotated[
        int | None,
        typer.Option(
            "--batch-size", min=1, metavar="N", help="requests per batch (local models)", show_default="4 for hf:"
        ),
    ] = None
    base_url: Annotated[
        str | None,
        typer.Option(
            "--base-url",
            metavar="URL",
            help="OpenAI-compatible endpoint",
            show_default="$OPENAI_BASE_URL or OpenAI's",
        ),
    ] = None
    api_key_env: Annotated[
        str | None,
        typer.Option(
            "--api-key-env",
            metavar="NAME",
            help="environment variable holding the API key",
            show_default="OPENAI_API_KEY",
        ),
    ] = None
    temperature: Annotated[
        float | None,
        typer.Option(
            "--temperature", metavar="T", help="sampling temperature", show_default="0 for hf:, server's for api:"
        ),
    ] = None
    top_p: Annotated[
        float | None,
        typer.Option("--top-p", metavar="P", help="nucleus sampling", show_default="the model's or server's"),
    ] = None
    max_tokens: Annotated[
        int | None,
        typer.Option(
            "--max-tokens",
            min=1,
            metavar="N",
            help="most tokens a model may write per request",
            show_default="512 for hf:, server's for api:",
        ),
    ] = None
    timeout: Annotated[float, typer.Option("--timeout", metavar="SECONDS", help="per-request timeout (API models)")] = (
        120.0
    )
    max_retries: Annotated[
        int,
        typer.Option(
            "--max-retries", metavar="N", help="retries of a request on 429, 5xx, timeouts and dropped connections"
        ),
    ] = 6
    device: Annotated[
        str, typer.Option("--device", metavar="DEVICE", help="local models: auto | cpu | cuda | cuda:N")
    ] = "auto"
    dtype: Annotated[
        str, typer.Option("--dtype", metavar="DTYPE", help="local models: auto | float32 | bfloat16 | float16")
    ] = "auto"

    def options(self, seed: int) -> JudgeOptions:
        """The models' options these flags say, with the command's seed.

        Args:
            seed: the command's ``--seed``.

        Returns:
            The options every model of the command is built with.

        Raises:
            JudgeSpecError: a value out of range (a timeout of 0, a base URL with credentials, ...).
        """
        return JudgeOptions(
            seed=seed,
            concurrency=self.concurrency,
            batch_size=self.batch_size,
            temperature=self.temperature,
            top_p=self.top_p,
            max_tokens=self.max_tokens,
            api=ApiSettings(
                base_url=self.base_url,
                api_key_env=self.api_key_env,
                timeout_s=self.timeout,
                max_retries=self.max_retries,
            ),
            local=LocalSettings(device=self.device, dtype=self.dtype),
        )


@dataclass(frozen=True)
class JudgeFlags(ModelFlags):
    """The judge options of a command line: :class:`ModelFlags` and the judge's own.

    Every field is a setting of :class:`~medrewardbench.models.options.JudgeOptions`; the seed is
    not one of them because each command says in its own help what else its ``--seed`` seeds.
    ``--batch-size`` is the same flag as :class:`ModelFlags`' with the reward models' default named.
    """

    batch_size: Annotated[
        int | None,
        typer.Option(
            "--batch-size",
            min=1,
            metavar="N",
            help="requests per batch (local models)",
            show_default="4 for hf:, 8 for rm:",
        ),
    ] = None
    template: Annotated[
        str, typer.Option("--template", metavar="NAME|FILE", help="judge prompt: pairwise | pairwise-cot | FILE")
    ] = "pairwise"
    structured: Annotated[
        bool, typer.Option("--structured", help="ask API judges for JSON-schema output", show_default="off")
    ] = False
    logprobs: Annotated[
        int,
        typer.Option(
            "--logprobs",
            min=0,
            max=20,
            metavar="N",
            help="API judges: ask for the top N log-probabilities of every token and store each verdict's "
            "probability (a confidence); 0: off",
        ),
    ] = 0
    client_processes: Annotated[
        int,
        typer.Option(
            "--client-processes", min=1, metavar="N", help="API judges: spread requests over N client processes"
        ),
    ] = 1
    adapter: Annotated[
        str | None,
        typer.Option("--adapter", metavar="DIR", help="LoRA adapter directory for hf: judges", show_default="none"),
    ] = None
    force_prefix: Annotated[
        str | None,
        typer.Option(
            "--force-prefix",
            metavar="TEXT",
            help="text the local model's answer must start with",
            show_default="none",
        ),
    ] = None

    def options(self, seed: int) -> JudgeOptions:
        """The judges' options these flags say, with the command's seed.

        Args:
            seed: the command's ``--seed``.

        Returns:
            The options every judge of the command is built with.

        Raises:
            JudgeSpecError: a value out of range (a timeout of 0, a base URL with credentials, ...).
        """
        return (
            super()
            .options(seed)
            .with_changes(template=self.template)
            .with_api(structured=self.structured, client_processes=self.client_processes, logprobs=self.logprobs)
            .with_local(adapter=self.adapter, force_prefix=self.force_prefix)
        )


DEFAULT_JUDGE_FLAGS = JudgeFlags()
"""The default of a command's ``judge_flags`` parameter (typer fills it from the flags)."""
DEFAULT_MODEL_FLAGS = ModelFlags()
"""The default of a command's ``model_flags`` parameter (typer fills it from the flags)."""

JUDGE_FLAGS_PARAMETER = "judge_flags"
"""The parameter of a command that :func:`with_judge_flags` fills."""
MODEL_FLAGS_PARAMETER = "model_flags"
"""The parameter of a command that :func:`with_model_flags` fills."""


def judge_flag_names() -> list[str]:
    """The judge options' flags (``--template``, ``--base-url``, ...), in the order a command's help lists them."""
    hints = get_type_hints(JudgeFlags, include_extras=True)
    names: list[str] = []
    for field in fields(JudgeFlags):
        option = hints[field.name].__metadata__[0]
        names.append(option.default)  # an Annotated typer.Option keeps its first flag in `default`
    return names


def with_judge_flags(command: Callable[..., None]) -> Callable[..., None]:
    """Give a command every judge option, collected into its ``judge_flags: JudgeFlags`` parameter.

    typer reads a command's options from its signature, so the wrapper's signature lists one
    parameter per field of :class:`JudgeFlags` where the command has ``judge_flags``; when typer
    calls it, the values are packed into one :class:`JudgeFlags` for the command.

    Args:
        command: a typer command with a parameter ``judge_flags: JudgeFlags``.

    Returns:
        The command as typer should register it (its name, docstring and other options unchanged).

    Raises:
        TypeError: the command has no ``judge_flags`` parameter, or one named like a judge option.
    """
    return _with_flags(command, JudgeFlags, JUDGE_FLAGS_PARAMETER, "judge")


def with_model_flags(command: Callable[..., None]) -> Callable[..., None]:
    """Give a command every option of :class:`ModelFlags`, collected into its ``model_flags`` parameter.

    As :func:`with_judge_flags`, for a command whose models answer rather than judge.

    Args:
        command: a typer command with a parameter ``model_flags: ModelFlags``.

    Returns:
        The command as typer should register it.

    Raises:
        TypeError: the command has no ``model_flags`` parameter, or one named like a model option.
    """
    return _with_flags(command, ModelFlags, MODEL_FLAGS_PARAMETER, "model")


def _with_flags(
    command: Callable[..., None], flags: type[ModelFlags], parameter: str, what: str
) -> Callable[..., None]:
    """The command with the fields of ``flags`` in its signature in place of ``parameter``, packed when called."""
    signature = inspect.signature(command, eval_str=True)
    if parameter not in signature.parameters:
        raise TypeError(f"{command.__name__} has no parameter {parameter}: {flags.__name__}")
    hints = get_type_hints(flags, include_extras=True)
    names = [field.name for field in fields(flags)]
    clash = sorted(set(names) & set(signature.parameters))
    if clash:
        raise TypeError(f"{command.__name__} declares {what} options itself: {', '.join(clash)}")
    flag_parameters = [
        inspect.Parameter(f.name, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=f.default, annotation=hints[f.name])
        for f in fields(flags)
    ]
    parameters: list[inspect.Parameter] = []
    for given_parameter in signature.parameters.values():
        parameters.extend(flag_parameters if given_parameter.name == parameter else [given_parameter])

    @functools.wraps(command)
    def command_with_flags(**given: Any) -> None:
        packed = flags(**{name: given.pop(name) for name in names if name in given})
        command(**given, **{parameter: packed})

    command_with_flags.__signature__ = signature.replace(parameters=parameters)  # type: ignore[attr-defined]
    command_with_flags.__annotations__ = {p.name: p.annotation for p in parameters} | {"return": None}
    return command_with_flags
