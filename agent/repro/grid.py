"""A repro grid: the experiment a paper's table reports, written down as a TOML file.

A grid names its stories (prompts picked from a JSONL set by id or by count, or a folder of
Magnet story definitions), the target lengths, the methods and ablations (each a pipeline and
its ``--set`` values), the seeds (replicates: one more story per prompt, length and method),
the profile, the judge, the tables it reports and the models of a pipeline's roles (Magnet's:
``[roles]`` for every method, a method's ``roles`` for that one). Every field is checked here, before
anything is created, so a bad grid is one line naming the field (exit 2) and leaves nothing.

Grids ship with fabula (``agent/repro/grids/*.toml``, by name: ``fabula repro smoke``); any
other path is a user's own grid. Paths inside a grid are read relative to the current folder
first, then to the grid's own folder.
"""

from __future__ import annotations

import hashlib
import json
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent import pipelines
from agent.errors import ConfigError, InputError
from agent.settings import check_user_value
from agent.userinput import SEED_MAX, number_or_none, read_user_file, within_nesting

GRIDS = Path(__file__).resolve().parent / "grids"
NSTAGENT_TABLES, MAGNET_TABLES = "NstAgent", "Magnet"
TABLES = (NSTAGENT_TABLES, MAGNET_TABLES)
"""Which paper's tables a grid reports, by the paper's method: NstAgent's 3, 8 and 4, or Magnet's 1
and 2 (not a pipeline's name: a grid's methods name their pipelines)."""
EVALS = {NSTAGENT_TABLES: ("consistency", "quality"), MAGNET_TABLES: ("editorial",)}
KEYS = {
    "name",
    "description",
    "tables",
    "profile",
    "prompts",
    "ids",
    "first",
    "first_at",
    "stories",
    "lengths",
    "seeds",
    "methods",
    "judge",
    "include_incomplete",
    "concurrency",
    "roles",
}
METHOD_KEYS = {"name", "pipeline", "set", "roles"}
ROLE_KEYS = ("model", "endpoint")
MAX_MODEL_NAME = 200
"""The longest model name a grid's role may give (a name, not a paragraph)."""
JUDGE_KEYS = {"endpoint", "model", "max_tokens", "min_output", "temperature", "seed", "context_tokens"}
MAX_CELLS = 10_000
"""The most cells (methods x lengths x seeds) a grid may have, checked before any cell is made."""
MAX_COUNT = 1_000_000
"""The largest count a grid field names (a concurrency, a number of prompts, a judge's token count)."""
MAX_GRID_BYTES = 1 << 20
"""A grid is a page of TOML; a bigger file is the wrong one."""
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,79}")
"""A grid's ``name``: it names the folder ``runs/repro-NAME`` (no ``/``, no ``..``)."""


class GridError(InputError):
    """The grid file is wrong: one line naming the grid and the field."""


@dataclass(frozen=True)
class RoleModels:
    """The models (and servers) a grid gives a pipeline's roles, by role: what ``--role-model ROLE=MODEL``
    and ``--role-endpoint ROLE=URL`` give on the command line."""

    models: Mapping[str, str] = field(default_factory=dict)
    endpoints: Mapping[str, str] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.models or self.endpoints)

    def over(self, base: RoleModels, roles: Mapping[str, Any]) -> RoleModels:
        """These, field by field over ``base``'s, kept to ``roles`` (a pipeline's)."""
        return RoleModels(
            {k: v for k, v in {**base.models, **self.models}.items() if k in roles},
            {k: v for k, v in {**base.endpoints, **self.endpoints}.items() if k in roles},
        )


@dataclass(frozen=True)
class Method:
    """One row of a table: a label, the pipeline that writes it, its settings (an ablation) and the
    models of its roles (``roles``: the method's own, over the grid's ``[roles]``)."""

    name: str
    pipeline: str
    settings: dict[str, Any] = field(default_factory=dict)
    roles: RoleModels = field(default_factory=RoleModels)

    @property
    def slug(self) -> str:
        return re.sub(r"[^A-Za-z0-9._-]+", "-", self.name).strip(".-").lower() or "method"


