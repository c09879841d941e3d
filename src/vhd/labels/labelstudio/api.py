"""Push tasks to a Label Studio server and pull its decisions back, through its REST API.

``vhd label --push-labelstudio URL --project NAME`` creates (or reuses) the project, gives it a
Local Storage per top media folder (Label Studio serves local files only from a storage strictly
inside ``LABEL_STUDIO_LOCAL_FILES_DOCUMENT_ROOT``) and imports vhd's tasks with their
pre-annotations. Pushing again never duplicates: a sample the project holds keeps its task (brought
up to date, or left alone with ``only_new``) and only new samples are added. Videos go to
``NAME (videos)`` when images are pushed too. ``--pull-labelstudio`` downloads both projects'
JSON (or JSON-MIN) exports and imports them as `vhd.labels.labelstudio.convert.import_labelstudio` does a file.

Plain httpx against the documented API, not ``label-studio-sdk``: the SDK (2.x) pulls in
opencv, pandas, nltk and exact pins (``requests-mock==1.12.1``, ``pyjwt<2.14``) that a vhd
environment should not have to carry for a dozen HTTP calls. The token comes from
``LABEL_STUDIO_API_KEY`` (the SDK's variable): a Personal Access Token or a legacy token (see
`LabelStudioApi`). The module is nearly 500 lines long because the client, its two token kinds
and the push and pull that are its only users read best together.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vhd.errors import BackendError, ConfigError, MissingDependencyError
from vhd.labels.labelstudio.convert import (
    LOCAL_FILES,
    LabelStudioImport,
    build_tasks,
    import_labelstudio,
    labeling_config,
)
from vhd.netread import MAX_BYTES, TIMEOUT, ReplyRefused, client_limits, parse_json
from vhd.records import Kind
from vhd.store.sqlite import StoreLike, store_path

TOKEN_ENV = "LABEL_STUDIO_API_KEY"
"""Environment variable holding the Label Studio token (a Personal Access Token or a legacy token)."""

DOCUMENT_ROOT_RULE = (
    "Label Studio serves local files only from a storage strictly inside LABEL_STUDIO_LOCAL_FILES_DOCUMENT_ROOT "
    "(pass that folder as --media-root; media may lie in any folders below it, never in it directly)"
)
"""The document-root rule, in one line, for the errors that break it."""

EXPORT_BYTES = 1 << 30
"""Largest project export read (1 GiB: about half a million tasks); API answers take 32 MiB."""

EXPORT_TIMEOUT = 600.0
"""Seconds an export may take to arrive, start to end (other calls take the client's timeout)."""

MAX_PAGES = 10_000
"""Most pages of projects or tasks read (100 a page): a server that never ends its list stops here."""

REFRESH = "/api/token/refresh/"
"""Where a Personal Access Token (a JWT refresh token) is exchanged for a short-lived access token."""


def jwt_claims(token: str) -> dict[str, Any] | None:
    """The claims of a JWT, read without checking its signature; None when the token is not a JWT.

    Label Studio's Personal Access Tokens are JWT refresh tokens (``token_type`` ``refresh``);
    legacy tokens are 40 hexadecimal characters.
    """
    import base64
    import binascii
    import json

    parts = token.split(".")
    if len(parts) != 3:
        return None
    try:
        claims = json.loads(base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4)))
    except (ValueError, binascii.Error):
        return None
    return claims if isinstance(claims, dict) else None


def _detail(text: str) -> str:
    """Label Studio's explanation in an error answer: its ``detail`` when JSON has one, else the whole text."""
    import json

    try:
        got = json.loads(text)
    except ValueError:
        return text.strip()
    if isinstance(got, dict) and isinstance(got.get("detail"), str) and len(got) == 1:
        return str(got["detail"])
    return text.strip()


