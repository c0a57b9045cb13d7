"""A real MCP client (the `mcp` Python SDK from PyPI, not written here)
driving `drydock mcp` over stdio against real daemons.

    python client.py DRYDOCK_BIN CONTAINER_NAME

DRYDOCK_HOME must be set. It lists the tools, lists containers, diagnoses
the broken container, proposes a repair, reads the request's timeline as a
resource and its evidence, and checks tool errors. Any expectation that
fails raises (exit code 1). On success it prints one JSON line for the Rust
test: the request and approval ids and the approval command.
"""

import asyncio
import json
import os
import sys

from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.types import TextContent, TextResourceContents

EXPECTED_TOOLS = {
    "list_containers",
    "list_services",
    "service_tasks",
    "diagnose",
    "propose_repair",
    "follow_up",
    "get_request",
    "list_requests",
    "get_evidence",
    "list_updates",
    "propose_update",
    "propose_build",
}
READ_ONLY = EXPECTED_TOOLS - {"propose_repair", "follow_up", "propose_update", "propose_build"}


def text_of(result) -> str:
    return "\n".join(c.text for c in result.content if isinstance(c, TextContent))


def blocks_of(result) -> list:
    return [c.text for c in result.content if isinstance(c, TextContent)]


def check(cond, what):
    if not cond:
        raise AssertionError(what)


async def call(session, name, args):
    """A successful answer: the untrusted-data notice first, then the JSON."""
    result = await session.call_tool(name, args)
    check(not result.is_error, f"{name}({args}) failed: {text_of(result)}")
    blocks = blocks_of(result)
    check(len(blocks) == 2 and blocks[0].startswith("UNTRUSTED DATA"), f"{name}: the notice comes first: {blocks[:1]}")
    return json.loads(blocks[1])