@dataclass(frozen=True)
class JudgeSpec:
    """The judge of every story of the grid (endpoint and model: flags or config when absent)."""

    endpoint: str | None = None
    model: str | None = None
    max_tokens: int = 8192
    min_output: int = 256
    temperature: float = 0.1
    seed: int = 0
    context_tokens: int | None = None


@dataclass(frozen=True)
class Cell:
    """One batch of the grid: a method at a length and a seed, over every picked story."""

    method: Method
    words: int
    seed: int

    @property
    def folder(self) -> str:
        return f"{self.method.slug}/{self.words}/seed-{self.seed}"


@dataclass(frozen=True)
class Grid:
    name: str
    description: str
    tables: str
    profile: str
    lengths: tuple[int, ...]
    seeds: tuple[int, ...]
    methods: tuple[Method, ...]
    judge: JudgeSpec
    source: Path
    prompts: Path | None = None
    ids: str | None = None
    first: int | None = None
    first_at: dict[int, int] = field(default_factory=dict)
    stories: Path | None = None
    include_incomplete: bool = False
    concurrency: int = 1
    roles: RoleModels = field(default_factory=RoleModels)
    """The grid's ``[roles]``: for every method whose pipeline has those roles."""

    @property
    def evals(self) -> tuple[str, ...]:
        return EVALS[self.tables]

    def cells(self) -> list[Cell]:
        return [Cell(m, w, s) for m in self.methods for w in self.lengths for s in self.seeds]

    def stories_at(self, words: int) -> int | None:
        """How many prompts a length takes by count (``first``, ``first_at``); None: by ids or all."""
        return self.first_at.get(words, self.first)

    def model_roles(self) -> dict[str, tuple[str, ...]]:
        """The roles of the grid's pipelines that may have a model of their own (Magnet's)."""
        return {role: serves for m in self.methods for role, serves in pipelines.get(m.pipeline).model_roles.items()}

    def roles_of(self, method: Method) -> RoleModels:
        """The models the grid gives ``method``'s roles: its own, field by field over ``[roles]``."""
        return method.roles.over(self.roles, pipelines.get(method.pipeline).model_roles)

    def cell_digest(self, cell: Cell) -> str:
        """What a cell's stories are written with: a rerun with other settings is refused (the role
        models the grid names are part of it; their servers, like the run's, may move)."""
        spec: dict[str, Any] = {
            "pipeline": cell.method.pipeline,
            "settings": cell.method.settings,
            "profile": self.profile,
            "words": cell.words,
        }
        models = self.roles_of(cell.method).models
        if models:  # absent when none: a grid without roles keeps the digests its cells were made with
            spec["roles"] = dict(models)
        return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:16]


def shipped() -> list[str]:
    """The grids fabula ships, by name."""
    return sorted(p.stem for p in GRIDS.glob("*.toml"))


def locate(name_or_path: str) -> Path:
    """A shipped grid by name, else a path to a TOML file."""
    path = Path(name_or_path).expanduser()
    if path.suffix != ".toml" and (GRIDS / f"{name_or_path}.toml").is_file():
        return GRIDS / f"{name_or_path}.toml"
    if not path.is_file():
        raise GridError(f"no grid {name_or_path!r}: neither a shipped grid ({', '.join(shipped())}) nor a TOML file")
    return path


def load_grid(name_or_path: str, *, prompts: str | None = None) -> Grid:
    """The grid, every field checked; ``prompts`` replaces the grid's prompt set (``--prompts``)."""
    path = locate(name_or_path)
    try:
        text = within_nesting(read_user_file(str(path), limit=MAX_GRID_BYTES, what="the grid"), what=f"grid {path}")
        data = tomllib.loads(text)
    except InputError as exc:
        raise GridError(str(exc)) from None
    except tomllib.TOMLDecodeError as exc:
        raise GridError(f"{path}: not TOML ({exc})") from None
    return parse_grid(data, path, prompts=prompts)