class LabelStudioApi:
    """The few Label Studio endpoints vhd uses (projects, local storage, tasks, import, export).

    Two kinds of token are taken, told apart by their shape: a Personal Access Token (a JWT
    refresh token, the kind Label Studio recommends) is exchanged at ``POST /api/token/refresh/``
    for an access token sent as ``Authorization: Bearer``, refreshed before it expires (five
    minutes) or when the server refuses it; a legacy token is sent as ``Authorization: Token``.
    """

    def __init__(self, url: str, token: str | None = None, *, timeout: float = 60.0, transport: Any = None) -> None:
        """Connect to a server (a Personal Access Token is exchanged for an access token now).

        Args:
            url: The server, e.g. ``http://127.0.0.1:8080``.
            token: Personal Access Token or legacy token (default: ``$LABEL_STUDIO_API_KEY``).
            timeout: Seconds per request, from sending it to the answer's last byte (an export
                gets `EXPORT_TIMEOUT`). Answers are read through `vhd.netread`: at most 32 MiB
                (an export `EXPORT_BYTES`), uncompressed, JSON at most 100 levels deep.
            transport: An ``httpx`` transport to talk through (default: the network).

        Raises:
            ConfigError: No token, or the server refuses it (the message names the kind tried).
            BackendError: The server cannot be reached.
            MissingDependencyError: httpx is not installed.
        """
        try:
            import httpx
        except ImportError as exc:
            raise MissingDependencyError("httpx", "labelstudio") from exc
        token = token or os.environ.get(TOKEN_ENV)
        if not token:
            raise ConfigError(
                f"no Label Studio token: set {TOKEN_ENV} to a Personal Access Token "
                "(Label Studio > Account & Settings > Personal Access Token)"
            )
        self.url = url.rstrip("/")
        self.timeout = timeout
        self.token = token
        claims = jwt_claims(token)
        self.personal = claims is not None and claims.get("token_type") == "refresh"
        self.kind = "Personal Access Token" if self.personal else "legacy token" if claims is None else "access token"
        self.expires = 0.0
        limits = client_limits(httpx, timeout=timeout, asynchronous=False)
        self.client = httpx.Client(base_url=self.url, trust_env=False, transport=transport, **limits)
        if self.personal:
            self.refresh()
        else:
            self.client.headers["Authorization"] = f"{'Token' if claims is None else 'Bearer'} {token}"

    def refresh(self) -> None:
        """Exchange the Personal Access Token for a fresh access token.

        Raises:
            ConfigError: The server refuses the token.
            BackendError: The server cannot be reached or answers otherwise.
        """
        import time

        got = self._send("POST", REFRESH, json={"refresh": self.token}, auth=False)
        access = got.get("access") if isinstance(got, dict) else None
        if not isinstance(access, str) or not access:
            raise BackendError(f"Label Studio at {self.url} answered {REFRESH} without an access token")
        exp = (jwt_claims(access) or {}).get("exp")
        self.expires = float(exp) if isinstance(exp, int | float) else time.time() + 240
        self.client.headers["Authorization"] = f"Bearer {access}"

    def close(self) -> None:
        """Close the connection pool."""
        self.client.close()

    def __enter__(self) -> LabelStudioApi:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _refused(self, path: str, text: str) -> ConfigError:
        said = _detail(text)
        if self.personal:
            fix = (
                "create a new one (Account & Settings > Personal Access Token) and check that Personal Access "
                "Tokens are enabled (Organization > API Tokens Settings)"
            )
        elif self.kind == "legacy token":
            fix = (
                "Label Studio 1.23 turns legacy tokens off by default: put a Personal Access Token in "
                f"{TOKEN_ENV}, or enable legacy tokens (Organization > API Tokens Settings)"
            )
        else:
            fix = f"access tokens expire in minutes: put a Personal Access Token in {TOKEN_ENV}"
        return ConfigError(
            f"Label Studio at {self.url} refused the {self.kind} from {TOKEN_ENV} (401 on {path}: {said}): {fix}"
        )

    def _send(self, method: str, path: str, *, raw: bool = False, auth: bool = True, **kwargs: Any) -> Any:
        import httpx

        try:
            if auth:
                resp = self.client.request(method, path, **kwargs)
            else:
                resp = self.client.request(method, path, headers={"Authorization": ""}, **kwargs)
        except httpx.HTTPError as exc:
            raise BackendError(f"Label Studio at {self.url} cannot be reached ({exc}): is it running?") from None
        except ReplyRefused as exc:  # too slow, too large or compressed
            raise BackendError(f"Label Studio {method} {path}: the answer was refused: {exc}") from None
        if resp.status_code == 401:
            raise self._refused(path, resp.text)
        if resp.status_code >= 400:
            rule = f"; {DOCUMENT_ROOT_RULE}" if "LOCAL_FILES_DOCUMENT_ROOT" in resp.text else ""
            raise BackendError(f"Label Studio {method} {path} answered {resp.status_code}: {_detail(resp.text)}{rule}")
        if not raw and "json" in resp.headers.get("content-type", ""):
            try:
                return parse_json(resp.content)
            except ValueError as exc:  # not JSON, too deep, too many objects
                raise BackendError(f"Label Studio {method} {path} answered unreadable JSON: {exc}") from None
        return resp.content

    def request(self, method: str, path: str, *, raw: bool = False, **kwargs: Any) -> Any:
        """One API call; the decoded JSON (the body's bytes with ``raw``, or when it is not JSON).

        With a Personal Access Token, the access token is refreshed when it is about to expire,
        and once more when the server refuses it.

        Raises:
            ConfigError: The server refuses the token (which kind, and Label Studio's reason).
            BackendError: The server cannot be reached or answers with an error (status and its
                whole message).
        """
        import time

        if self.personal and time.time() > self.expires - 30:
            self.refresh()
        try:
            return self._send(method, path, raw=raw, **kwargs)
        except ConfigError:
            if not self.personal:
                raise
        self.refresh()
        return self._send(method, path, raw=raw, **kwargs)

    def find_project(self, title: str) -> int | None:
        """The id of the project with this title, or None."""
        page: str | None = "/api/projects?page_size=100"
        seen: set[str] = set()
        while page:
            if page in seen or len(seen) >= MAX_PAGES:
                raise BackendError(f"Label Studio at {self.url} lists projects without end (page {page!r} again)")
            seen.add(page)
            got = self.request("GET", page)
            items = got.get("results", []) if isinstance(got, dict) else got
            for p in items if isinstance(items, list) else ():
                if isinstance(p, dict) and p.get("title") == title:
                    return _id(p, "project")
            nxt = got.get("next") if isinstance(got, dict) else None
            if isinstance(nxt, str) and nxt.startswith(self.url + "/"):
                page = nxt[len(self.url) :]
            elif nxt is None or nxt == "":
                page = None
            else:  # the token must never go to another server
                raise BackendError(f"Label Studio at {self.url} sent a next page elsewhere ({str(nxt)[:100]!r})")
        return None

    def create_project(self, title: str, label_config: str) -> int:
        """Create a project; its id."""
        return int(self.request("POST", "/api/projects", json={"title": title, "label_config": label_config})["id"])

    def ensure_local_storage(self, project: int, folder: str) -> int:
        """A Local Storage of ``folder`` on the project (reused when one exists); its id."""
        for st in self.request("GET", f"/api/storages/localfiles?project={project}"):
            if os.path.normpath(st.get("path") or "") == os.path.normpath(folder):
                return int(st["id"])
        body = {"project": project, "path": folder, "use_blob_urls": True, "title": "vhd media"}
        return int(self.request("POST", "/api/storages/localfiles", json=body)["id"])

    def tasks(self, project: int) -> list[dict[str, Any]]:
        """Every task of the project, with its predictions (100 a page)."""
        out: list[dict[str, Any]] = []
        ids: set[Any] = set()
        for page in range(1, MAX_PAGES + 1):
            params = {"project": project, "page": page, "page_size": 100, "fields": "all", "resolve_uri": "false"}
            got = self.request("GET", "/api/tasks", params=params)
            batch = got.get("tasks", []) if isinstance(got, dict) else got
            if not isinstance(batch, list) or len(batch) > 100:
                raise BackendError(f"Label Studio at {self.url} answered /api/tasks page {page} with no list of 100")
            fresh = [t for t in batch if isinstance(t, dict) and t.get("id") not in ids]
            if batch and not fresh:  # a server that ignores `page` would be read forever
                raise BackendError(f"Label Studio at {self.url} answered /api/tasks page {page} with tasks seen before")
            ids.update(t.get("id") for t in fresh)
            out += fresh
            total = got.get("total", len(out)) if isinstance(got, dict) else len(out)
            if not batch or not isinstance(total, int) or len(out) >= total:
                return out
        raise BackendError(f"Label Studio at {self.url} lists more than {MAX_PAGES * 100} tasks in a project")

    def import_tasks(self, project: int, tasks: list[dict[str, Any]]) -> int:
        """Import tasks (with predictions); how many the server took."""
        got = self.request("POST", f"/api/projects/{project}/import", json=tasks)
        return int(got.get("task_count", len(tasks))) if isinstance(got, dict) else len(tasks)

    def update_task(self, old: dict[str, Any], new: dict[str, Any]) -> bool:
        """Bring a task already pushed up to date: its data, and vhd's prediction; whether anything changed.

        People's annotations, and predictions that are not vhd's (``model_version`` ``vhd-...``),
        are left as they are.
        """
        changed = False
        if old.get("data") != new["data"]:
            self.request("PATCH", f"/api/tasks/{old['id']}", json={"data": new["data"]})
            changed = True
        mine = [p for p in old.get("predictions") or [] if str(p.get("model_version", "")).startswith("vhd-")]
        for pred in new.get("predictions", []):
            if any(_same_prediction(p, pred) for p in mine):
                continue
            body = {"task": old["id"], **pred}
            if mine:
                self.request("PATCH", f"/api/predictions/{mine[0]['id']}", json=body)
            else:
                self.request("POST", "/api/predictions", json=body)
            changed = True
        return changed

    def export(self, project: int, export_type: str = "JSON") -> bytes:
        """The project's export (``JSON`` or ``JSON_MIN``) as the server writes it."""
        limits = {MAX_BYTES: EXPORT_BYTES, TIMEOUT: max(EXPORT_TIMEOUT, self.timeout)}
        params = {"exportType": export_type}
        got = self.request("GET", f"/api/projects/{project}/export", raw=True, params=params, extensions=limits)
        return bytes(got)


