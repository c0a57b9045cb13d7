"""Check answers the agent gave against docs/openapi.json.

    python validate.py OPENAPI.json ANSWERS.json

ANSWERS.json is a list of {"method", "path" (the document's template),
"status", "content_type", "body" (parsed JSON, or a string)}, as
tests/e2e/openapi.rs collects them from a real agent. Every answer must be
documented for its operation and status, with that content type, and a JSON
body must validate against the schema given there (JSON Schema 2020-12, as
OpenAPI 3.1 uses it). Prints one line per problem and exits 1 if there is
any; run from the virtualenv the test makes (schemathesis brings
jsonschema_rs).
"""

import json
import sys
import urllib.parse

import jsonschema_rs


def main() -> int:
    with open(sys.argv[1], encoding="utf-8") as f:
        doc = json.load(f)
    with open(sys.argv[2], encoding="utf-8") as f:
        answers = json.load(f)
    problems = []
    for a in answers:
        where = f"{a['method'].upper()} {a['path']} {a['status']}"
        operation = doc["paths"].get(a["path"], {}).get(a["method"].lower())
        if operation is None:
            problems.append(f"{where}: no such operation in the document")
            continue
        response = operation["responses"].get(str(a["status"]))
        if response is None:
            problems.append(f"{where}: status not documented")
            continue
        content = response.get("content", {})
        ctype = a["content_type"].split(";")[0].strip()
        if ctype not in content:
            problems.append(f"{where}: content type {ctype} not documented ({list(content)})")
            continue
        schema = content[ctype].get("schema")
        if schema is None or not isinstance(a["body"], (dict, list)):
            continue
        # The whole document as the schema, its root pointing at this
        # response's schema: references to components resolve in it.
        pointer = "/".join(
            part.replace("~", "~0").replace("/", "~1")
            for part in ["paths", a["path"], a["method"].lower(), "responses", str(a["status"]), "content", ctype, "schema"]
        )
        validator = jsonschema_rs.Draft202012Validator(
            {**doc, "$ref": "#/" + urllib.parse.quote(pointer, safe="/~")}
        )
        for error in validator.iter_errors(a["body"]):
            at = "/".join(str(p) for p in error.instance_path)
            problems.append(f"{where}: at /{at}: {error.message[:300]}")
    for p in problems:
        print(p)
    print(f"{len(answers)} answers checked, {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