def _fail(path: Path, what: str) -> GridError:
    return GridError(f"grid {path}: {what}")


def _int_list(path: Path, data: Mapping[str, Any], key: str, default: list[int] | None = None) -> tuple[int, ...]:
    value = data.get(key, default)
    if (
        not isinstance(value, list)
        or not value
        or len(value) > MAX_CELLS
        or not all(isinstance(v, int) and not isinstance(v, bool) for v in value)
    ):
        raise _fail(path, f"{key} must be a non-empty list of whole numbers (at most {MAX_CELLS:,})")
    if len(set(value)) != len(value):
        raise _fail(path, f"{key} repeats a value")
    return tuple(value)


def _resolve(path: Path, value: Any, key: str) -> Path:
    if not isinstance(value, str) or not value:
        raise _fail(path, f"{key} must be a path")
    given = Path(value).expanduser()
    if given.is_absolute() or given.exists():
        return given
    beside = path.parent / given
    return beside if beside.exists() else given


def parse_grid(data: Mapping[str, Any], path: Path, *, prompts: str | None = None) -> Grid:
    unknown = sorted(set(data) - KEYS)
    if unknown:
        raise _fail(path, f"unknown key {unknown[0]!r}; known: {', '.join(sorted(KEYS))}")
    name = data.get("name", path.stem)
    if not isinstance(name, str) or NAME.fullmatch(name) is None or ".." in name:
        raise _fail(path, f"name must be letters, digits, '.', '_' or '-' (it names a folder), got {str(name)[:60]!r}")
    tables = data.get("tables")
    if tables not in TABLES:
        raise _fail(path, f"tables must be one of {', '.join(TABLES)}, got {tables!r}")
    profile = data.get("profile", "paper")
    if not isinstance(profile, str):
        raise _fail(path, "profile must be a name")
    lengths = _int_list(path, data, "lengths")
    seeds = _int_list(path, data, "seeds", [0])
    if any(not 0 <= seed <= SEED_MAX for seed in seeds):
        raise _fail(path, f"seeds must be whole numbers from 0 to {SEED_MAX}")
    methods_given = data.get("methods")
    count = len(lengths) * len(seeds) * (len(methods_given) if isinstance(methods_given, list) else 1)
    if count > MAX_CELLS:
        raise _fail(path, f"{count:,} cells (methods x lengths x seeds); a grid has at most {MAX_CELLS:,}")
    for words in lengths:
        try:
            check_user_value("words", words, flag="lengths")
        except ConfigError as exc:
            raise _fail(path, str(exc)) from None
    methods = _methods(path, data.get("methods"), profile)
    known = {role: serves for m in methods for role, serves in pipelines.get(m.pipeline).model_roles.items()}
    roles = _role_models(path, data["roles"], "roles", known, "no method of this grid has") if "roles" in data else None
    takes = {pipelines.get(m.pipeline).takes for m in methods}
    if len(takes) != 1:
        raise _fail(path, "every method of a grid takes the same input (prompts, or story definitions)")
    grid = Grid(
        name=str(name),
        description=str(data.get("description", "")),
        tables=tables,
        profile=profile,
        lengths=lengths,
        seeds=seeds,
        methods=methods,
        judge=_judge(path, data.get("judge", {})),
        source=path,
        include_incomplete=_bool(path, data, "include_incomplete"),
        concurrency=_positive(path, data.get("concurrency", 1), "concurrency"),
        roles=roles or RoleModels(),
    )
    if takes == {"prompt"}:
        return _with_prompts(grid, path, data, prompts)
    if "stories" not in data or any(k in data for k in ("prompts", "ids", "first", "first_at")) or prompts:
        raise _fail(path, "a grid of story pipelines takes stories = FOLDER (and no prompts, ids or first)")
    stories = _resolve(path, data["stories"], "stories")
    if not stories.is_dir():
        raise _fail(path, f"stories {stories}: not a folder of story definitions")
    return _replace(grid, stories=stories)


