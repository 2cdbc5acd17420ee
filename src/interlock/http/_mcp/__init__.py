"""interlock's agents as MCP tools that pause for a person (MCP 2026-07-28, the ``mcp`` extra).

``AgentServer(agents, protocols=[MCP()])`` (or ``interlock serve app:agents --mcp``)
serves Streamable HTTP MCP at ``/mcp``: :mod:`.mount` (the endpoint), :mod:`.calls` (the tool
handlers over the protocol seam), :mod:`.forms` (elicitation forms and answers),
:mod:`.state` (the sealed ``requestState``), :mod:`.tasks` (the Tasks extension, its shapes in
:mod:`.shapes`). See ``docs/mcp.md``.
"""

from __future__ import annotations

try:
    from .mount import MCP as MCP
except ModuleNotFoundError as exc:
    if (exc.name or "").split(".")[0] in ("mcp", "mcp_types", "starlette"):
        raise ImportError(f"serving MCP needs {exc.name}: pip install 'interlock[mcp]'") from exc
    raise