def _id(item: dict[str, Any], what: str) -> int:
    """An id from the server's answer, or a one-line error."""
    value = item.get("id")
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 2**63:
        return value
    raise BackendError(f"Label Studio answered a {what} whose id is not a number ({str(value)[:40]!r})")


def _same_prediction(old: dict[str, Any], new: dict[str, Any]) -> bool:
    """Whether a stored prediction says what vhd would push (keys the server adds are not compared)."""

    def said(pred: dict[str, Any]) -> tuple[Any, ...]:
        result = [(r.get("from_name"), r.get("type"), r.get("value")) for r in pred.get("result") or []]
        score = pred.get("score")
        return pred.get("model_version"), result, None if score is None else round(float(score), 6)

    return said(old) == said(new)


def _task_keys(task: dict[str, Any]) -> list[str]:
    """What ties a task to a sample: its vhd ``sample_id``, and its media URL (tasks stripped of vhd's ids)."""
    data = task.get("data") or {}
    keys = [f"id:{data['sample_id']}"] if isinstance(data.get("sample_id"), str) else []
    media = data.get("image") or data.get("video")
    return [*keys, f"url:{media}"] if isinstance(media, str) else keys


@dataclass
class PushResult:
    """What a push did.

    Attributes:
        projects: Project title to id (videos go to ``<NAME> (videos)`` when both kinds are present).
        created: Titles of projects created now (the others existed).
        tasks: Tasks added (samples the project did not hold yet).
        updated: Tasks already pushed whose data or vhd prediction changed (brought up to date).
        unchanged: Tasks already pushed and left as they were (up to date, or ``only_new``).
        with_predictions: Of the tasks added, with the annotator's verdict as a pre-annotation.
        storages: The folders given to Label Studio as Local Storages.
    """

    projects: dict[str, int] = field(default_factory=dict)
    created: list[str] = field(default_factory=list)
    tasks: int = 0
    updated: int = 0
    unchanged: int = 0
    with_predictions: int = 0
    storages: list[str] = field(default_factory=list)


