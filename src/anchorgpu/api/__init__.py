"""JSON API, version 1, described once with django-ninja: each request body and each answer is a pydantic
Schema (``schemas``), from which ninja validates requests, writes answers and generates the OpenAPI document
(``openapi``). What the values mean (a term on sale, a real SSH key, a card that runs an environment) stays
with the same Django forms the pages use, so that both give the same messages; the views call the same
services and hold no rules."""