def _replace(grid: Grid, **changes: Any) -> Grid:
    from dataclasses import replace

    return replace(grid, **changes)


def _with_prompts(grid: Grid, path: Path, data: Mapping[str, Any], prompts: str | None) -> Grid:
    if "stories" in data:
        raise _fail(path, "a grid of prompt pipelines takes prompts = FILE.jsonl, not stories")
    if prompts is None and "prompts" not in data:
        raise _fail(path, "prompts = FILE.jsonl is missing")
    source = Path(prompts).expanduser() if prompts else _resolve(path, data["prompts"], "prompts")
    ids = data.get("ids")
    if ids is not None and (not isinstance(ids, str) or "first" in data):
        raise _fail(path, 'ids is a string such as "1-20,35", and does not go with first')
    first = data.get("first")
    if first is not None:
        first = _positive(path, first, "first")
    first_at: dict[int, int] = {}
    raw = data.get("first_at", {})
    if not isinstance(raw, dict):
        raise _fail(path, "first_at is a table of length = count")
    for key, value in raw.items():
        length = number_or_none(key, low=1, high=max(grid.lengths))
        if length is None or length not in grid.lengths:
            raise _fail(path, f"first_at: {str(key)[:40]!r} is not one of the lengths")
        first_at[length] = _positive(path, value, f"first_at.{str(key)[:40]}")
    return _replace(grid, prompts=source, ids=ids, first=first, first_at=first_at)


def _positive(path: Path, value: Any, key: str, high: int = MAX_COUNT) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= high:
        raise _fail(path, f"{key} must be a whole number of at least 1 (at most {high:,}), got {str(value)[:40]}")
    return value


def _bool(path: Path, data: Mapping[str, Any], key: str) -> bool:
    value = data.get(key, False)
    if not isinstance(value, bool):
        raise _fail(path, f"{key} must be true or false")
    return value


def _methods(path: Path, raw: Any, profile: str) -> tuple[Method, ...]:
    if not isinstance(raw, list) or not raw:
        raise _fail(path, "methods must be a non-empty list of [[methods]] tables")
    out: list[Method] = []
    for n, item in enumerate(raw, start=1):
        if not isinstance(item, dict):
            raise _fail(path, f"methods[{n}] is not a table")
        unknown = sorted(set(item) - METHOD_KEYS)
        if unknown:
            raise _fail(path, f"methods[{n}]: unknown key {unknown[0]!r}; known: {', '.join(sorted(METHOD_KEYS))}")
        name, pipeline, settings = item.get("name"), item.get("pipeline"), item.get("set", {})
        if not isinstance(name, str) or not name.strip():
            raise _fail(path, f"methods[{n}]: name is missing")
        if pipeline not in pipelines.names():
            raise _fail(
                path, f"methods[{n}] ({name}): pipeline must be one of {', '.join(pipelines.names())}, got {pipeline!r}"
            )
        if not isinstance(settings, dict):
            raise _fail(path, f"methods[{n}] ({name}): set is a table of settings")
        _check_settings(path, name, pipeline, settings, profile)
        roles = RoleModels()
        if "roles" in item:
            known = pipelines.get(pipeline).model_roles
            roles = _role_models(path, item["roles"], f"methods ({name}): roles", known, f"{pipeline} has no")
        out.append(Method(name.strip(), pipeline, dict(settings), roles))
    slugs = [m.slug for m in out]
    if len(set(slugs)) != len(slugs):
        raise _fail(path, "two methods have the same name")
    return tuple(out)


