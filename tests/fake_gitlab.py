"""A local stand-in for GitLab's REST API v4 generic package registry, for driving `python-gitlab`.

Run as `python -m tests.fake_gitlab [--token T] [--project ID] [--project-path group/datasets]`. It binds
127.0.0.1 on an OS-chosen port and publishes {"host", "port", "pid"} through `tests.local_service.serve`.
There is one project; it is addressed by its id ("42") or by its URL-encoded path ("group%2Fdatasets").
State lives in memory only.

API routes (all need the header `PRIVATE-TOKEN: <token>`, else 401 {"message": "401 Unauthorized"};
another project gives 404 {"message": "404 Project Not Found"}):

    PUT    /api/v4/projects/:id/packages/generic/:name/:version/:file_name
           stores the raw body as that file of package (name, version), creating the package (with a new
           integer id) if needed; re-uploading a file name replaces its bytes. 201 {"message": "201 Created"},
           or the package file's JSON with `?select=package_file`. The version must match `^\\d+\\.\\d+\\.\\d+$`
           and the names `^[A-Za-z0-9][A-Za-z0-9._+-]*$` without "..", else 400 {"message": ...}.
    GET    /api/v4/projects/:id/packages/generic/:name/:version/:file_name
           the raw bytes (application/octet-stream), or 404 {"message": "404 Not Found"}
    GET    /api/v4/projects/:id/packages
           the project's packages, paginated (`page`, `per_page` ≤ 100, default 20) with GitLab's headers
           X-Page, X-Per-Page, X-Total, X-Total-Pages, X-Next-Page, X-Prev-Page and Link (rel next/prev/
           first/last; python-gitlab's `get_all=True` follows rel="next"). Filters: `package_name`
           (case-insensitive substring, as GitLab's ILIKE), `package_type`, `package_version`, `status`;
           `order_by` (created_at, name, version, type) and `sort` (asc, desc).
    GET    /api/v4/projects/:id/packages/:package_id                   one package, or 404
    DELETE /api/v4/projects/:id/packages/:package_id                   204, or 404
    GET    /api/v4/projects/:id/packages/:package_id/package_files     the package's files, paginated

A package is {"id", "name", "version", "package_type": "generic", "status": "default", "created_at",
"_links"}; a package file is {"id", "package_id", "created_at", "file_name", "size", "file_sha1",
"file_sha256"}.

Control routes (JSON, no token needed):

    GET  /_state      {"packages": [{"id", "name", "version", "files": {file_name: {"size", "sha256"}}}]}
    GET  /_requests   [{"method", "path", "query", "token_ok", "body_size"}, ...] every non-control request
                      in arrival order; `path` is the raw (still percent-encoded) path, `body_size` the
                      request body bytes the fake received (for a dropped upload: the part it read)
    POST /_faults     {"drop_upload": true} the next upload reads part of its body, then the connection is
                      aborted without an answer and nothing is stored; {"truncate_download": true} the next
                      download sends the full Content-Length and half the body, then aborts. Each fault
                      fires once (python-gitlab does not retry failed connections unless it is created with
                      retry_transient_errors=True); `false` disarms it. Answers the armed faults.
    POST /_reset      forgets packages, files, ids, recorded requests and faults

This file imports nothing from nemo_gym: it stands for a foreign server.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import itertools
import math
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from urllib.parse import unquote, urlencode

import orjson
from aiohttp import web

from tests.local_service import serve

VERSION_RE = re.compile(r"^\d+\.\d+\.\d+$")
NAME_RE = re.compile(r"^(?!.*\.\.)[A-Za-z0-9][A-Za-z0-9._+-]*$")
DROP_AFTER_BYTES = 64 * 1024
DEFAULT_PER_PAGE, MAX_PER_PAGE = 20, 100


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


@dataclass
class PackageFile:
    id: int
    package_id: int
    file_name: str
    data: bytes
    created_at: str = field(default_factory=now)

    def as_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "package_id": self.package_id,
            "created_at": self.created_at,
            "file_name": self.file_name,
            "size": len(self.data),
            "file_sha1": hashlib.sha1(self.data).hexdigest(),
            "file_sha256": hashlib.sha256(self.data).hexdigest(),
        }


@dataclass
class Package:
    id: int
    name: str
    version: str
    files: dict[str, PackageFile] = field(default_factory=dict)
    created_at: str = field(default_factory=now)

    def as_json(self, project_path: str) -> dict[str, Any]:
        return {
            "id": self.id,
            "name": self.name,
            "version": self.version,
            "package_type": "generic",
            "status": "default",
            "created_at": self.created_at,
            "_links": {"web_path": f"/{project_path}/-/packages/{self.id}"},
        }


@dataclass
class Registry:
    token: str
    project_ids: frozenset[str]  # the id and the path, both as they appear decoded in a URL
    project_path: str
    packages: dict[int, Package] = field(default_factory=dict)
    requests: list[dict[str, Any]] = field(default_factory=list)
    faults: dict[str, bool] = field(default_factory=dict)
    ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    file_ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    def reset(self) -> None:
        self.packages.clear()
        self.requests.clear()
        self.faults.clear()
        self.ids, self.file_ids = itertools.count(1), itertools.count(1)

    def find(self, name: str, version: str) -> Package | None:
        return next((p for p in self.packages.values() if (p.name, p.version) == (name, version)), None)

    def take_fault(self, name: str) -> bool:
        return self.faults.pop(name, False)


SORT_KEYS: dict[str, Callable[[Package], Any]] = {
    "created_at": lambda package: package.id,
    "name": lambda package: package.name,
    "version": lambda package: tuple(int(part) for part in package.version.split(".")),
    "type": lambda package: "generic",
}


REGISTRY = web.AppKey("registry", Registry)


def json_response(payload: Any, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
    return web.Response(
        body=orjson.dumps(payload), status=status, headers=headers, content_type="application/json"
    )


def error(status: int, message: str) -> web.Response:
    return json_response({"message": message}, status)


def paginated(request: web.Request, items: list[Any]) -> web.Response:
    """One page of `items` with the headers GitLab sends for offset pagination."""
    try:
        page = max(1, int(request.query.get("page", 1)))
        per_page = min(MAX_PER_PAGE, max(1, int(request.query.get("per_page", DEFAULT_PER_PAGE))))
    except ValueError:
        return error(400, "400 Bad request - page and per_page must be integers")
    total_pages = max(1, math.ceil(len(items) / per_page))
    base = f"{request.scheme}://{request.host}{request.rel_url.raw_path}"

    def link(to_page: int) -> str:
        return f"{base}?{urlencode({**request.query, 'page': to_page, 'per_page': per_page})}"

    links = {"first": 1, "last": total_pages}
    headers = {
        "X-Page": str(page),
        "X-Per-Page": str(per_page),
        "X-Total": str(len(items)),
        "X-Total-Pages": str(total_pages),
        "X-Next-Page": str(page + 1) if page < total_pages else "",
        "X-Prev-Page": str(page - 1) if page > 1 else "",
    }
    if page < total_pages:
        links["next"] = page + 1
    if 1 < page <= total_pages:
        links["prev"] = page - 1
    headers["Link"] = ", ".join(f'<{link(n)}>; rel="{rel}"' for rel, n in links.items())
    return json_response(items[(page - 1) * per_page : page * per_page], headers=headers)


@web.middleware
async def record_requests(
    request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
) -> web.StreamResponse:
    registry = request.app[REGISTRY]
    if not request.path.startswith("/_"):
        entry = {
            "method": request.method,
            "path": request.rel_url.raw_path,
            "query": dict(request.query),
            "token_ok": request.headers.get("PRIVATE-TOKEN") == registry.token,
            "body_size": request.content_length or 0,
        }
        registry.requests.append(entry)
        request["log_entry"] = entry
    return await handler(request)


async def api(request: web.Request) -> web.StreamResponse:
    """Every /api/v4/projects/... route: the raw path is split by hand, so that an encoded project path
    ("group%2Fdatasets") stays one segment whatever the router would decode."""
    registry = request.app[REGISTRY]
    if not request["log_entry"]["token_ok"]:
        return error(401, "401 Unauthorized")
    segments = [unquote(s) for s in request.rel_url.raw_path.removeprefix("/api/v4/projects/").split("/")]
    if segments[0] not in registry.project_ids:
        return error(404, "404 Project Not Found")
    rest, method = segments[1:], request.method
    match rest:
        case ["packages", "generic", name, version, file_name] if method == "PUT":
            return await upload(request, registry, name, version, file_name)
        case ["packages", "generic", name, version, file_name] if method in ("GET", "HEAD"):
            return await download(request, registry, name, version, file_name)
        case ["packages"] if method == "GET":
            return list_packages(request, registry)
        case ["packages", package_id, *tail] if package_id.isdigit():
            package = registry.packages.get(int(package_id))
            if package is None:
                return error(404, "404 Package Not Found")
            if tail == [] and method == "GET":
                return json_response(package.as_json(registry.project_path))
            if tail == [] and method == "DELETE":
                del registry.packages[package.id]
                return web.Response(status=204)
            if tail == ["package_files"] and method == "GET":
                return paginated(request, [f.as_json() for f in package.files.values()])
    return error(404, "404 Not Found")


async def upload(
    request: web.Request, registry: Registry, name: str, version: str, file_name: str
) -> web.StreamResponse:
    for label, value, pattern in (
        ("package_name", name, NAME_RE),
        ("package_version", version, VERSION_RE),
        ("file_name", file_name, NAME_RE),
    ):
        if not pattern.match(value):
            return error(400, f"400 Bad request - {label} is invalid")
    if registry.take_fault("drop_upload"):
        partial = await request.content.read(DROP_AFTER_BYTES)
        request["log_entry"]["body_size"] = len(partial)
        return await abort_connection(request)
    data = await request.read()
    request["log_entry"]["body_size"] = len(data)
    package = registry.find(name, version)
    if package is None:
        package = Package(next(registry.ids), name, version)
        registry.packages[package.id] = package
    package.files[file_name] = package_file = PackageFile(
        next(registry.file_ids), package.id, file_name, data
    )
    if request.query.get("select") == "package_file":
        return json_response(package_file.as_json(), 201)
    return json_response({"message": "201 Created"}, 201)


async def download(
    request: web.Request, registry: Registry, name: str, version: str, file_name: str
) -> web.StreamResponse:
    package = registry.find(name, version)
    package_file = package.files.get(file_name) if package else None
    if package_file is None:
        return error(404, "404 Not Found")
    headers = {"Content-Disposition": f'attachment; filename="{file_name}"'}
    if not registry.take_fault("truncate_download"):
        return web.Response(body=package_file.data, headers=headers, content_type="application/octet-stream")
    response = web.StreamResponse(headers=headers)
    response.content_type = "application/octet-stream"
    response.content_length = len(package_file.data)
    await response.prepare(request)
    await response.write(package_file.data[: len(package_file.data) // 2])
    return await abort_connection(request)


async def abort_connection(request: web.Request) -> web.StreamResponse:
    """Drop the connection without (finishing) an answer; the handler is then cancelled."""
    if request.transport is not None:
        request.transport.abort()
    await asyncio.sleep(3600)
    raise ConnectionResetError("fake_gitlab dropped the connection")


def list_packages(request: web.Request, registry: Registry) -> web.Response:
    query = request.query
    if query.get("package_type", "generic") != "generic" or query.get("status", "default") != "default":
        return paginated(request, [])
    name_part = query.get("package_name", "").lower()
    packages = [
        p
        for p in registry.packages.values()
        if name_part in p.name.lower() and query.get("package_version", p.version) == p.version
    ]
    order_by = query.get("order_by", "created_at")
    if order_by not in SORT_KEYS or query.get("sort", "asc") not in ("asc", "desc"):
        return error(400, "400 Bad request - order_by or sort does not have a valid value")
    packages.sort(key=SORT_KEYS[order_by], reverse=query.get("sort") == "desc")
    return paginated(request, [p.as_json(registry.project_path) for p in packages])


async def get_state(request: web.Request) -> web.Response:
    packages = request.app[REGISTRY].packages.values()
    return json_response(
        {
            "packages": [
                {
                    "id": p.id,
                    "name": p.name,
                    "version": p.version,
                    "files": {
                        f.file_name: {"size": len(f.data), "sha256": hashlib.sha256(f.data).hexdigest()}
                        for f in p.files.values()
                    },
                }
                for p in packages
            ]
        }
    )


async def get_requests(request: web.Request) -> web.Response:
    return json_response(request.app[REGISTRY].requests)


async def set_faults(request: web.Request) -> web.Response:
    body = await request.json()
    unknown = set(body) - {"drop_upload", "truncate_download"}
    if unknown:
        return error(400, f"unknown faults {sorted(unknown)}")
    faults = request.app[REGISTRY].faults
    faults.update({name: bool(armed) for name, armed in body.items()})
    return json_response({name: armed for name, armed in faults.items() if armed})


async def reset(request: web.Request) -> web.Response:
    request.app[REGISTRY].reset()
    return json_response({})


def make_app(token: str, project: str, project_path: str = "group/datasets") -> web.Application:
    app = web.Application(middlewares=[record_requests], client_max_size=1024**3)
    app[REGISTRY] = Registry(token, frozenset({project, project_path}), project_path)
    app.router.add_get("/_state", get_state)
    app.router.add_get("/_requests", get_requests)
    app.router.add_post("/_faults", set_faults)
    app.router.add_post("/_reset", reset)
    app.router.add_route("*", "/api/v4/projects/{rest:.*}", api)
    return app


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--token", default="glpat-test")
    parser.add_argument("--project", default="42", help="the project's id")
    parser.add_argument("--project-path", default="group/datasets", help="the project's path (an alias)")
    args = parser.parse_args()
    serve(make_app(args.token, args.project, args.project_path))


if __name__ == "__main__":
    main()
