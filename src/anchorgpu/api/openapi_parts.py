"""Small pieces the operations declare for the OpenAPI document: their error answers and query parameters."""

from __future__ import annotations

from . import schemas as s


def errors(*codes: int) -> dict:
    """The error answers ``codes`` (each an ``Error``); ``openapi`` adds 503, which any request may meet."""
    return {code: s.Error for code in codes}


def query_parameters(schema, explode: tuple[str, ...] = ()) -> list[dict]:
    """A query Schema's fields as OpenAPI query parameters."""
    props = schema.model_json_schema()["properties"]
    out = []
    for name, prop in props.items():
        prop = {k: v for k, v in prop.items() if k not in ("default", "title", "description")}
        param = {"name": name, "in": "query", "required": False, "schema": prop,
                 "description": schema.model_fields[name].description or ""}
        if name in explode:
            param.update(style="form", explode=True)
        out.append(param)
    return out
