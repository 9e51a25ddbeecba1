#!/usr/bin/env python3
"""Checks a running `acpdb serve --http` with the Python MCP SDK's Streamable HTTP client.

    pip install mcp
    python3 scripts/http_client.py http://127.0.0.1:8931/mcp [--token-file FILE] [--mode legacy]

Lists the tools and resources, calls acp_query (stats) and acp_get_architecture, reads
acp://vars, and checks that an unknown tool is a JSON-RPC error. Exits non-zero on any failure.
"""

import argparse
import asyncio
import json
import sys

from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError


async def check(url: str, token: str | None, mode: str) -> None:
    headers = {"Authorization": f"Bearer {token}"} if token else None
    transport = streamable_http_client(url, http_client=create_mcp_http_client(headers=headers))
    async with Client(transport, mode=mode) as client:
        tools = [tool.name for tool in (await client.list_tools()).tools]
        print(f"{len(tools)} tools: {', '.join(tools)}")
        assert "acp_query" in tools and "acp_hack" in tools, tools
        stats = await client.call_tool("acp_query", {"type": "stats"})
        result = json.loads(stats.content[0].text)["result"]
        print(f"acp_query stats: {result['files']} files, {result['symbols']} symbols")
        architecture = await client.call_tool("acp_get_architecture", {})
        print(f"acp_get_architecture: {len(architecture.content[0].text)} characters")
        resources = [str(r.uri) for r in (await client.list_resources()).resources]
        print(f"resources: {', '.join(resources)}")
        vars_text = (await client.read_resource("acp://vars")).contents[0].text
        print(f"acp://vars: {len(vars_text)} characters")
        try:
            await client.call_tool("acp_nope", {})
        except MCPError as error:
            print(f"acp_nope: error {error.error.code}: {error.error.message[:60]}…")
        else:
            raise AssertionError("an unknown tool was not an error")
    print("ok")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("url")
    parser.add_argument("--token-file")
    parser.add_argument(
        "--mode", default="auto", help="the SDK's connect mode: auto (default) or legacy"
    )
    args = parser.parse_args()
    token = open(args.token_file).read().strip() if args.token_file else None
    asyncio.run(check(args.url, token, args.mode))
    return 0


if __name__ == "__main__":
    sys.exit(main())
