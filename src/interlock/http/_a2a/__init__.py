"""A2A 1.0 (the ``a2a`` extra): interlock agents served as A2A agents, and A2A agents as sub-agents.

See ``docs/a2a.md``. ``AgentServer(agents, protocols=[A2A()])`` serves each agent at
``/a2a/{agent}``; ``interlock serve MODULE:ATTR --a2a`` does the same from the command line.
"""

from __future__ import annotations

try:
    from .mount import A2A as A2A
    from .tasks import EXTENSION_URI as EXTENSION_URI
except ModuleNotFoundError as exc:
    if (exc.name or "").split(".")[0] in ("a2a", "starlette", "sse_starlette", "google"):
        raise ImportError(f"A2A needs {exc.name}: pip install 'interlock[a2a]'") from exc
    raise
