"""The OpenAPI 3.1 description of the inbox's HTTP API (``GET /openapi.json``), by hand, tested against the routes."""

from __future__ import annotations

from typing import Any

_ERROR = {"$ref": "#/components/responses/Error"}
_ID = {"type": "string"}


def _param(name: str, where: str, description: str, schema: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "name": name,
        "in": where,
        "required": where == "path",
        "description": description,
        "schema": schema or {"type": "string"},
    }


def _ok(description: str, ref: str, kind: str = "application/json") -> dict[str, Any]:
    return {
        "200": {"description": description, "content": {kind: {"schema": {"$ref": f"#/components/schemas/{ref}"}}}},
        "4XX": _ERROR,
    }


_LIMIT = {"type": "integer", "minimum": 1}
ROUTES: dict[str, dict[str, dict[str, Any]]] = {
    "/api/interrupts": {
        "get": {
            "summary": "Pending interrupts across sessions and agents, one page",
            "parameters": [
                _param("agent", "query", "only this agent's interrupts"),
                _param("tool", "query", "only calls to this tool"),
                _param("session", "query", "only this session's interrupts"),
                _param("older_than", "query", "waiting at least this long: seconds, or 90s, 10m, 2h, 1d"),
                _param("newer_than", "query", "waiting less than this long"),
                _param("in_doubt", "query", "true: only calls whose effect is unknown; false: none of them"),
                _param("order", "query", "oldest (default) or newest first", {"enum": ["oldest", "newest"]}),
                _param("limit", "query", "interrupts per page (default 50, at most 500)", _LIMIT),
                _param("cursor", "query", "next_cursor of the previous page"),
            ],
            "responses": _ok("a page of pending interrupts", "Page"),
        }
    },
    "/api/interrupts/{snapshot_id}": {
        "get": {
            "summary": "One snapshot's pending interrupts, their answer schemas, and the session's recent messages",
            "parameters": [_param("snapshot_id", "path", "the paused turn's snapshot id")],
            "responses": _ok("the pending interrupts of the snapshot", "Detail"),
        }
    },
    "/api/interrupts/{snapshot_id}/answer": {
        "post": {
            "summary": "Answer the snapshot's interrupt, or all of them (exactly once; validated like any resume)",
            "parameters": [_param("snapshot_id", "path", "the paused turn's snapshot id")],
            "requestBody": {
                "required": True,
                "content": {
                    "application/json": {
                        "schema": {
                            "oneOf": [
                                {"$ref": "#/components/schemas/Answer"},
                                {"$ref": "#/components/schemas/Answers"},
                            ]
                        }
                    }
                },
            },
            "responses": _ok("the answer was taken and the turn resumed", "AnswerResult")
            | {"409": {"description": "already answered: details name who and when", **_ERROR}},
        }
    },
    "/api/interrupts/{snapshot_id}/extend": {
        "post": {
            "summary": "Move an interrupt's deadline (whoever may answer the call; audited)",
            "parameters": [_param("snapshot_id", "path", "the paused turn's snapshot id")],
            "requestBody": {
                "required": True,
                "content": {
                    "application/json": {
                        "schema": {
                            "type": "object",
                            "additionalProperties": False,
                            "properties": {
                                "by": {"type": "string", "description": "a duration: 90s, 10m, 2h, 1d"},
                                "until": {"type": "string", "format": "date-time"},
                                "ref": {"type": "string"},
                                "tool": {"type": "string"},
                            },
                        }
                    }
                },
            },
            "responses": {
                "200": {
                    "description": "the new deadline",
                    "content": {
                        "application/json": {
                            "schema": {
                                "type": "object",
                                "properties": {
                                    "snapshot_id": _ID,
                                    "expires_at": {"type": "string", "format": "date-time"},
                                },
                            }
                        }
                    },
                },
                "403": {"description": "the policy refuses this identity: details.reason", **_ERROR},
            },
        }
    },
    "/api/sessions/{session_id}/audit": {
        "get": {
            "summary": "A session's audit trail: every answer, who gave it and when",
            "parameters": [_param("session_id", "path", "the session id"), _param("limit", "query", "at most", _LIMIT)],
            "responses": _ok("the session's audit entries, oldest first", "Audit"),
        }
    },
    "/api/audit": {
        "get": {
            "summary": "The newest answers across the store",
            "parameters": [_param("limit", "query", "at most this many (default 100)", _LIMIT)],
            "responses": _ok("audit entries, newest first", "Audit"),
        }
    },
    "/api/events": {
        "get": {
            "summary": "Server-sent events: pending (count), interrupt.created (an interrupt), interrupt.resolved",
            "responses": {"200": {"description": "an event stream", "content": {"text/event-stream": {}}}},
        }
    },
    "/openapi.json": {
        "get": {"summary": "This description", "security": [], "responses": {"200": {"description": "OK"}}}
    },
}
"""Every route of the API, by path and method."""

