"""The sweep file: data, orders, template, seed, judges with their own options, juries, caps, prices.

:func:`load_sweep` reads a YAML file (see ``docs/sweep.md`` for the reference) into a
:class:`SweepConfig` and checks everything it can before a request is sent: unknown keys (every
section lists the keys it knows), values of the wrong kind or out of range, judge options through
the typed :class:`~medrewardbench.models.options.JudgeOptions` sections (an ``api:`` setting on a
local model is refused, and the other way round), unknown judge kinds, duplicate names, juries
naming judges that do not exist. Every message names the file, the line and the key::

    sweeps/mine.yaml:14: judges[2].devcie: unknown key; known: judge, name, ...

A judge entry is a spec plus its own options. Shared options (``temperature``, ``max_tokens``,
``concurrency``, ``batch_size``, ``template``, ``seed``...) and the settings of its backend, either
flat (``base_url: ...``, ``device: cuda``) or in a section (``api: {...}``, ``local: {...}``), start
from the file's ``defaults`` and its top-level ``template`` and ``seed``.

Why one module of this size: the sweep file's schema: every key is checked with the line it came
from, and the checks share one reader and one error type.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from medrewardbench.dimensions import Order
from medrewardbench.errors import JudgeSpecError, MedRewardBenchError
from medrewardbench.judges.registry import known_kinds, split_spec
from medrewardbench.metrics.cost import Price
from medrewardbench.models.options import ApiSettings, JudgeOptions, LocalSettings
from medrewardbench.sweep.errors import SweepFileError
from medrewardbench.sweep.yamlfile import Located, read_located

__all__ = [
    "DEFAULT_API_BASE_URL",
    "JURY_KIND",
    "BatchApiSettings",
    "DataSpec",
    "EndpointCap",
    "JudgeEntry",
    "JuryEntry",
    "RaySettings",
    "ReportSettings",
    "Resources",
    "ServeSpec",
    "SweepConfig",
    "load_prices",
    "load_sweep",
    "normalize_url",
]

JURY_KIND = "jury"
DEFAULT_API_BASE_URL = "https://api.openai.com/v1"
"""Where an ``api:`` judge without a base URL (and without ``OPENAI_BASE_URL``) sends its requests."""
LOCAL_MODEL_KINDS = ("hf", "rm")
"""Kinds that load a model in the sweep's own process (or in their Ray worker)."""
REPORT_FORMATS = ("md", "csv", "json", "xlsx", "html")

_SHARED = tuple(f.name for f in fields(JudgeOptions) if f.name not in ("api", "local"))
_API = tuple(f.name for f in fields(ApiSettings))
_LOCAL = tuple(f.name for f in fields(LocalSettings))
_ENTRY_KEYS = ("judge", "name", "price", "serve", "resources", "batch_api", "api", "local")
_TOP_KEYS = (
    "data",
    "orders",
    "template",
    "seed",
    "group_by",
    "defaults",
    "judges",
    "juries",
    "endpoints",
    "prices",
    "batch_api",
    "ray",
    "report",
)


def normalize_url(url: str) -> str:
    """A base URL as caps and reports compare it: no credentials, query or trailing slash, host lower-case."""
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(url.strip())
    host = (parts.hostname or "").lower()
    netloc = f"{host}:{parts.port}" if parts.port is not None else host
    return urlunsplit((parts.scheme.lower(), netloc, parts.path.rstrip("/"), "", ""))


# ------------------------------------------------------------------------------------ records


@dataclass(frozen=True)
class DataSpec:
    """Where the cases come from (as ``eval --data``), and which of them to judge.

    Attributes:
        source: ``demo``, ``hf:[OWNER/NAME][@REV]``, a reference-layout directory or canonical
            file; a relative path is resolved against the sweep file's directory.
        organs: organ systems to keep; None keeps all.
        limit: the first N cases only.
        allow_external_images: accept image paths outside the data's directory.
    """

    source: str = "demo"
    organs: tuple[str, ...] | None = None
    limit: int | None = None
    allow_external_images: bool = False