def _role_models(path: Path, raw: Any, where: str, known: Mapping[str, Any], none: str) -> RoleModels:
    """A ``roles`` table: ``ROLE = "MODEL"``, or ``ROLE = { model = "MODEL", endpoint = "URL" }`` for a
    role on a server of its own; every role one of ``known`` (none: ``none`` roles, refused)."""
    shape = 'a table of ROLE = "MODEL" or ROLE = { model = "MODEL", endpoint = "URL" }'
    if not isinstance(raw, dict):
        raise _fail(path, f"{where} is {shape}")
    if not known:
        raise _fail(path, f"{where}: {none} roles with models of their own")
    models: dict[str, str] = {}
    endpoints: dict[str, str] = {}
    for role, entry in raw.items():
        if role not in known:
            raise _fail(path, f"{where}: unknown role {str(role)[:40]!r}; roles: {', '.join(known)}")
        entry = {"model": entry} if isinstance(entry, str) else entry
        if not isinstance(entry, dict) or not entry or set(entry) - set(ROLE_KEYS):
            raise _fail(path, f'{where}.{role} must be "MODEL" or {{ model = "MODEL", endpoint = "URL" }}')
        model, endpoint = entry.get("model"), entry.get("endpoint")
        if model is not None:
            if not isinstance(model, str) or not model.strip() or len(model) > MAX_MODEL_NAME:
                raise _fail(path, f"{where}.{role}: the model must be a name (at most {MAX_MODEL_NAME} characters)")
            models[role] = model.strip()
        if endpoint is not None:
            endpoints[role] = _role_server(path, f"{where}.{role}", endpoint)
    return RoleModels(models, endpoints)


def _role_server(path: Path, where: str, value: Any) -> str:
    from agent.llm.http import normalize_base_url

    if not isinstance(value, str) or not value.strip():
        raise _fail(path, f"{where}: the endpoint must be a server's base URL")
    try:
        normalize_base_url(value.strip())
    except ValueError as exc:
        raise _fail(path, f"{where}: the endpoint must be a server's base URL: {exc}") from None
    return value.strip()


def _check_settings(path: Path, name: str, pipeline: str, settings: dict[str, Any], profile: str) -> None:
    """Every setting of the method, with the profile, validated as a run would validate it."""
    registered = pipelines.get(pipeline)
    for key in ("words", "prompt", "prompt_id", "story"):
        if key in settings:
            raise _fail(path, f"methods ({name}): {key} comes from the grid, not from set")
    try:
        shared = dict(registered.settings.profile_settings(profile)) if registered.settings else {}
        if registered.takes == "prompt":
            registered.typed({**registered.defaults, **shared, **settings, "prompt": "x", "words": 1000})
        else:
            known = set(registered.settings.known()) if registered.settings else set()
            bad = sorted(set(settings) - known)
            if bad:
                raise ConfigError(f"unknown setting {bad[0]!r} for {pipeline}")
    except ConfigError as exc:
        raise _fail(path, f"methods ({name}): {exc}") from None


def _judge(path: Path, raw: Any) -> JudgeSpec:
    if not isinstance(raw, dict):
        raise _fail(path, "judge is a table")
    unknown = sorted(set(raw) - JUDGE_KEYS)
    if unknown:
        raise _fail(path, f"judge: unknown key {unknown[0]!r}; known: {', '.join(sorted(JUDGE_KEYS))}")
    for key in ("endpoint", "model"):
        if key in raw and not isinstance(raw[key], str):
            raise _fail(path, f"judge.{key} must be a string")
    ints = {
        k: _positive(path, raw[k], f"judge.{k}") for k in ("max_tokens", "min_output", "context_tokens") if k in raw
    }
    seed = raw.get("seed", 0)
    if not isinstance(seed, int) or isinstance(seed, bool) or not 0 <= seed <= SEED_MAX:
        raise _fail(path, f"judge.seed must be a whole number from 0 to {SEED_MAX}")
    temperature = raw.get("temperature", 0.1)
    if not isinstance(temperature, int | float) or isinstance(temperature, bool) or not 0 <= temperature <= 2:
        raise _fail(path, "judge.temperature must be a number between 0 and 2")
    return JudgeSpec(
        endpoint=raw.get("endpoint"), model=raw.get("model"), temperature=float(temperature), seed=seed, **ints
    )