_SCHEMAS: dict[str, Any] = {
    "Error": {
        "type": "object",
        "required": ["status", "message"],
        "properties": {
            "status": {"type": "string", "description": "canonical status, e.g. INVALID_ARGUMENT, ABORTED"},
            "message": {"type": "string"},
            "details": {"description": "e.g. answered_by/answered_at for a second answer, reason for a token"},
        },
    },
    "Interrupt": {
        "type": "object",
        "properties": {
            "snapshot_id": _ID,
            "session_id": _ID,
            "agent": {"type": ["string", "null"]},
            "agent_path": {
                "type": "array",
                "items": {"type": "string"},
                "description": "the agents it came through, down to its tool's (a sub-agent's, surfaced)",
            },
            "tool": _ID,
            "ref": {"type": ["string", "null"]},
            "label": _ID,
            "input": {"description": "the tool input"},
            "data": {"description": "the interrupt data"},
            "is_hold": {"type": "boolean"},
            "in_doubt": {"type": "boolean"},
            "created_at": {"type": "string", "format": "date-time"},
            "age_seconds": {"type": "number"},
            "resume_token": {"type": ["string", "null"], "description": "send it back with the answer"},
            "answers": {
                "type": "object",
                "description": "decision -> the JSON Schemas of what it carries (null: any JSON)",
                "additionalProperties": {"type": "object"},
            },
        },
    },
    "Page": {
        "type": "object",
        "properties": {
            "items": {"type": "array", "items": {"$ref": "#/components/schemas/Interrupt"}},
            "next_cursor": {"type": ["string", "null"]},
        },
    },
    "Detail": {
        "type": "object",
        "properties": {
            "snapshot_id": _ID,
            "session_id": _ID,
            "agent": {"type": ["string", "null"]},
            "created_at": {"type": "string", "format": "date-time"},
            "interrupts": {"type": "array", "items": {"$ref": "#/components/schemas/Interrupt"}},
            "messages": {"type": "array", "items": {"type": "object"}, "description": "Genkit wire messages"},
        },
    },
    "Answer": {
        "type": "object",
        "required": ["decision"],
        "additionalProperties": False,
        "properties": {
            "decision": {"enum": ["approve", "reject", "respond", "restart", "edit"]},
            "ref": {"type": "string", "description": "which call (checked against the snapshot)"},
            "tool": {"type": "string"},
            "payload": {"description": "approve/reject/restart/edit: the resume payload"},
            "output": {"description": "respond: the call's output; reject: the note the model sees"},
            "input": {"description": "edit: the revised tool input"},
            "reason": {"type": "string", "description": "reject: why, told to the model"},
            "resume_token": {"type": "string", "description": "the interrupt's resume token (an answer link's)"},
        },
    },
    "Answers": {
        "type": "object",
        "required": ["answers"],
        "additionalProperties": False,
        "description": "a snapshot that waits on several calls: one answer per call, each naming its ref",
        "properties": {
            "answers": {
                "type": "array",
                "minItems": 1,
                "maxItems": 100,
                "items": {"$ref": "#/components/schemas/Answer"},
            }
        },
    },
    "AnswerResult": {
        "type": "object",
        "properties": {
            "decision": {"type": ["string", "null"], "description": "the decision (null: several answers)"},
            "decisions": {
                "type": "array",
                "items": {"type": "object"},
                "description": "each call's ref, tool, decision",
            },
            "snapshot_id": {"type": ["string", "null"], "description": "the resumed turn's snapshot"},
            "session_id": {"type": ["string", "null"]},
            "finish_reason": {"type": ["string", "null"]},
            "answered": {"type": ["object", "null"], "properties": {"by": {}, "at": {"type": ["string", "null"]}}},
            "output": {"type": "object", "description": "the resumed turn's output (Genkit wire)"},
        },
    },
    "Audit": {"type": "object", "properties": {"entries": {"type": "array", "items": {"type": "object"}}}},
}


def openapi() -> dict[str, Any]:
    """The OpenAPI document."""
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "interlock inbox",
            "version": "1",
            "description": "Pending interrupts of interlock agents: list them, read one, answer it once, audit.",
        },
        "paths": ROUTES,
        "components": {
            "schemas": _SCHEMAS,
            "responses": {
                "Error": {
                    "description": "a refusal with its canonical status",
                    "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}},
                }
            },
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
        "security": [{"bearer": []}],
    }