def storage_folders(paths: list[str], media_root: str | os.PathLike[str]) -> list[str]:
    """The folders Local Storages must cover: per top folder under ``media_root``, its media's common folder.

    Media in sibling folders (``ROOT/a``, ``ROOT/b``) get one storage each, since Label Studio
    refuses a storage at its document root itself.

    Raises:
        ConfigError: A medium lies directly in ``media_root`` or outside it (`DOCUMENT_ROOT_RULE`).
    """
    root = os.path.abspath(media_root)
    groups: dict[str, list[str]] = {}
    for p in paths:
        folder = os.path.dirname(os.path.abspath(p))
        if folder == root or os.path.commonpath([root, folder]) != root:
            raise ConfigError(f"{p} is not in a folder below --media-root {root}: {DOCUMENT_ROOT_RULE}")
        top = os.path.relpath(folder, root).split(os.sep)[0]
        groups.setdefault(top, []).append(folder)
    return sorted(os.path.commonpath(folders) for folders in groups.values())


def project_titles(project: str) -> dict[Kind, str]:
    """The project each media kind goes to: images to ``NAME``, videos to ``NAME (videos)`` beside them."""
    return {Kind.IMAGE: project, Kind.VIDEO: f"{project} (videos)"}


def push_labelstudio(
    url: str,
    project: str,
    *,
    store: StoreLike = "vhd.db",
    name: str | None = None,
    config_hash: str | None = None,
    media_root: str | os.PathLike[str] = "/",
    only_new: bool = False,
    token: str | None = None,
    transport: Any = None,
) -> PushResult:
    """Send a store's samples to Label Studio as tasks with pre-annotations; pushing again is safe.

    A sample the project already holds (found by its task's ``sample_id``, else its media URL)
    is never added twice: its task's data and vhd's prediction are brought up to date (people's
    annotations are kept), or left alone with ``only_new``. Only new samples become new tasks.

    Args:
        url: The server.
        project: Project title (created with vhd's labeling config when missing). When the
            store holds both kinds, videos go to ``<project> (videos)``.
        store: The store.
        name: Only this labelled set's samples (default: every annotated sample).
        config_hash: Verdicts of this configuration (default: each sample's latest).
        media_root: The server's ``LABEL_STUDIO_LOCAL_FILES_DOCUMENT_ROOT``.
        only_new: Add new samples only; leave tasks already pushed as they are.
        token: Personal Access Token or legacy token (default ``$LABEL_STUDIO_API_KEY``).
        transport: An ``httpx`` transport (default: the network).
    """
    from vhd.labels.files import CATEGORIES

    by_kind = build_tasks(
        store=store, name=name, config_hash=config_hash, media_root=media_root, url_prefix=LOCAL_FILES
    )
    if not by_kind:
        raise ConfigError(f"nothing to push from {store_path(store)}: annotate samples or import a labelled set first")
    paths = [t["data"]["path"] for tasks in by_kind.values() for t in tasks]
    result = PushResult(storages=storage_folders(paths, media_root))
    with LabelStudioApi(url, token, transport=transport) as api:
        for kind, tasks in sorted(by_kind.items(), key=lambda kv: kv[0].value):
            title = project_titles(project)[kind] if len(by_kind) > 1 else project
            pid = api.find_project(title)
            if pid is None:
                pid = api.create_project(title, labeling_config(kind, [n for _, n in CATEGORIES]))
                result.created.append(title)
            result.projects[title] = pid
            for folder in result.storages:
                api.ensure_local_storage(pid, folder)
            held: dict[str, dict[str, Any]] = {}
            for pushed in api.tasks(pid):
                for key in _task_keys(pushed):
                    held.setdefault(key, pushed)
            new: list[dict[str, Any]] = []
            for task in tasks:
                old = next((held[k] for k in _task_keys(task) if k in held), None)
                if old is None:
                    new.append(task)
                elif not only_new and api.update_task(old, task):
                    result.updated += 1
                else:
                    result.unchanged += 1
            if new:
                result.tasks += api.import_tasks(pid, new)
            result.with_predictions += sum("predictions" in t for t in new)
    return result


