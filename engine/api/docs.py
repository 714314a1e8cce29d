"""The interactive API docs (Swagger UI, served from the installed ``swagger-ui-bundle``; no CDN).

``GET /api/v2/docs`` is Swagger UI over ``/api/v2/openapi.json`` (try each route from the
browser); its scripts and styles come from ``/api/v2/docs/static/`` (the files of the
``swagger-ui-bundle`` package, so the page works offline). ``GET /`` is a short page linking
to the docs and the schema.
"""

from __future__ import annotations

from fastapi import FastAPI
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

#: Path of the interactive docs, under the API prefix.
DOCS_PATH = "/docs"


def install_docs(app: FastAPI, prefix: str) -> str:
    """Add Swagger UI at ``prefix + DOCS_PATH`` and the ``/`` page linking to it; returns the docs path."""
    from swagger_ui_bundle import swagger_ui_path

    docs = f"{prefix}{DOCS_PATH}"
    static = f"{docs}/static"
    app.mount(static, StaticFiles(directory=swagger_ui_path), name="swagger-ui")

    @app.get(docs, include_in_schema=False)
    def swagger_ui() -> HTMLResponse:
        """Swagger UI over the API's OpenAPI schema, its files served from ``static``."""
        return get_swagger_ui_html(openapi_url=app.openapi_url or f"{prefix}/openapi.json",
                                   title=f"{app.title} — interactive docs",
                                   swagger_js_url=f"{static}/swagger-ui-bundle.js",
                                   swagger_css_url=f"{static}/swagger-ui.css",
                                   swagger_favicon_url=f"{static}/favicon-32x32.png")

    @app.get("/", include_in_schema=False)
    def home() -> HTMLResponse:
        """A short page linking to the docs and the schema."""
        return HTMLResponse(
            "<!doctype html><html><head><meta charset='utf-8'><title>Loomscope local API</title></head>"
            f"<body><h1>Loomscope local API</h1><p><a href='{docs}'>Interactive API docs</a> · "
            f"<a href='{app.openapi_url}'>OpenAPI schema</a></p></body></html>")

    return docs


__all__ = ["DOCS_PATH", "install_docs"]