async def main(drydock: str, container: str) -> None:
    params = StdioServerParameters(
        command=drydock,
        args=["mcp"],
        env={"DRYDOCK_HOME": os.environ["DRYDOCK_HOME"], "NO_COLOR": "1"},
    )
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            init = await session.initialize()
            check(init.server_info.name == "drydock", f"server name {init.server_info.name}")
            check(
                "cannot approve" in (init.instructions or ""),
                f"instructions say what the server cannot do: {init.instructions}",
            )

            tools = {t.name: t for t in (await session.list_tools()).tools}
            check(set(tools) == EXPECTED_TOOLS, f"tools: {sorted(tools)}")
            for name in READ_ONLY:
                ann = tools[name].annotations
                check(ann is not None and ann.read_only_hint is True, f"{name} is annotated read-only: {ann}")
            propose = tools["propose_repair"]
            check(
                "changes nothing by itself" in (propose.description or ""),
                f"propose_repair says it changes nothing: {propose.description}",
            )
            check(propose.annotations.read_only_hint is False, "propose_repair creates a request")
            check(propose.annotations.destructive_hint is False, "propose_repair destroys nothing")
            check(
                "message" in propose.input_schema.get("required", []),
                f"message is required: {propose.input_schema}",
            )

            listed = await call(session, "list_containers", {})
            names = [c["name"] for c in listed["containers"]]
            check(container in names, f"{container} is listed: {names}")
            mine = next(c for c in listed["containers"] if c["name"] == container)
            check(mine["health"] == "unhealthy", f"its health: {mine}")

            # The main engine is no Swarm manager and no service is in
            # scope: the answer says so; a name that is no name is refused.
            services = await call(session, "list_services", {})
            check(services["swarm"] is False and services["why"], f"no Swarm here: {services}")
            bad = await session.call_tool("service_tasks", {"service": "../requests"})
            check(bad.is_error and "not a Swarm service name" in text_of(bad), f"bad name: {text_of(bad)}")

            diagnosis = await call(
                session, "diagnose", {"message": "the web service is unhealthy", "container": container}
            )
            check(diagnosis["status"] == "completed", f"diagnose-only completes: {diagnosis['status']}")
            causes = diagnosis["diagnosis"]["causes"]
            check(causes and causes[0]["class"] == "unhealthy", f"cause: {causes}")
            cited = causes[0]["evidence_ids"]
            evidence_ids = {e["id"] for e in diagnosis["evidence"]}
            check(cited and set(cited) <= evidence_ids, f"cited {cited} among {evidence_ids}")
            check(diagnosis["plan"] is None, "a diagnosis has no plan")
            check("UNTRUSTED" in diagnosis["notice"], "container text is marked untrusted")
            # The planted line reaches the assistant as evidence data, under
            # the notice, and nothing more.
            planted = os.environ.get("PLANTED", "")
            every = await call(session, "get_evidence", {"request_id": diagnosis["request_id"]})
            check(
                not planted or planted in json.dumps(every),
                "the planted line is delivered as container text",
            )

            one = await call(
                session, "get_evidence", {"request_id": diagnosis["request_id"], "evidence_id": cited[0]}
            )
            check(one["evidence"]["id"] == cited[0], f"evidence by id: {one}")
            check("container_text" in one["evidence"], "evidence data is under container_text")

            proposal = await call(
                session, "propose_repair", {"message": "please fix the web service", "container": container}
            )
            check(proposal["status"] == "waiting_approval", f"the plan waits for a person: {proposal['status']}")
            steps = proposal["plan"]["steps"]
            check(steps and steps[0]["action"] == "restart", f"plan: {steps}")
            pending = [a for a in proposal["approvals"] if a["status"] == "pending"]
            check(len(pending) == 1, f"one pending approval: {proposal['approvals']}")
            approval = pending[0]
            check(
                approval["for_a_person"].endswith(f"drydock approve {approval['approval_id']}"),
                f"what a person runs: {approval}",
            )
            check(approval["container_name"].lstrip("/") == container, f"decoded claims: {approval}")
            check("Nothing has been changed" in proposal["what_happens_next"], proposal["what_happens_next"])

            got = await call(session, "get_request", {"id": proposal["request_id"]})
            check(got["status"] == "waiting_approval", f"get_request: {got['status']}")
            listed = await call(session, "list_requests", {"status": "waiting_approval", "limit": 10})
            check(
                any(r["request_id"] == proposal["request_id"] for r in listed["requests"]),
                f"list_requests: {listed}",
            )

            templates = await session.list_resource_templates()
            check(
                any(t.uri_template == "drydock://requests/{id}/timeline" for t in templates.resource_templates),
                f"templates: {templates}",
            )
            uri = f"drydock://requests/{proposal['request_id']}/timeline"
            resources = await session.list_resources()
            check(any(str(r.uri) == uri for r in resources.resources), f"resources: {resources}")
            contents = (await session.read_resource(uri)).contents
            timeline = json.loads(next(c.text for c in contents if isinstance(c, TextResourceContents)))
            kinds = [e["kind"] for e in timeline["events"]]
            check("approval_requested" in kinds or "status" in kinds, f"timeline kinds: {kinds}")

            # Errors are tool errors with a message, not crashes.
            for name, args, needle in [
                ("get_request", {"id": "req-doesnotexist"}, "404"),
                ("get_request", {"id": "../approvals"}, "not a request id"),
                ("diagnose", {"message": "   "}, "1 to 2000 characters"),
                ("list_requests", {"status": "Robert'); DROP"}, "request state"),
            ]:
                result = await session.call_tool(name, args)
                check(result.is_error, f"{name}({args}) is a tool error")
                check(needle in text_of(result), f"{name}({args}): {text_of(result)}")

            print(
                json.dumps(
                    {
                        "request_id": proposal["request_id"],
                        "approval_id": approval["approval_id"],
                        "for_a_person": approval["for_a_person"],
                        "evidence_types": sorted({e["type"] for e in diagnosis["evidence"]}),
                    }
                )
            )


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