@dataclass
class PullResult(LabelStudioImport):
    """What a pull read and wrote: the import's counts, and the projects it read.

    Attributes:
        projects: Titles of the projects pulled (``NAME`` and, when it exists, ``NAME (videos)``).
        missing: Titles looked for and not found (``NAME (videos)`` when only images were pushed).
    """

    projects: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)


def pull_labelstudio(
    url: str,
    project: str,
    *,
    store: StoreLike = "vhd.db",
    name: str = "labelstudio",
    media_root: str | os.PathLike[str] = "/",
    export_type: str = "JSON",
    save_to: str | os.PathLike[str] | None = None,
    token: str | None = None,
    transport: Any = None,
) -> PullResult:
    """Download a project's export (with its ``NAME (videos)`` project's) and import the decisions.

    Push sends videos to ``<project> (videos)`` when a store holds images too; pull reads both
    projects into one labelled set, and says which it found.

    Args:
        url: The server.
        project: Project title (or the videos project's own title, to pull only it).
        store: The store.
        name: The labelled set to write.
        media_root: The server's document root (to match tasks by their media URL).
        export_type: ``JSON`` or ``JSON_MIN``.
        save_to: Keep the downloaded export (both projects' tasks in one file) here (default: a
            temporary file, removed).
        token: Personal Access Token or legacy token (default ``$LABEL_STUDIO_API_KEY``).
        transport: An ``httpx`` transport (default: the network).

    Raises:
        ConfigError: No such project, no token, or an unusable export.
    """
    from vhd.fileio import atomic_write

    titles = [project] if project.endswith(" (videos)") else list(project_titles(project).values())
    bodies: list[bytes] = []
    found: list[str] = []
    with LabelStudioApi(url, token, transport=transport) as api:
        for title in titles:
            pid = api.find_project(title)
            if pid is not None:
                found.append(title)
                bodies.append(api.export(pid, export_type))
    if not found:
        raise ConfigError(f"no project {project!r} on {url}: check --project (push it first)")
    with tempfile.TemporaryDirectory(prefix="vhd-ls-") as tmp:
        path = Path(save_to) if save_to is not None else Path(tmp) / "export.json"
        atomic_write(path, _join_lists(bodies, found))
        got_import = import_labelstudio(path, store=store, name=name, media_root=media_root)
    fields = {k: getattr(got_import, k) for k in got_import.__dataclass_fields__}
    return PullResult(**fields, projects=found, missing=[t for t in titles if t not in found])


def _join_lists(bodies: list[bytes], titles: list[str]) -> bytes:
    """Several exports (JSON lists) as one list, joined as text: `import_labelstudio` checks the tasks."""
    if len(bodies) == 1:
        return bodies[0]
    inner: list[bytes] = []
    for body, title in zip(bodies, titles, strict=True):
        text = body.strip().removeprefix(b"\xef\xbb\xbf").strip()
        if not (text.startswith(b"[") and text.endswith(b"]")):
            raise ConfigError(f"Label Studio's export of {title!r} is not a list of tasks: export it again")
        if text[1:-1].strip():
            inner.append(text[1:-1])
    return b"[" + b",".join(inner) + b"]"
