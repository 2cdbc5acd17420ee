"""Tools: @tool, interrupt_tool, ToolContext, interrupt expiry and approval middleware.

The names below are loaded on first use, so importing one submodule does not import the others.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._context import Reconcile as Reconcile
    from ._context import StepJournal as StepJournal
    from ._context import ToolContext as ToolContext
    from ._context import ToolMiddleware as ToolMiddleware
    from ._context import to_json as to_json
    from ._expiry import OnExpire as OnExpire
    from ._expiry import Policy as Policy
    from ._expiry import check_expires_in as check_expires_in
    from ._expiry import checked_policy as checked_policy
    from ._expiry import deadline_metadata as deadline_metadata
    from ._expiry import expiry_note as expiry_note
    from ._middleware import approve as approve
    from ._middleware import deny as deny
    from ._middleware import tool_approval as tool_approval
    from ._signature import Signature as Signature
    from ._signature import checked_input as checked_input
    from ._signature import checked_output as checked_output
    from ._signature import checked_resume as checked_resume
    from ._signature import data_as as data_as
    from ._signature import describe as describe
    from ._signature import read_signature as read_signature
    from ._signature import schema as schema
    from ._signature import validated as validated
    from ._signature import validation_message as validation_message
    from ._tool import InterruptedCall as InterruptedCall
    from ._tool import Tool as Tool
    from ._tool import ToolDecorator as ToolDecorator
    from ._tool import interrupt_tool as interrupt_tool
    from ._tool import tool as tool

_WHERE = {
    "InterruptedCall": "._tool",
    "OnExpire": "._expiry",
    "Policy": "._expiry",
    "Reconcile": "._context",
    "Signature": "._signature",
    "StepJournal": "._context",
    "Tool": "._tool",
    "ToolContext": "._context",
    "ToolDecorator": "._tool",
    "ToolMiddleware": "._context",
    "approve": "._middleware",
    "check_expires_in": "._expiry",
    "checked_input": "._signature",
    "checked_output": "._signature",
    "checked_policy": "._expiry",
    "checked_resume": "._signature",
    "data_as": "._signature",
    "deadline_metadata": "._expiry",
    "deny": "._middleware",
    "describe": "._signature",
    "expiry_note": "._expiry",
    "interrupt_tool": "._tool",
    "read_signature": "._signature",
    "schema": "._signature",
    "to_json": "._context",
    "tool": "._tool",
    "tool_approval": "._middleware",
    "validated": "._signature",
    "validation_message": "._signature",
}

__all__ = [
    "InterruptedCall",
    "OnExpire",
    "Policy",
    "Reconcile",
    "Signature",
    "StepJournal",
    "Tool",
    "ToolContext",
    "ToolDecorator",
    "ToolMiddleware",
    "approve",
    "check_expires_in",
    "checked_input",
    "checked_output",
    "checked_policy",
    "checked_resume",
    "data_as",
    "deadline_metadata",
    "deny",
    "describe",
    "expiry_note",
    "interrupt_tool",
    "read_signature",
    "schema",
    "to_json",
    "tool",
    "tool_approval",
    "validated",
    "validation_message",
]


def __getattr__(name: str) -> Any:
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(where, __name__), name)
    globals()[name] = value
    return value