@dataclass(frozen=True)
class ServeSpec:
    """A model server the sweep starts for an entry and stops when the entry is done.

    Attributes:
        command: the command line; ``{model}``, ``{port}`` and ``{host}`` are filled in (a free port).
        gpus: GPUs the server needs (its Ray worker asks for them; locally, informational).
        ready_timeout_s: how long ``/v1/models`` may take to answer after the start.
        stop_timeout_s: how long the server may take to exit after SIGTERM before it gets SIGKILL.
        env: extra environment variables for the server.
        model: what ``{model}`` stands for; default: the name in the entry's ``api:NAME`` spec.
    """

    command: str
    gpus: float = 1
    ready_timeout_s: float = 900.0
    stop_timeout_s: float = 30.0
    env: Mapping[str, str] = field(default_factory=dict)
    model: str | None = None


@dataclass(frozen=True)
class Resources:
    """What a judge entry's Ray worker asks the cluster for.

    Attributes:
        num_cpus: CPUs; None: 1 for local models and served ones, 0 for API judges and baselines
            (they wait on the network).
        num_gpus: GPUs; None: the ``serve.gpus`` of a served entry, else 0.
        custom: further Ray resources (``{"accelerator_type:A100": 0.01}``).
    """

    num_cpus: float | None = None
    num_gpus: float | None = None
    custom: Mapping[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class JudgeEntry:
    """One judge of the sweep.

    Attributes:
        name: unique within the sweep (default: the spec); juries and ``--prices`` refer to it.
        spec: the judge spec (``api:gpt-4o``, ``hf:PATH``, ``baseline:longer``...).
        kind: the spec's kind.
        options: its judge options (defaults, then its own).
        price: its price from the sweep file (``--prices`` may override it).
        serve: the server to start for it (``api:`` entries only).
        resources: what its Ray worker asks for.
        batch_api: whether ``--batch-api`` applies to it (``api:`` entries without ``serve``).
        line: where it starts in the sweep file.
    """

    name: str
    spec: str
    kind: str
    options: JudgeOptions
    price: Price | None = None
    serve: ServeSpec | None = None
    resources: Resources = field(default_factory=Resources)
    batch_api: bool = True
    line: int = 0

    @property
    def model(self) -> str:
        """The model name in the spec (the part after ``KIND:``)."""
        return self.spec.partition(":")[2]

    @property
    def is_local_model(self) -> bool:
        """A model loaded in the judging process (``hf:``, ``rm:``)."""
        return self.kind in LOCAL_MODEL_KINDS

    @property
    def is_served(self) -> bool:
        """Whether the sweep starts a server for this entry."""
        return self.serve is not None

    @property
    def is_heavy(self) -> bool:
        """Needs a machine's accelerator or memory to itself: local models and served ones run one at a time."""
        return self.is_local_model or self.is_served

    def base_url(self) -> str | None:
        """The endpoint of an ``api:`` entry that is not served (its option, ``OPENAI_BASE_URL``, or OpenAI's)."""
        if self.kind != "api" or self.serve is not None:
            return None
        return normalize_url(self.options.api.base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_API_BASE_URL)

    def ray_resources(self) -> dict[str, Any]:
        """``num_cpus``, ``num_gpus`` and ``resources`` for the entry's Ray actor."""
        default_cpus = 1.0 if self.is_heavy else 0.0
        cpus = self.resources.num_cpus if self.resources.num_cpus is not None else default_cpus
        if self.resources.num_gpus is not None:
            gpus = self.resources.num_gpus
        else:
            gpus = float(self.serve.gpus) if self.serve is not None else 0.0
        options: dict[str, Any] = {"num_cpus": cpus, "num_gpus": gpus}
        if self.resources.custom:
            options["resources"] = dict(self.resources.custom)
        return options


@dataclass(frozen=True)
class JuryEntry:
    """A jury: member judges (by name) with weights, decided by strict weighted majority.

    Attributes:
        name: the jury's name; its runs are stored as ``jury:NAME``.
        members: ``(judge entry name, weight)`` in the order written.
        line: where it starts in the sweep file.
    """

    name: str
    members: tuple[tuple[str, float], ...]
    line: int = 0

    @property
    def spec(self) -> str:
        """The judge spec its runs are stored under (``jury:NAME``)."""
        return f"{JURY_KIND}:{self.name}"


@dataclass(frozen=True)
class EndpointCap:
    """At most ``max_concurrency`` requests in flight to ``base_url``, whichever judges send them."""

    base_url: str
    max_concurrency: int
    line: int = 0


@dataclass(frozen=True)
class BatchApiSettings:
    """How ``--batch-api`` submits and waits.

    Attributes:
        poll_interval_s: seconds between two looks at a batch's status.
        completion_window: the window asked for (OpenAI accepts ``24h``).
        retry_failed: ``live``: requests the batch reports as failed (or leaves unanswered when it
            expires or is cancelled) are sent again at once as live requests; ``store``: they are
            stored as failures (``--retry-failures`` sends them again later).
        max_requests: requests per batch file at most (OpenAI: 50,000).
    """

    poll_interval_s: float = 30.0
    completion_window: str = "24h"
    retry_failed: str = "live"
    max_requests: int = 50_000


@dataclass(frozen=True)
class RaySettings:
    """How ``--ray`` treats workers.

    Attributes:
        max_restarts: how often Ray restarts a judge's worker that died.
        batch_retries: how often one batch is dispatched again after its worker died.
    """

    max_restarts: int = 3
    batch_retries: int = 3


@dataclass(frozen=True)
class ReportSettings:
    """The report written at the end (see ``medrewardbench report``)."""

    formats: tuple[str, ...] = ("md", "csv", "json", "html")
    n_resamples: int = 2000
    confidence: float = 0.95
    alpha: float = 0.05
    title: str = "Med-RewardBench sweep"


@dataclass(frozen=True)
class SweepConfig:
    """A whole sweep file, checked.

    Attributes:
        path: the file.
        data: the cases.
        orders: presentation orders.
        group_by: further metadata fields to break accuracy down by.
        judges: the judge entries, in file order.
        juries: the juries, in file order.
        endpoints: concurrency caps per base URL.
        prices: the file's price table (name, spec or model -> price).
        batch_api: ``--batch-api`` settings.
        ray: ``--ray`` settings.
        report: the final report.
    """

    path: Path
    data: DataSpec
    orders: tuple[Order, ...]
    judges: tuple[JudgeEntry, ...]
    juries: tuple[JuryEntry, ...] = ()
    group_by: tuple[str, ...] = ()
    endpoints: tuple[EndpointCap, ...] = ()
    prices: Mapping[str, Price] = field(default_factory=dict)
    batch_api: BatchApiSettings = field(default_factory=BatchApiSettings)
    ray: RaySettings = field(default_factory=RaySettings)
    report: ReportSettings = field(default_factory=ReportSettings)

    def entry(self, name: str) -> JudgeEntry:
        """The judge entry of this name.

        Raises:
            KeyError: none has it.
        """
        for entry in self.judges:
            if entry.name == name:
                return entry
        raise KeyError(name)

    def endpoint_caps(self) -> dict[str, int]:
        """Normalised base URL -> the most requests in flight to it."""
        return {cap.base_url: cap.max_concurrency for cap in self.endpoints}


# ------------------------------------------------------------------------------------- checks


def _known(section: Located, known: Sequence[str], what: str) -> None:
    for key in section.mapping():
        if key not in known:
            raise section.error(f"unknown key in {what}; known: {', '.join(known)}", key=key)


def _text(node: Located, *, optional: bool = False) -> str | None:
    value = node.value
    if value is None and optional:
        return None
    if not isinstance(value, str) or not value.strip():
        raise node.error(f"must be a non-empty text, not {value!r}")
    return value.strip()


def _whole(node: Located, minimum: int, *, optional: bool = False) -> int | None:
    value = node.value
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise node.error(f"must be a whole number >= {minimum}, not {value!r}")
    return value


def _number(node: Located, minimum: float, *, strict: bool = False, optional: bool = False) -> float | None:
    value = node.value
    if value is None and optional:
        return None
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if not number or not math.isfinite(value) or value < minimum or (strict and value == minimum):
        bound = f"> {minimum:g}" if strict else f">= {minimum:g}"
        finite = "finite " if number and not math.isfinite(value) else ""
        raise node.error(f"must be a {finite}number {bound}, not {value!r}")
    return float(value)


def _flag(node: Located) -> bool:
    if not isinstance(node.value, bool):
        raise node.error(f"must be true or false, not {node.value!r}")
    return node.value


def _names(node: Located) -> tuple[str, ...]:
    """A list of names, or one comma-separated text."""
    if isinstance(node.value, str):
        names = [part.strip() for part in node.value.split(",") if part.strip()]
    else:
        names = [_text(item) or "" for item in node.sequence("a list of names")]
    if not names:
        raise node.error("names nothing")
    return tuple(names)


def _data(node: Located | None, base_dir: Path) -> DataSpec:
    if node is None:
        return DataSpec()
    if isinstance(node.value, str):
        return DataSpec(source=_resolve_source(node.value.strip(), base_dir))
    section = node.mapping("a data source text or a mapping with source, organs, limit")
    _known(node, ("source", "organs", "limit", "allow_external_images"), "data")
    if "source" not in section:
        raise node.error("needs a source (demo, hf:OWNER/NAME, a directory or a canonical file)")
    return DataSpec(
        source=_resolve_source(_text(section["source"]) or "demo", base_dir),
        organs=_names(section["organs"]) if "organs" in section else None,
        limit=_whole(section["limit"], 1) if "limit" in section else None,
        allow_external_images=_flag(section["allow_external_images"]) if "allow_external_images" in section else False,
    )


def _resolve_source(source: str, base_dir: Path) -> str:
    """A relative path is relative to the sweep file; ``demo`` and ``hf:`` sources stay as they are."""
    if source == "demo" or source.startswith("hf:"):
        return source
    path = Path(source).expanduser()
    if path.is_absolute():
        return str(path)
    return str((base_dir / path).resolve())


def _orders(node: Located | None) -> tuple[Order, ...]:
    if node is None:
        return (Order.ORIGINAL, Order.SWAPPED)
    if isinstance(node.value, list):
        chosen: list[Order] = []
        for item in node.value:
            text = _text(item) or ""
            try:
                chosen.extend(o for o in Order.parse_selection(text) if o not in chosen)
            except ValueError as exc:
                raise item.error(str(exc)) from None
        return tuple(o for o in Order if o in chosen)
    try:
        return Order.parse_selection(_text(node) or "")
    except ValueError as exc:
        raise node.error(str(exc)) from None


def _price(node: Located) -> Price:
    section = node.mapping("a mapping with input and output (dollars per million tokens)")
    _known(node, ("input", "output", "batch_input", "batch_output"), "a price")
    for key in ("input", "output"):
        if key not in section:
            raise node.error(f"needs {key} (dollars per million {key} tokens)")
    values = {key: _number(value, 0.0) for key, value in section.items()}
    try:
        return Price(**values)  # type: ignore[arg-type]
    except MedRewardBenchError as exc:
        raise node.error(str(exc)) from None


def _price_table(node: Located | None) -> dict[str, Price]:
    if node is None:
        return {}
    return {key: _price(value) for key, value in node.mapping("a mapping of model names to prices").items()}


def _settings(cls: type[Any], values: dict[str, Located], where: Located, converters: str) -> Any:
    """Typed settings from located values, blaming the one value that is refused."""
    for key, value in values.items():
        try:
            cls.from_mapping({key: value.plain()}, where=converters)
        except JudgeSpecError as exc:
            raise value.error(_short(str(exc))) from None
    try:
        return cls.from_mapping({k: v.plain() for k, v in values.items()}, where=converters)
    except JudgeSpecError as exc:
        raise where.error(_short(str(exc))) from None


def _short(message: str) -> str:
    """A settings message without its section prefix (the location names it already)."""
    for prefix in ("api: ", "local: ", "options: "):
        if message.startswith(prefix):
            return message[len(prefix) :]
    return message


@dataclass
class _OptionValues:
    """Located option values of one section (defaults or an entry), sorted by the settings they belong to."""

    shared: dict[str, Located] = field(default_factory=dict)
    api: dict[str, Located] = field(default_factory=dict)
    local: dict[str, Located] = field(default_factory=dict)


def _option_values(node: Located, kind: str | None, extra_keys: Sequence[str], what: str) -> _OptionValues:
    """Sort a section's keys into shared, api and local options; anything else is refused.

    Args:
        node: the section (a judge entry or ``defaults``).
        kind: the judge kind (None for ``defaults``: every option is allowed there).
        extra_keys: keys the caller reads itself.
        what: how messages name the section.
    """
    values = _OptionValues()
    allowed_api = kind in (None, "api")
    allowed_local = kind is None or kind in LOCAL_MODEL_KINDS
    known = [*extra_keys, *_SHARED]
    if allowed_api:
        known += [*_API, "api"]
    if allowed_local:
        known += [*_LOCAL, "local"]
    for key, value in node.mapping().items():
        if key in extra_keys:
            continue
        if key in _SHARED:
            values.shared[key] = value
        elif key in _API or key == "api":
            if not allowed_api:
                raise node.error(f"is a setting of api: judges, not of {kind}: judges", key=key)
            if key == "api":
                values.api.update(value.mapping("a mapping of api settings"))
                for inner in value.value:
                    if inner not in _API:
                        raise value.error(f"unknown api setting; known: {', '.join(_API)}", key=inner)
            else:
                values.api[key] = value
        elif key in _LOCAL or key == "local":
            if not allowed_local:
                raise node.error(f"is a setting of local models (hf:, rm:), not of {kind}: judges", key=key)
            if key == "local":
                values.local.update(value.mapping("a mapping of local model settings"))
                for inner in value.value:
                    if inner not in _LOCAL:
                        raise value.error(f"unknown local setting; known: {', '.join(_LOCAL)}", key=inner)
            else:
                values.local[key] = value
        else:
            raise node.error(f"unknown key in {what}; known: {', '.join(dict.fromkeys(known))}", key=key)
    return values


def _options(defaults: _OptionValues, own: _OptionValues, top: dict[str, Any], node: Located) -> JudgeOptions:
    shared = {**defaults.shared, **own.shared}
    api = _settings(ApiSettings, {**defaults.api, **own.api}, node, "api")
    local = _settings(LocalSettings, {**defaults.local, **own.local}, node, "local")
    plain = {**top, **{k: v.plain() for k, v in shared.items()}}
    # the file's own wording first; JudgeOptions checks the same ranges (and names the flags)
    for key in ("concurrency", "batch_size", "max_tokens"):
        if key in shared:
            _whole(shared[key], 1, optional=True)
    for key in ("temperature", "top_p"):
        if key in shared:
            _number(shared[key], 0.0, optional=True)
    if "top_p" in shared and (shared["top_p"].value or 0) > 1:
        raise shared["top_p"].error(f"must be a number between 0 and 1, not {shared['top_p'].value!r}")
    for key, value in shared.items():
        try:
            JudgeOptions.from_mapping({key: value.plain()}, where="options")
        except (JudgeSpecError, TypeError) as exc:
            raise value.error(_short(str(exc))) from None
    try:
        options = JudgeOptions.from_mapping(plain, where="options")
    except (JudgeSpecError, TypeError) as exc:
        raise node.error(_short(str(exc))) from None
    if "seed" in shared:
        _whole(shared["seed"], 0)
    if "template" in shared:
        _text(shared["template"])
    return options.with_changes(api=api, local=local)


def _serve(node: Located, entry_spec: str) -> ServeSpec:
    section = node.mapping("a mapping with command (and gpus, ready_timeout, stop_timeout, env, model)")
    _known(node, ("command", "gpus", "ready_timeout", "stop_timeout", "env", "model"), "serve")
    if "command" not in section:
        raise node.error('needs a command, for example "vllm serve {model} --port {port}"')
    command = _text(section["command"]) or ""
    if "{port}" not in command:
        raise section["command"].error(
            "must contain {port}: the sweep picks a free port and the server must listen on it"
        )
    try:
        command.format(model="m", port=1, host="h")
    except (KeyError, IndexError, ValueError) as exc:
        raise section["command"].error(
            f"has a placeholder other than {{model}}, {{port}} and {{host}} ({exc!r}); "
            "write literal braces as {{ }}"
        ) from None
    env: dict[str, str] = {}
    if "env" in section:
        for key, value in section["env"].mapping("a mapping of environment variables").items():
            if not isinstance(value.value, (str, int, float)) or isinstance(value.value, bool):
                raise value.error("must be a text or a number")
            env[key] = str(value.value)
    return ServeSpec(
        command=command,
        gpus=_number(section["gpus"], 0.0) if "gpus" in section else 1.0,  # type: ignore[arg-type]
        ready_timeout_s=_number(section["ready_timeout"], 0.0, strict=True) if "ready_timeout" in section else 900.0,  # type: ignore[arg-type]
        stop_timeout_s=_number(section["stop_timeout"], 0.0) if "stop_timeout" in section else 30.0,  # type: ignore[arg-type]
        env=env,
        model=_text(section["model"]) if "model" in section else None,
    )


def _resources(node: Located) -> Resources:
    section = node.mapping("a mapping with num_cpus, num_gpus (and custom)")
    _known(node, ("num_cpus", "num_gpus", "custom"), "resources")
    custom: dict[str, float] = {}
    if "custom" in section:
        for key, value in section["custom"].mapping("a mapping of Ray resource names to amounts").items():
            custom[key] = _number(value, 0.0) or 0.0
    return Resources(
        num_cpus=_number(section["num_cpus"], 0.0) if "num_cpus" in section else None,
        num_gpus=_number(section["num_gpus"], 0.0) if "num_gpus" in section else None,
        custom=custom,
    )


def _judge_entry(node: Located, defaults: _OptionValues, top: dict[str, Any]) -> JudgeEntry | JuryEntry:
    section = node.mapping("a mapping with at least judge: KIND:NAME")
    if "judge" not in section:
        raise node.error("needs judge: KIND:NAME (for example api:gpt-4o, hf:PATH, baseline:longer)")
    spec_node = section["judge"]
    spec = _text(spec_node) or ""
    if spec.startswith(f"{JURY_KIND}:"):
        return _jury(node, spec.partition(":")[2], in_judges=True)
    try:
        kind, model = split_spec(spec)
    except JudgeSpecError as exc:
        raise spec_node.error(f"{exc}; or jury:NAME with members") from None
    values = _option_values(node, kind, ("judge", "name", "price", "serve", "resources", "batch_api"), "a judge entry")
    name = _text(section["name"]) if "name" in section else spec
    serve = None
    if "serve" in section:
        if kind != "api":
            raise node.error(f"serve: starts an OpenAI-compatible server, so the judge must be api:MODEL, not {spec}")
        serve = _serve(section["serve"], spec)
        for key in ("base_url",):
            if key in values.api:
                raise node.error("comes from the server the sweep starts; leave it out of a served entry", key=key)
        if not model and serve.model is None:
            raise spec_node.error("a served entry needs a model name: api:MODEL")
    options = _options(defaults, values, top, node)
    return JudgeEntry(
        name=name or spec,
        spec=spec,
        kind=kind,
        options=options,
        price=_price(section["price"]) if "price" in section else None,
        serve=serve,
        resources=_resources(section["resources"]) if "resources" in section else Resources(),
        batch_api=_flag(section["batch_api"]) if "batch_api" in section else True,
        line=node.line,
    )


def _jury(node: Located, name: str | None, *, in_judges: bool = False) -> JuryEntry:
    section = node.mapping("a mapping with name and members")
    known = ("judge", "members", "weights") if in_judges else ("name", "members", "weights")
    _known(node, known, "a jury")
    if name is None:
        if "name" not in section:
            raise node.error("needs a name")
        name = _text(section["name"]) or ""
    if not name or ":" in name:
        raise node.error(f"jury name {name!r} must be non-empty and without ':'")
    if "members" not in section:
        raise node.error("needs members: the names of at least two judges of this sweep")
    weights: dict[str, float] = {}
    if "weights" in section:
        for key, value in section["weights"].mapping("a mapping of member names to weights").items():
            weights[key] = _number(value, 0.0, strict=True) or 1.0
    members: list[tuple[str, float]] = []
    member_nodes: dict[str, Located] = {}
    for item in section["members"].sequence("a list of judge names (or of {judge, weight})"):
        if isinstance(item.value, dict):
            _known(item, ("judge", "weight"), "a jury member")
            if "judge" not in item.value:
                raise item.error("needs judge: the name of a judge of this sweep")
            member = _text(item.value["judge"]) or ""
            weight = _number(item.value["weight"], 0.0, strict=True) if "weight" in item.value else None
        else:
            member = _text(item) or ""
            weight = None
        if member in member_nodes:
            raise item.error(f"{member!r} is a member twice")
        if weight is not None and member in weights:
            raise item.error(f"{member!r} has a weight here and in weights")
        member_nodes[member] = item
        members.append((member, weight if weight is not None else weights.get(member, 1.0)))
    for key in weights:
        if key not in member_nodes:
            raise section["weights"].error("is not a member of this jury", key=key)
    if len(members) < 2:
        raise section["members"].error("a jury needs at least two members")
    return JuryEntry(name=name, members=tuple(members), line=node.line)


def _endpoints(node: Located | None) -> tuple[EndpointCap, ...]:
    if node is None:
        return ()
    caps: list[EndpointCap] = []
    seen: dict[str, int] = {}
    for item in node.sequence("a list of {base_url, max_concurrency}"):
        section = item.mapping("a mapping with base_url and max_concurrency")
        _known(item, ("base_url", "max_concurrency"), "an endpoint")
        for key in ("base_url", "max_concurrency"):
            if key not in section:
                raise item.error(f"needs {key}")
        url = _text(section["base_url"]) or ""
        if not url.lower().startswith(("http://", "https://")):
            raise section["base_url"].error(f"must be an http(s) URL, not {url!r}")
        normalized = normalize_url(url)
        if normalized in seen:
            raise item.error(f"{normalized} is capped twice (first on line {seen[normalized]})")
        seen[normalized] = item.line
        caps.append(EndpointCap(normalized, _whole(section["max_concurrency"], 1) or 1, item.line))
    return tuple(caps)


def _batch_api(node: Located | None) -> BatchApiSettings:
    if node is None:
        return BatchApiSettings()
    section = node.mapping()
    _known(node, ("poll_interval", "completion_window", "retry_failed", "max_requests"), "batch_api")
    retry = _text(section["retry_failed"]) if "retry_failed" in section else "live"
    if retry not in ("live", "store"):
        raise section["retry_failed"].error(f"must be live or store, not {retry!r}")
    return BatchApiSettings(
        poll_interval_s=_number(section["poll_interval"], 0.0, strict=True) if "poll_interval" in section else 30.0,  # type: ignore[arg-type]
        completion_window=_text(section["completion_window"]) if "completion_window" in section else "24h",  # type: ignore[arg-type]
        retry_failed=retry or "live",
        max_requests=_whole(section["max_requests"], 1) if "max_requests" in section else 50_000,  # type: ignore[arg-type]
    )


def _ray(node: Located | None) -> RaySettings:
    if node is None:
        return RaySettings()
    section = node.mapping()
    _known(node, ("max_restarts", "batch_retries"), "ray")
    return RaySettings(
        max_restarts=_whole(section["max_restarts"], 0) if "max_restarts" in section else 3,  # type: ignore[arg-type]
        batch_retries=_whole(section["batch_retries"], 0) if "batch_retries" in section else 3,  # type: ignore[arg-type]
    )


def _report(node: Located | None) -> ReportSettings:
    if node is None:
        return ReportSettings()
    section = node.mapping()
    _known(node, ("formats", "n_resamples", "confidence", "alpha", "title"), "report")
    formats = ReportSettings.formats
    if "formats" in section:
        formats = _names(section["formats"])
        for name in formats:
            if name not in REPORT_FORMATS:
                raise section["formats"].error(f"unknown format {name!r}; choose from {', '.join(REPORT_FORMATS)}")
    confidence = _number(section["confidence"], 0.0, strict=True) if "confidence" in section else 0.95
    if confidence is not None and confidence >= 1:
        raise section["confidence"].error(f"must be between 0 and 1, not {confidence}")
    alpha = _number(section["alpha"], 0.0, strict=True) if "alpha" in section else 0.05
    if alpha is not None and alpha >= 1:
        raise section["alpha"].error(f"must be between 0 and 1, not {alpha}")
    return ReportSettings(
        formats=tuple(formats),
        n_resamples=_whole(section["n_resamples"], 0) if "n_resamples" in section else 2000,  # type: ignore[arg-type]
        confidence=confidence or 0.95,
        alpha=alpha or 0.05,
        title=_text(section["title"]) if "title" in section else ReportSettings.title,  # type: ignore[arg-type]
    )


# ----------------------------------------------------------------------------------------- load


def load_sweep(path: str | Path, text: str | None = None) -> SweepConfig:
    """Read and check a sweep file.

    Args:
        path: the YAML file.
        text: its content, when already read (``path`` then only names it and anchors relative paths).

    Returns:
        The checked sweep.

    Raises:
        SweepFileError: anything wrong, with the file, line and key in the message.
    """
    file = Path(path)
    root = read_located(file, text)
    top = root.mapping("a mapping with data, judges, ...")
    _known(root, _TOP_KEYS, "the sweep file")
    if "judges" not in top:
        raise root.error("needs judges: a list of judge entries (judge: KIND:NAME plus its options)")
    template = _text(top["template"]) if "template" in top else "pairwise"
    seed = _whole(top["seed"], 0) if "seed" in top else 0
    shared_top: dict[str, Any] = {"template": template, "seed": seed}
    defaults = _option_values(top["defaults"], None, (), "defaults") if "defaults" in top else _OptionValues()
    if "defaults" in top:
        for key in ("template", "seed"):
            if key in defaults.shared and key in top:
                raise top["defaults"].error(f"{key} is given at the top level too", key=key)
        _options(defaults, _OptionValues(), shared_top, top["defaults"])  # checked once, blamed on defaults
    judges: list[JudgeEntry] = []
    juries: list[JuryEntry] = []
    names: dict[str, int] = {}
    entries = top["judges"].sequence("a list of judge entries")
    if not entries:
        raise top["judges"].error("is empty: name at least one judge")
    for item in entries:
        entry = _judge_entry(item, defaults, shared_top)
        key = entry.name if isinstance(entry, JudgeEntry) else entry.spec
        if key in names:
            raise item.error(f"{key!r} appears twice (first on line {names[key]}); give each entry its own name:")
        names[key] = item.line
        if isinstance(entry, JudgeEntry):
            judges.append(entry)
        else:
            juries.append(entry)
    if "juries" in top:
        for item in top["juries"].sequence("a list of juries"):
            jury = _jury(item, None)
            if jury.spec in names:
                raise item.error(f"{jury.spec!r} appears twice (first on line {names[jury.spec]})")
            names[jury.spec] = item.line
            juries.append(jury)
    if not judges:
        raise top["judges"].error("has no judge to run (juries need member judges)")
    judge_names = {entry.name for entry in judges}
    for jury in juries:
        for member, _ in jury.members:
            if member not in judge_names:
                hint = " (juries of juries are not supported)" if f"{JURY_KIND}:{member}" in names else ""
                raise SweepFileError(
                    file,
                    jury.line,
                    f"jury {jury.name!r}: member {member!r} is not a judge of this sweep{hint}; judges: "
                    + ", ".join(sorted(judge_names)),
                )
    group_by: tuple[str, ...] = ()
    if "group_by" in top:
        group_by = _names(top["group_by"])
    return SweepConfig(
        path=file,
        data=_data(top.get("data"), file.parent.resolve()),
        orders=_orders(top.get("orders")),
        judges=tuple(judges),
        juries=tuple(juries),
        group_by=group_by,
        endpoints=_endpoints(top.get("endpoints")),
        prices=_price_table(top.get("prices")),
        batch_api=_batch_api(top.get("batch_api")),
        ray=_ray(top.get("ray")),
        report=_report(top.get("report")),
    )


def load_prices(path: str | Path) -> dict[str, Price]:
    """Read a ``--prices`` file: a mapping of model names (or judge names or specs) to prices.

    The file may also put the mapping under a top-level ``prices:`` key, so that a sweep file's
    price table can be copied into one as it is.

    Args:
        path: a YAML or JSON file.

    Returns:
        name -> price.

    Raises:
        SweepFileError: the file cannot be read, holds no price, or a price is invalid (with its line).
    """
    root = read_located(path)
    section = root.mapping("a mapping of model names to {input, output} prices")
    table = _price_table(section["prices"]) if set(section) == {"prices"} else _price_table(root)
    if not table:
        raise SweepFileError(path, None, "holds no prices; give model: {input: DOLLARS, output: DOLLARS} entries")
    return table


def known_kinds_text() -> str:
    """The judge kinds a sweep entry may use, for help texts."""
    return ", ".join([*known_kinds(), JURY_KIND])
